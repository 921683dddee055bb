package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sessiond/sessiond/store"
)

// sqlNowMS is the database's clock in Unix milliseconds, in SQL. It is computed from
// julianday(), which every SQLite has, not from unixepoch('subsec') (SQLite 3.42 and newer), so
// that the schema and its statements work in any sqlite3 shell docs/storage.md supports
// (migrations/0012_julianday.sql).
const sqlNowMS = `CAST(round((julianday('now') - 2440587.5) * 86400000) AS INTEGER)`

// qUpdateRun writes a stored run an append changes (store.RunWrite, not Created): ?1 sk, ?2 run
// id, ?3 status, ?4 the run's JSON, ?5 queued, ?6 ends its lease, ?7 the caller's time in Unix
// milliseconds (NULL: none, store.AppendOptions.Now). queued_ms keeps the time the run first
// became queued, by the caller's clock (else the database's), while it stays queued.
const qUpdateRun = `UPDATE runs SET status = ?3, data = ?4,
		queued_ms = CASE WHEN ?5 THEN COALESCE(queued_ms, ?7, ` + sqlNowMS + `) END,
		lease_id = CASE WHEN ?6 THEN NULL ELSE lease_id END,
		lease_expires_ms = CASE WHEN ?6 THEN NULL ELSE lease_expires_ms END
	WHERE sk = ?1 AND run_id = ?2`

// maxRunsPerInsert is the most runs one qInsertRuns statement creates.
const maxRunsPerInsert = 64

// qInsertRuns inserts n runs an append creates (store.RunWrite, Created), in creation order: the
// session's sk, then for each run its id, status, JSON, attempt, whether it is queued and the
// caller's time, then sk again (anonymous parameters, see qInsertRows). Run i of the list takes the session's
// next ord plus i (column1 of the VALUES list), and the session's project and agent; queued_ms
// is when a queued run became queued: the caller's time (column7, store.AppendOptions.Now), or
// when it is NULL the database's clock. The rows are inserted, and
// their change feed triggers write their changes, in the order of the list. One statement for
// many runs: every statement that writes runs is a multi-row write to SQLite (the triggers),
// so it opens a statement journal, and it opens and closes its cursors and the trigger's
// program, which cost more than the row itself when each run was a statement of its own.
func qInsertRuns(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO runs (sk, run_id, ord, status, data, attempt, queued_ms, project, agent_id)
	SELECT s.sk, v.column2, o.next + v.column1, v.column3, v.column4, v.column5,
		CASE WHEN v.column6 THEN COALESCE(v.column7, ` + sqlNowMS + `) END, s.project, s.agent_id
	FROM sessions AS s, (SELECT COALESCE(MAX(ord), -1) + 1 AS next FROM runs WHERE sk = ?) AS o, (VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(%d, ?, ?, ?, ?, ?, ?)", i)
	}
	b.WriteString(`) AS v
	WHERE s.sk = ? ORDER BY v.column1`)
	return b.String()
}

// claimQuery is the query that finds the oldest claimable run matching f, and its arguments.
// Project and agent filters read their own index (migration 0006); role and capabilities are
// checked on the session of each claimable run in queue order.
func claimQuery(f store.ClaimFilter) (string, []any) {
	var b strings.Builder
	var args []any
	b.WriteString(`SELECT r.sk, r.run_id, r.data, r.lease_token, r.attempt, s.id FROM runs AS r JOIN sessions AS s ON s.sk = r.sk
	WHERE r.queued_ms IS NOT NULL AND r.lease_id IS NULL`)
	if f.Project != "" {
		b.WriteString(` AND r.project = ?`)
		args = append(args, f.Project)
	}
	if f.AgentID != "" {
		b.WriteString(` AND r.agent_id = ?`)
		args = append(args, f.AgentID)
	}
	if f.Role != "" {
		b.WriteString(` AND json_extract(s.record, '$.role') = ?`)
		args = append(args, f.Role)
	}
	for _, c := range f.Capabilities {
		// An absent flag takes its default: text true, every other one false.
		b.WriteString(` AND COALESCE(json_extract(s.snapshot, '$.capabilities.' || ?), ?) = 1`)
		args = append(args, c, c == "text")
	}
	b.WriteString(` ORDER BY r.queued_ms, r.sk, r.ord LIMIT 1`)
	return b.String(), args
}

