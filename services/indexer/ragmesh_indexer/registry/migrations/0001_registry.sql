-- Index version registry of the indexer (schema "indexer"; search_path is set by the migrator).
-- Timestamps come from the application's clock so that lifecycle timing can be tested.

CREATE TABLE corpora (
    id          text PRIMARY KEY CHECK (id <> ''),
    library     text NOT NULL DEFAULT '',
    version     text NOT NULL DEFAULT '',
    root        text NOT NULL DEFAULT '',
    include     text[] NOT NULL DEFAULT '{}',
    exclude     text[] NOT NULL DEFAULT '{}',
    visibility  text NOT NULL DEFAULT 'public',
    license     text NOT NULL DEFAULT '',
    source_url  text NOT NULL DEFAULT '',
    url_base    text NOT NULL DEFAULT '',
    chunking    text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

CREATE TABLE index_versions (
    corpus         text NOT NULL REFERENCES corpora (id),
    index_version  text NOT NULL CHECK (index_version <> ''),
    -- Creation order, independent of clocks: "older than the active version" compares this.
    seq            bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    state          text NOT NULL
                   CHECK (state IN ('candidate', 'validated', 'active', 'previous', 'retired', 'failed')),
    content_hash   text NOT NULL,
    config_hash    text NOT NULL,
    collection     text NOT NULL UNIQUE CHECK (collection <> ''),
    created_at     timestamptz NOT NULL,
    created_by     text NOT NULL,
    reason         text NOT NULL DEFAULT '',
    stats          jsonb NOT NULL DEFAULT '{}',
    validation     jsonb,
    promoted_at    timestamptz,
    retired_at     timestamptz,
    updated_at     timestamptz NOT NULL,
    PRIMARY KEY (corpus, index_version),
    CHECK ((state = 'retired') = (retired_at IS NOT NULL)),
    CHECK (state NOT IN ('active', 'previous') OR promoted_at IS NOT NULL),
    -- At most one active and one previous version per corpus. Exclusion constraints rather than
    -- partial unique indexes because they can be deferred to commit: rollback swaps two rows.
    CONSTRAINT index_versions_one_active
        EXCLUDE USING btree (corpus WITH =) WHERE (state = 'active') DEFERRABLE INITIALLY DEFERRED,
    CONSTRAINT index_versions_one_previous
        EXCLUDE USING btree (corpus WITH =) WHERE (state = 'previous') DEFERRABLE INITIALLY DEFERRED
);

CREATE INDEX index_versions_by_hashes ON index_versions (corpus, content_hash, config_hash);

-- Audit trail: never updated or deleted.
CREATE TABLE index_version_events (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    corpus         text NOT NULL,
    index_version  text NOT NULL,
    from_state     text,
    to_state       text NOT NULL,
    actor          text NOT NULL,
    reason         text NOT NULL DEFAULT '',
    at             timestamptz NOT NULL,
    FOREIGN KEY (corpus, index_version) REFERENCES index_versions (corpus, index_version)
);

CREATE INDEX index_version_events_by_corpus ON index_version_events (corpus, id);

-- Build progress for Status: one row per version, overwritten as the build advances.
CREATE TABLE build_progress (
    corpus         text NOT NULL,
    index_version  text NOT NULL,
    stage          text NOT NULL,
    done           bigint NOT NULL CHECK (done >= 0),
    total          bigint NOT NULL CHECK (total >= 0),
    updated_at     timestamptz NOT NULL,
    PRIMARY KEY (corpus, index_version),
    FOREIGN KEY (corpus, index_version) REFERENCES index_versions (corpus, index_version)
);
