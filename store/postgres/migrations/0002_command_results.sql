-- 0002: stored command results, so that a repeated command answers with the first result.

CREATE TABLE command_results (
    sk       bigint NOT NULL,
    idem_key text   NOT NULL,
    result   bytea  NOT NULL, -- contract.CommandResult as JSON
    PRIMARY KEY (sk, idem_key)
);
