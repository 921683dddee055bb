package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// claimQuery is the statement that takes the oldest claimable run matching f: it locks the
// first entry of the claim index (migration 0005) that matches and that no other claim holds
// locked (FOR UPDATE SKIP LOCKED), so concurrent claims, through any instance, each take
// another run without waiting for each other, and sets the lease. $1 is the leaseId, $2 the
// expiry in Unix milliseconds. Project and agent filters read their own index; role and
// capabilities are checked on the session of each claimable run in queue order.
func claimQuery(f store.ClaimFilter) (string, []any) {
	var w strings.Builder
	args := []any{nil, nil}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	join := ""
	if f.Project != "" {
		w.WriteString(` AND r.project = ` + arg(f.Project))
	}
	if f.AgentID != "" {
		w.WriteString(` AND r.agent_id = ` + arg(f.AgentID))
	}
	if f.Role != "" || len(f.Capabilities) > 0 {
		join = ` JOIN sessions AS s ON s.sk = r.sk`
	}
	if f.Role != "" {
		w.WriteString(` AND s.record->>'role' = ` + arg(f.Role))
	}
	for _, c := range f.Capabilities {
		// An absent flag takes its default: text true, every other one false.
		w.WriteString(` AND COALESCE((s.snapshot->'capabilities'->>` + arg(c) + `::text)::boolean, ` + arg(c == "text") + `::boolean)`)
	}
	q := `WITH c AS (SELECT r.sk, r.run_id FROM runs AS r` + join + `
		WHERE r.queued_ms IS NOT NULL AND r.lease_id IS NULL` + w.String() + `
		ORDER BY r.queued_ms, r.sk, r.ord LIMIT 1 FOR UPDATE OF r SKIP LOCKED)
	UPDATE runs AS r SET lease_id = $1, lease_token = r.lease_token + 1, lease_expires_ms = $2
	FROM c WHERE r.sk = c.sk AND r.run_id = c.run_id
	RETURNING r.data, r.lease_token, r.attempt, (SELECT id FROM sessions WHERE sk = r.sk)`
	return q, args
}

// ClaimRun gives the oldest claimable run matching f a lease, as documented on store.Store: one
// statement, its own transaction. It takes no lock on the session's row (an append takes the
// session's row, then its runs'; a claim taking them the other way round could deadlock).
func (s *Store) ClaimRun(ctx context.Context, f store.ClaimFilter, leaseID string, expiresAt time.Time) (store.Claim, error) {
	defer s.kickChanges() // after the commit: the changes it recorded get their numbers (changes.go)
	if err := s.enter(); err != nil {
		return store.Claim{}, fmt.Errorf("claim a run: %w", err)
	}
	defer s.inflight.Done()
	q, args := claimQuery(f)
	args[0], args[1] = leaseID, expiresAt.UnixMilli()
	var c store.Claim
	var data []byte
	err := s.pool.QueryRow(ctx, q, args...).Scan(&data, &c.Lease.Token, &c.Attempt, &c.SessionID)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Claim{}, store.ErrNothingToClaim
	}
	if err != nil {
		return store.Claim{}, fmt.Errorf("claim a run: %w", err)
	}
	if err := json.Unmarshal(data, &c.Run); err != nil {
		return store.Claim{}, fmt.Errorf("claim a run: decode stored run %s: %w", data, err)
	}
	c.Lease.LeaseID, c.Lease.ExpiresAt = leaseID, expiresAt
	return c, nil
}

// leaseOp runs fn in a transaction that holds the session's row and then the run's (the order
// of an append), with the lease held on the run (nil when none).
func (s *Store) leaseOp(ctx context.Context, what, sessionID, runID string, fn func(tx pgx.Tx, sk int64, held *store.Lease) error) error {
	if err := s.enter(); err != nil {
		return fmt.Errorf("%s of run %q of session %q: %w", what, runID, sessionID, err)
	}
	defer s.inflight.Done()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var sk int64
		err := tx.QueryRow(ctx, `SELECT sk FROM sessions WHERE id = $1 FOR NO KEY UPDATE`, sessionID).Scan(&sk)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrSessionNotFound
		}
		if err != nil {
			return err
		}
		var id *string
		var token int64
		var exp *int64
		err = tx.QueryRow(ctx, `SELECT lease_id, lease_token, lease_expires_ms FROM runs WHERE sk = $1 AND run_id = $2 FOR NO KEY UPDATE`, sk, runID).Scan(&id, &token, &exp)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrRunNotFound
		}
		if err != nil {
			return err
		}
		var held *store.Lease
		if id != nil && exp != nil {
			held = &store.Lease{LeaseID: *id, Token: token, ExpiresAt: time.UnixMilli(*exp).UTC()}
		}
		return fn(tx, sk, held)
	})
	if err != nil {
		return fmt.Errorf("%s of run %q of session %q: %w", what, runID, sessionID, err)
	}
	return nil
}

