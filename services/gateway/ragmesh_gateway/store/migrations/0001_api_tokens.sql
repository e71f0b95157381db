-- Bearer tokens "rmk_<token_id>_<secret>". Only sha256(secret) is stored; the plaintext is shown
-- once at creation. A revoked token keeps its row (revoked_at set) so audits can still name it.
CREATE TABLE api_tokens (
    token_id      text PRIMARY KEY CHECK (token_id ~ '^[0-9a-f]{16}$'),
    secret_sha256 bytea NOT NULL CHECK (octet_length(secret_sha256) = 32),
    client_id     text NOT NULL CHECK (client_id ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'),
    scopes        text[] NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now(),
    revoked_at    timestamptz,
    last_used_at  timestamptz
);

CREATE INDEX api_tokens_client_id_idx ON api_tokens (client_id);
