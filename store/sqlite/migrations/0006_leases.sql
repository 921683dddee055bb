-- 0006: workers claim queued runs with leases (store/leases.go).

-- attempt is the run's attempt number (a run queued again after an expired lease is a new run
-- with the next attempt). queued_ms is when the run became queued (Unix milliseconds, the
-- database's clock), NULL when its status is not queued: claims hand runs out oldest first.
-- project and agent_id are copied from the session when the run is created, so that a claim
-- filtered by them reads an index of its own. lease_id, lease_token (the fencing token, one
-- more at every claim, never reset) and lease_expires_ms are the lease; lease_id is NULL when
-- nobody holds the run.
ALTER TABLE runs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runs ADD COLUMN queued_ms INTEGER;
ALTER TABLE runs ADD COLUMN project TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN agent_id TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN lease_id TEXT;
ALTER TABLE runs ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN lease_expires_ms INTEGER;

UPDATE runs SET
    project = (SELECT project FROM sessions WHERE sessions.sk = runs.sk),
    agent_id = (SELECT agent_id FROM sessions WHERE sessions.sk = runs.sk),
    queued_ms = CASE status WHEN 'queued'
        THEN CAST(round(unixepoch(json_extract(data, '$.startedAt'), 'subsec') * 1000) AS INTEGER) END;

-- The claimable runs (queued, no lease) in queue order, overall and per project and agent: a
-- claim reads the first entry that matches.
CREATE INDEX runs_claim ON runs (queued_ms, sk, ord) WHERE queued_ms IS NOT NULL AND lease_id IS NULL;
CREATE INDEX runs_claim_project ON runs (project, queued_ms, sk, ord) WHERE queued_ms IS NOT NULL AND lease_id IS NULL;
CREATE INDEX runs_claim_agent ON runs (agent_id, queued_ms, sk, ord) WHERE queued_ms IS NOT NULL AND lease_id IS NULL;
-- The held leases by expiry: the lease expirer reads the expired ones.
CREATE INDEX runs_lease_expiry ON runs (lease_expires_ms) WHERE lease_id IS NOT NULL;