// RenewLease moves the lease's expiry, as documented on store.Store.
func (s *Store) RenewLease(ctx context.Context, sessionID, runID string, ref store.LeaseRef, now, expiresAt time.Time) (store.Lease, error) {
	err := s.leaseOp(ctx, "renew the lease", sessionID, runID, func(tx pgx.Tx, sk int64, held *store.Lease) error {
		if err := store.CheckLease(runID, held, &ref, now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, qHeartbeat, sk, contract.FormatTime(now)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE runs SET lease_expires_ms = $3 WHERE sk = $1 AND run_id = $2`, sk, runID, expiresAt.UnixMilli())
		return err
	})
	if err != nil {
		return store.Lease{}, err
	}
	return store.Lease{LeaseID: ref.LeaseID, Token: ref.Token, ExpiresAt: expiresAt}, nil
}

// ReleaseLease drops the lease, as documented on store.Store.
func (s *Store) ReleaseLease(ctx context.Context, sessionID, runID string, ref store.LeaseRef, now time.Time) error {
	err := s.leaseOp(ctx, "release the lease", sessionID, runID, func(tx pgx.Tx, sk int64, held *store.Lease) error {
		if err := store.CheckLease(runID, held, &ref, now); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE runs SET lease_id = NULL, lease_expires_ms = NULL WHERE sk = $1 AND run_id = $2`, sk, runID)
		return err
	})
	if err != nil {
		return err
	}
	// A release adds no event, so no commit notification tells the other instances: the
	// notifier sends one of its own (kind "r"), as it does for appends.
	s.deliverRelease(sessionID)
	s.notifier.addRelease(sessionID)
	return nil
}

// RunLeases returns the lease state of the session's runs, in creation order.
func (s *Store) RunLeases(ctx context.Context, sessionID string) ([]store.RunLease, error) {
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("leases of session %q: %w", sessionID, err)
	}
	defer s.inflight.Done()
	sk, err := s.sessionKey(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("leases of session %q: %w", sessionID, err)
	}
	var out []store.RunLease
	err = retry(ctx, readAttempts, func() error {
		out = []store.RunLease{}
		rows, _ := s.pool.Query(ctx, `SELECT run_id, lease_id, lease_token, lease_expires_ms, attempt FROM runs WHERE sk = $1 ORDER BY ord`, sk)
		defer rows.Close()
		for rows.Next() {
			var rl store.RunLease
			var id *string
			var exp *int64
			var attempt int32
			if err := rows.Scan(&rl.RunID, &id, &rl.Token, &exp, &attempt); err != nil {
				return err
			}
			rl.Attempt = int(attempt)
			if id != nil && exp != nil {
				rl.Held = &store.Lease{LeaseID: *id, Token: rl.Token, ExpiresAt: time.UnixMilli(*exp).UTC()}
			}
			out = append(out, rl)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("leases of session %q: %w", sessionID, err)
	}
	return out, nil
}

// QueuedRuns returns the claimable runs never claimed that became claimable by cutoff, as
// documented on store.Store, from the claim index (queued_ms).
func (s *Store) QueuedRuns(ctx context.Context, cutoff time.Time, limit int) ([]store.QueuedRun, error) {
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("queued runs: %w", err)
	}
	defer s.inflight.Done()
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 10000)
	var out []store.QueuedRun
	err := retry(ctx, readAttempts, func() error {
		out = nil
		rows, _ := s.pool.Query(ctx, `SELECT s.id, r.run_id, r.queued_ms
			FROM runs AS r JOIN sessions AS s ON s.sk = r.sk
			WHERE r.queued_ms IS NOT NULL AND r.queued_ms <= $1 AND r.lease_id IS NULL AND r.lease_token = 0
			ORDER BY r.queued_ms, r.sk, r.ord LIMIT $2`, cutoff.UnixMilli(), limit)
		defer rows.Close()
		for rows.Next() {
			var q store.QueuedRun
			var ms int64
			if err := rows.Scan(&q.SessionID, &q.RunID, &ms); err != nil {
				return err
			}
			q.QueuedAt = time.UnixMilli(ms).UTC()
			out = append(out, q)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("queued runs: %w", err)
	}
	return out, nil
}

// ExpiredLeases returns the leases expired by cutoff, earliest first, from the index
// runs_lease_expiry.
func (s *Store) ExpiredLeases(ctx context.Context, cutoff time.Time, limit int) ([]store.ExpiredLease, error) {
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("expired leases: %w", err)
	}
	defer s.inflight.Done()
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 10000)
	var out []store.ExpiredLease
	err := retry(ctx, readAttempts, func() error {
		out = nil
		rows, _ := s.pool.Query(ctx, `SELECT s.id, r.run_id, r.lease_id, r.lease_token, r.lease_expires_ms, r.attempt
			FROM runs AS r JOIN sessions AS s ON s.sk = r.sk
			WHERE r.lease_id IS NOT NULL AND r.lease_expires_ms <= $1 ORDER BY r.lease_expires_ms LIMIT $2`, cutoff.UnixMilli(), limit)
		defer rows.Close()
		for rows.Next() {
			var e store.ExpiredLease
			var exp int64
			var attempt int32
			if err := rows.Scan(&e.SessionID, &e.RunID, &e.Lease.LeaseID, &e.Lease.Token, &exp, &attempt); err != nil {
				return err
			}
			e.Attempt = int(attempt)
			e.Lease.ExpiresAt = time.UnixMilli(exp).UTC()
			out = append(out, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("expired leases: %w", err)
	}
	return out, nil
}