// ClaimRun gives the oldest claimable run matching f a lease, as documented on store.Store. The
// writer takes the claim like an append, so claims are decided one at a time and committed
// (and synced) with the appends of their group.
func (s *Store) ClaimRun(ctx context.Context, f store.ClaimFilter, leaseID string, expiresAt time.Time) (store.Claim, error) {
	var c store.Claim
	q, args := claimQuery(f)
	r := &request{ctx: ctx, op: func(w *writer) error {
		var sk int64
		var data []byte
		err := w.conn.QueryRowContext(w.ctx, q, args...).Scan(&sk, &c.Run.RunID, &data, &c.Lease.Token, &c.Attempt, &c.SessionID)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNothingToClaim
		}
		if err != nil {
			return fatal("find a claimable run", err)
		}
		if err := decodeRun(data, &c.Run); err != nil {
			return err
		}
		c.Lease.Token++
		c.Lease.LeaseID, c.Lease.ExpiresAt = leaseID, expiresAt
		if _, err := w.conn.ExecContext(w.ctx, `UPDATE runs SET lease_id = ?, lease_token = ?, lease_expires_ms = ? WHERE sk = ? AND run_id = ?`,
			leaseID, c.Lease.Token, expiresAt.UnixMilli(), sk, c.Run.RunID); err != nil {
			return fatal("take the lease", err)
		}
		return nil
	}}
	if err := s.submit(ctx, r); err != nil {
		return store.Claim{}, fmt.Errorf("claim a run: %w", err)
	}
	if r.err != nil {
		if errors.Is(r.err, store.ErrNothingToClaim) {
			return store.Claim{}, r.err
		}
		return store.Claim{}, fmt.Errorf("claim a run: %w", r.err)
	}
	return c, nil
}

// decodeRun reads a stored run's JSON.
func decodeRun(data []byte, r any) error {
	if err := json.Unmarshal(data, r); err != nil {
		return fatal("load run", fmt.Errorf("stored run %s: %w", data, err))
	}
	return nil
}

// leaseOp runs fn in the writer on the lease held on the run (nil when none), after checking
// the session and the run exist.
func (s *Store) leaseOp(ctx context.Context, what, sessionID, runID string, fn func(w *writer, sk int64, held *store.Lease) error) error {
	r := &request{ctx: ctx, op: func(w *writer) error {
		ss, err := w.session(sessionID)
		if err != nil {
			return err
		}
		if ss == nil {
			return store.ErrSessionNotFound
		}
		held, found, err := w.loadLease(ss.sk, runID)
		if err != nil {
			return err
		}
		if !found {
			return store.ErrRunNotFound
		}
		return fn(w, ss.sk, held)
	}}
	if err := s.submit(ctx, r); err != nil {
		return fmt.Errorf("%s of run %q of session %q: %w", what, runID, sessionID, err)
	}
	if r.err != nil {
		return fmt.Errorf("%s of run %q of session %q: %w", what, runID, sessionID, r.err)
	}
	return nil
}

// RenewLease moves the lease's expiry, as documented on store.Store.
func (s *Store) RenewLease(ctx context.Context, sessionID, runID string, ref store.LeaseRef, now, expiresAt time.Time) (store.Lease, error) {
	out := store.Lease{LeaseID: ref.LeaseID, Token: ref.Token, ExpiresAt: expiresAt}
	err := s.leaseOp(ctx, "renew the lease", sessionID, runID, func(w *writer, sk int64, held *store.Lease) error {
		if err := store.CheckLease(runID, held, &ref, now); err != nil {
			return err
		}
		if _, err := w.conn.ExecContext(w.ctx, `UPDATE runs SET lease_expires_ms = ? WHERE sk = ? AND run_id = ?`, expiresAt.UnixMilli(), sk, runID); err != nil {
			return fatal("renew the lease", err)
		}
		return w.heartbeat(sk, store.AppendOptions{Heartbeat: now})
	})
	if err != nil {
		return store.Lease{}, err
	}
	return out, nil
}

