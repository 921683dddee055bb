-- 0008: API keys (store/keys.go, docs/security.md).
--
-- id is the key's public id (the part of sk_<id>_<secret> a person may show); hash is the
-- SHA-256 of the secret, never the secret itself. scopes is a comma-separated sorted list.
-- session_id and parent are '' unless the key is limited to one session (a stream token) or
-- derived from another key (a web UI login). Times are Unix milliseconds, 0 for none.
CREATE TABLE api_keys (
    id            text   PRIMARY KEY,
    hash          bytea  NOT NULL,
    name          text   NOT NULL DEFAULT '',
    project       text   NOT NULL,
    scopes        text   NOT NULL,
    session_id    text   NOT NULL DEFAULT '',
    parent        text   NOT NULL DEFAULT '',
    created_ms    bigint NOT NULL,
    expires_ms    bigint NOT NULL DEFAULT 0,
    revoked_ms    bigint NOT NULL DEFAULT 0,
    last_used_ms  bigint NOT NULL DEFAULT 0
);
-- The derived keys by expiry: DeleteExpiredKeys reads the expired ones.
CREATE INDEX api_keys_derived_expiry ON api_keys (expires_ms) WHERE parent <> '';
