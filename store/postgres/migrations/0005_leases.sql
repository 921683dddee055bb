-- 0005: workers claim queued runs with leases (store/leases.go).

-- attempt is the run's attempt number (a run queued again after an expired lease is a new run
-- with the next attempt). queued_ms is when the run became queued (Unix milliseconds, the
-- database's clock), NULL when its status is not queued: claims hand runs out oldest first.
-- project and agent_id are copied from the session when the run is created, so that a claim
-- filtered by them reads an index of its own. lease_id, lease_token (the fencing token, one
-- more at every claim, never reset) and lease_expires_ms are the lease; lease_id is NULL when
-- nobody holds the run.
ALTER TABLE runs
    ADD COLUMN attempt integer NOT NULL DEFAULT 1,
    ADD COLUMN queued_ms bigint,
    ADD COLUMN project text NOT NULL DEFAULT '',
    ADD COLUMN agent_id text NOT NULL DEFAULT '',
    ADD COLUMN lease_id text,
    ADD COLUMN lease_token bigint NOT NULL DEFAULT 0,
    ADD COLUMN lease_expires_ms bigint;

UPDATE runs AS r SET project = s.project, agent_id = s.agent_id,
    queued_ms = CASE WHEN r.data->>'status' = 'queued'
        THEN (extract(epoch FROM (r.data->>'startedAt')::timestamptz) * 1000)::bigint END
    FROM sessions AS s WHERE s.sk = r.sk;

-- The claimable runs (queued, no lease) in queue order, overall and per project and agent: a
-- claim locks the first entry that matches and that no other claim has locked (SKIP LOCKED).
CREATE INDEX runs_claim ON runs (queued_ms, sk, ord) WHERE queued_ms IS NOT NULL AND lease_id IS NULL;
CREATE INDEX runs_claim_project ON runs (project, queued_ms, sk, ord) WHERE queued_ms IS NOT NULL AND lease_id IS NULL;
CREATE INDEX runs_claim_agent ON runs (agent_id, queued_ms, sk, ord) WHERE queued_ms IS NOT NULL AND lease_id IS NULL;
-- The held leases by expiry: the lease expirer reads the expired ones.
CREATE INDEX runs_lease_expiry ON runs (lease_expires_ms) WHERE lease_id IS NOT NULL;
