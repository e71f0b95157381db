-- Read grants for internal corpora (default deny). Public corpora need no grant. A grant may name
-- a corpus that does not exist yet, so there is no foreign key into the indexer's registry.
CREATE TABLE corpus_grants (
    client_id  text NOT NULL CHECK (client_id ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'),
    corpus_id  text NOT NULL CHECK (length(corpus_id) BETWEEN 1 AND 200),
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client_id, corpus_id)
);

CREATE INDEX corpus_grants_corpus_id_idx ON corpus_grants (corpus_id);
