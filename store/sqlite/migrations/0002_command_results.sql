-- 0002: stored command results, so that a repeated command answers with the first result.

CREATE TABLE command_results (
    sk       INTEGER NOT NULL,
    idem_key TEXT    NOT NULL,
    result   BLOB    NOT NULL, -- contract.CommandResult as JSON
    PRIMARY KEY (sk, idem_key)
) WITHOUT ROWID;