// ReleaseLease drops the lease, as documented on store.Store.
func (s *Store) ReleaseLease(ctx context.Context, sessionID, runID string, ref store.LeaseRef, now time.Time) error {
	err := s.leaseOp(ctx, "release the lease", sessionID, runID, func(w *writer, sk int64, held *store.Lease) error {
		if err := store.CheckLease(runID, held, &ref, now); err != nil {
			return err
		}
		if _, err := w.conn.ExecContext(w.ctx, `UPDATE runs SET lease_id = NULL, lease_expires_ms = NULL WHERE sk = ? AND run_id = ?`, sk, runID); err != nil {
			return fatal("release the lease", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, fn := range s.releases.List() {
		fn(sessionID)
	}
	return nil
}

// loadLease loads the lease held on a run of session sk as the writer's transaction sees it:
// nil when none is; found is false when there is no such run.
func (w *writer) loadLease(sk int64, runID string) (held *store.Lease, found bool, err error) {
	var id sql.NullString
	var token int64
	var exp sql.NullInt64
	err = w.st.runLease.QueryRowContext(w.ctx, sk, runID).Scan(&id, &token, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fatal("load lease", err)
	}
	return leaseOf(id, token, exp), true, nil
}

// leaseOf is the lease a run's lease columns hold: nil when lease_id is NULL.
func leaseOf(id sql.NullString, token int64, exp sql.NullInt64) *store.Lease {
	if !id.Valid {
		return nil
	}
	return &store.Lease{LeaseID: id.String, Token: token, ExpiresAt: time.UnixMilli(exp.Int64).UTC()}
}

// RunLeases returns the lease state of the session's runs, in creation order.
func (s *Store) RunLeases(ctx context.Context, sessionID string) ([]store.RunLease, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.inflight.Done()
	sk, err := s.sessionKey(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("leases of session %q: %w", sessionID, err)
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT run_id, lease_id, lease_token, lease_expires_ms, attempt FROM runs WHERE sk = ? ORDER BY ord`, sk)
	if err != nil {
		return nil, fmt.Errorf("leases of session %q: %w", sessionID, err)
	}
	defer rows.Close()
	out := []store.RunLease{}
	for rows.Next() {
		var rl store.RunLease
		var id sql.NullString
		var exp sql.NullInt64
		if err := rows.Scan(&rl.RunID, &id, &rl.Token, &exp, &rl.Attempt); err != nil {
			return nil, fmt.Errorf("leases of session %q: %w", sessionID, err)
		}
		if id.Valid {
			rl.Held = &store.Lease{LeaseID: id.String, Token: rl.Token, ExpiresAt: time.UnixMilli(exp.Int64).UTC()}
		}
		out = append(out, rl)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("leases of session %q: %w", sessionID, err)
	}
	if err := s.visible(ctx); err != nil {
		return nil, fmt.Errorf("leases of session %q: %w", sessionID, err)
	}
	return out, nil
}

// qExpiredLeases finds the leases expired by ?1, earliest first, at most ?2, from the index
// runs_lease_expiry (TestClaimQueryPlan checks the plan).
const qExpiredLeases = `SELECT s.id, r.run_id, r.lease_id, r.lease_token, r.lease_expires_ms, r.attempt
	FROM runs AS r JOIN sessions AS s ON s.sk = r.sk
	WHERE r.lease_id IS NOT NULL AND r.lease_expires_ms <= ? ORDER BY r.lease_expires_ms LIMIT ?`

// qQueuedRuns finds the claimable runs never claimed that became claimable by ?1, oldest first,
// at most ?2, from the claim index (queued_ms).
const qQueuedRuns = `SELECT s.id, r.run_id, r.queued_ms
	FROM runs AS r JOIN sessions AS s ON s.sk = r.sk
	WHERE r.queued_ms IS NOT NULL AND r.queued_ms <= ? AND r.lease_id IS NULL AND r.lease_token = 0
	ORDER BY r.queued_ms, r.sk, r.ord LIMIT ?`

// QueuedRuns returns the claimable runs never claimed that became claimable by cutoff, as
// documented on store.Store.
func (s *Store) QueuedRuns(ctx context.Context, cutoff time.Time, limit int) ([]store.QueuedRun, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.inflight.Done()
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 10000)
	rows, err := s.rdb.QueryContext(ctx, qQueuedRuns, cutoff.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("queued runs: %w", err)
	}
	defer rows.Close()
	var out []store.QueuedRun
	for rows.Next() {
		var q store.QueuedRun
		var ms int64
		if err := rows.Scan(&q.SessionID, &q.RunID, &ms); err != nil {
			return nil, fmt.Errorf("queued runs: %w", err)
		}
		q.QueuedAt = time.UnixMilli(ms).UTC()
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queued runs: %w", err)
	}
	if err := s.visible(ctx); err != nil {
		return nil, fmt.Errorf("queued runs: %w", err)
	}
	return out, nil
}

// ExpiredLeases returns the leases expired by cutoff, earliest first, from the index
// runs_lease_expiry.
func (s *Store) ExpiredLeases(ctx context.Context, cutoff time.Time, limit int) ([]store.ExpiredLease, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.inflight.Done()
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 10000)
	rows, err := s.rdb.QueryContext(ctx, qExpiredLeases, cutoff.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("expired leases: %w", err)
	}
	defer rows.Close()
	var out []store.ExpiredLease
	for rows.Next() {
		var e store.ExpiredLease
		var exp int64
		if err := rows.Scan(&e.SessionID, &e.RunID, &e.Lease.LeaseID, &e.Lease.Token, &exp, &e.Attempt); err != nil {
			return nil, fmt.Errorf("expired leases: %w", err)
		}
		e.Lease.ExpiresAt = time.UnixMilli(exp).UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("expired leases: %w", err)
	}
	if err := s.visible(ctx); err != nil {
		return nil, fmt.Errorf("expired leases: %w", err)
	}
	return out, nil
}
