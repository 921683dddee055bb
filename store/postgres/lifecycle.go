package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// Limits of ExpiredSessions.
const (
	defaultExpiredLimit = 100
	maxExpiredLimit     = 10000
)

// heartbeatSet is the SET list that records an append's heartbeat ($HB, RFC 3339 text) on the
// session row (see store.AppendOptions): the record's last_heartbeat_at, and a stale session
// back to running. heartbeat_at, a generated column, follows from the record. Appends add it
// to their one update of the row.
const heartbeatSet = `status = CASE sessions.status WHEN 'stale' THEN 'running' ELSE sessions.status END,
		record = CASE sessions.status WHEN 'stale'
			THEN (sessions.record::jsonb || jsonb_build_object('last_heartbeat_at', $HB, 'status', 'running', 'updated_at', $HB, 'updated_by_gate', 'owner'))::json
			ELSE (sessions.record::jsonb || jsonb_build_object('last_heartbeat_at', $HB))::json END`

// qHeartbeat records a heartbeat ($2) on session $1 alone (a lease renewal).
var qHeartbeat = `UPDATE sessions SET ` + strings.ReplaceAll(heartbeatSet, "$HB", "$2::text") + ` WHERE sk = $1`

// ExpiredSessions returns the running and paused sessions whose heartbeat is before cutoff,
// oldest first, at most limit (default 100, capped at 10000). It reads the partial index
// session_heads_live_heartbeat (the heartbeat of the last append or of the record, whichever
// was written last: migration 0009): the cost is that of the sessions returned.
func (s *Store) ExpiredSessions(ctx context.Context, cutoff time.Time, limit int) ([]store.ExpiredSession, error) {
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("expired sessions: %w", err)
	}
	defer s.inflight.Done()
	if limit <= 0 {
		limit = defaultExpiredLimit
	}
	limit = min(limit, maxExpiredLimit)
	var out []store.ExpiredSession
	err := retry(ctx, readAttempts, func() error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, `SELECT s.id, h.heartbeat_at FROM session_heads AS h JOIN sessions AS s USING (sk)
			WHERE h.live AND h.heartbeat_at < $1 ORDER BY h.heartbeat_at LIMIT $2`, cutoff, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e store.ExpiredSession
			if err := rows.Scan(&e.SessionID, &e.Heartbeat); err != nil {
				return err
			}
			e.Heartbeat = e.Heartbeat.UTC()
			out = append(out, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("expired sessions: %w", err)
	}
	return out, nil
}

// querier is what loadLifecycle reads through: the pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func loadLifecycle(ctx context.Context, q querier, sk int64) (store.Lifecycle, error) {
	var lc store.Lifecycle
	var data []byte
	err := q.QueryRow(ctx, `SELECT data FROM session_lifecycle WHERE sk = $1`, sk).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return lc, nil
	}
	if err != nil {
		return lc, err
	}
	if err := json.Unmarshal(data, &lc); err != nil {
		return lc, fmt.Errorf("decode stored lifecycle: %w", err)
	}
	return lc, nil
}

func storeLifecycle(ctx context.Context, tx pgx.Tx, sk int64, lc store.Lifecycle) error {
	data, err := json.Marshal(lc)
	if err != nil {
		return fmt.Errorf("encode lifecycle: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO session_lifecycle (sk, data) VALUES ($1, $2)
		ON CONFLICT (sk) DO UPDATE SET data = excluded.data`, sk, string(data)); err != nil {
		return fmt.Errorf("store lifecycle: %w", err)
	}
	return nil
}

// Lifecycle returns the session's lifecycle state, or store.ErrSessionNotFound.
func (s *Store) Lifecycle(ctx context.Context, id string) (store.Lifecycle, error) {
	if err := s.enter(); err != nil {
		return store.Lifecycle{}, fmt.Errorf("lifecycle of session %q: %w", id, err)
	}
	defer s.inflight.Done()
	sk, err := s.sessionKey(ctx, id)
	if err != nil {
		return store.Lifecycle{}, fmt.Errorf("lifecycle of session %q: %w", id, err)
	}
	var lc store.Lifecycle
	err = retry(ctx, readAttempts, func() (err error) {
		lc, err = loadLifecycle(ctx, s.pool, sk)
		return err
	})
	if err != nil {
		return store.Lifecycle{}, fmt.Errorf("lifecycle of session %q: %w", id, err)
	}
	return lc, nil
}

// txFinal marks an answer of a lifecycle transaction that must not be retried.
type txFinal struct{ err error }

// inTx runs fn in a transaction, retrying on connection failures as the other writes do. An
// error fn wraps in txFinal is returned unwrapped, without a retry.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	var final error
	err := retry(ctx, readAttempts, func() error {
		final = nil
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			err := fn(tx)
			var tf *txFinal
			if errors.As(err, &tf) {
				final = tf.err
			}
			return err
		})
		if final != nil {
			return nil
		}
		return err
	})
	if final != nil {
		return final
	}
	return err
}

func (e *txFinal) Error() string { return e.err.Error() }

// UpdateLifecycle applies fn to the session and its lifecycle state in a transaction that holds
// the session's row lock, and stores both, as UpdateSession does. fn may be called again, on a
// fresh copy, when the connection fails before the commit.
func (s *Store) UpdateLifecycle(ctx context.Context, id string, fn func(*store.Session, *store.Lifecycle) error) (*store.Session, store.Lifecycle, error) {
	defer s.kickChanges() // after the commit: the changes it recorded get their numbers (changes.go)
	if err := s.enter(); err != nil {
		return nil, store.Lifecycle{}, fmt.Errorf("update lifecycle of session %q: %w", id, err)
	}
	defer s.inflight.Done()
	var out *store.Session
	var outLC store.Lifecycle
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		sk, cur, err := lockSession(ctx, tx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			return &txFinal{store.ErrSessionNotFound}
		}
		if err != nil {
			return fmt.Errorf("load session: %w", err)
		}
		lc, err := loadLifecycle(ctx, tx, sk)
		if err != nil {
			return fmt.Errorf("load lifecycle: %w", err)
		}
		row, err := store.ApplySessionUpdate(id, cur, func(cur *store.Session) error { return fn(cur, &lc) })
		if err != nil {
			return &txFinal{err}
		}
		if _, err := tx.Exec(ctx, `UPDATE sessions SET status = $1, agent_id = $2, project = $3, record = $4, snapshot = $5, lineage = $6, active_branch = $7 WHERE sk = $8`,
			cur.Record.Status, cur.Record.AgentID, cur.Record.Project.Get(),
			string(row.Record), string(row.Snapshot), nullJSON(row.Lineage), nullJSON(row.ActiveBranch), sk); err != nil {
			return fmt.Errorf("update session: %w", err)
		}
		if err := storeLifecycle(ctx, tx, sk, lc); err != nil {
			return err
		}
		out, outLC = cur, lc
		return nil
	})
	if err != nil {
		return nil, store.Lifecycle{}, fmt.Errorf("update lifecycle of session %q: %w", id, err)
	}
	return out, outLC, nil
}

// CompactEvents deletes the events with sequence <= through and records it in the lifecycle
// state, in one transaction holding the session's row lock (see store.Store).
func (s *Store) CompactEvents(ctx context.Context, id string, through int64) (int64, error) {
	if err := s.enter(); err != nil {
		return 0, fmt.Errorf("compact session %q: %w", id, err)
	}
	defer s.inflight.Done()
	var n int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		sk, _, last, err := lockHead(ctx, tx, id)
		if err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return &txFinal{store.ErrSessionNotFound}
			}
			return fmt.Errorf("lock session: %w", err)
		}
		if through > last {
			return &txFinal{fmt.Errorf("cannot compact through sequence %d: the log ends at %d", through, last)}
		}
		if err := recordChainBase(ctx, tx, sk, through); err != nil {
			return err
		}
		ct, err := tx.Exec(ctx, `DELETE FROM events WHERE sk = $1 AND seq <= $2`, sk, through)
		if err != nil {
			return fmt.Errorf("delete events: %w", err)
		}
		n = ct.RowsAffected()
		lc, err := loadLifecycle(ctx, tx, sk)
		if err != nil {
			return fmt.Errorf("load lifecycle: %w", err)
		}
		if lc.CompactedThrough == nil || *lc.CompactedThrough < through {
			lc.CompactedThrough = &through // never backwards: earlier events are gone already
		}
		return storeLifecycle(ctx, tx, sk, lc)
	})
	if err != nil {
		return 0, fmt.Errorf("compact session %q: %w", id, err)
	}
	return n, nil
}

// ImportSession writes a whole session in one transaction (see store.Store). The events are
// written with one multi-row INSERT, as appends write theirs.
func (s *Store) ImportSession(ctx context.Context, imp *store.Import) error {
	defer s.kickChanges() // after the commit: the changes it recorded get their numbers (changes.go)
	if err := imp.Check(); err != nil {
		return err
	}
	id := imp.Session.Record.SessionID
	if err := s.enter(); err != nil {
		return fmt.Errorf("import session %q: %w", id, err)
	}
	defer s.inflight.Done()
	row, err := store.EncodeSession(imp.Session)
	if err != nil {
		return fmt.Errorf("import session %q: %w", id, err)
	}
	var ev struct {
		seqs                     []int64
		ids, keys, types, runIDs []string
		datas, hashes            [][]byte
	}
	// The log's chain is computed afresh from its bytes (store/chain.go): the imported log is
	// whole, so it starts at store.ChainGenesis and no base is recorded.
	head := store.ChainGenesis
	for i, h := range store.ChainEvents(store.ChainGenesis, imp.Events) {
		ev.hashes = append(ev.hashes, store.ChainStored(imp.Events[i].Sequence, &h))
		if i == len(imp.Events)-1 {
			head = h
		}
	}
	for _, e := range imp.Events {
		ev.seqs = append(ev.seqs, e.Sequence)
		ev.ids = append(ev.ids, e.EventID)
		ev.keys = append(ev.keys, e.IdempotencyKey)
		ev.types = append(ev.types, e.EventType)
		ev.runIDs = append(ev.runIDs, e.RunID)
		ev.datas = append(ev.datas, e.Data)
	}
	var rIDs, rDatas []string
	var rOrds []int32
	var rActive, rQueued []bool
	var rAttempts []int32
	// Only the run the append's rule makes claimable is queued for claims (store.ClaimableRun).
	claimable := store.ClaimableRun(imp.Runs)
	for i, r := range imp.Runs {
		data, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("import session %q: encode run %q: %w", id, r.RunID, err)
		}
		rIDs = append(rIDs, r.RunID)
		rOrds = append(rOrds, int32(i))
		rActive = append(rActive, !contract.IsTerminal(r.Status))
		rQueued = append(rQueued, &imp.Runs[i] == claimable)
		rAttempts = append(rAttempts, 1)
		rDatas = append(rDatas, string(data))
	}
	rec := &imp.Session.Record
	last := imp.Session.LastSequence
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		sk, status, curLast, err := lockHead(ctx, tx, id)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			err := tx.QueryRow(ctx, `INSERT INTO sessions (id, status, agent_id, project, record, snapshot, lineage, active_branch)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING RETURNING sk`,
				id, rec.Status, rec.AgentID, rec.Project.Get(), string(row.Record), string(row.Snapshot),
				nullJSON(row.Lineage), nullJSON(row.ActiveBranch)).Scan(&sk)
			if errors.Is(err, pgx.ErrNoRows) {
				return &txFinal{fmt.Errorf("%w: another import or create took the id first", store.ErrSessionExists)}
			}
			if err != nil {
				return fmt.Errorf("insert session: %w", err)
			}
		case err != nil:
			return fmt.Errorf("lock session: %w", err)
		default:
			lc, err := loadLifecycle(ctx, tx, sk)
			if err != nil {
				return fmt.Errorf("load lifecycle: %w", err)
			}
			var left bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE sk = $1)`, sk).Scan(&left); err != nil {
				return fmt.Errorf("look up events: %w", err)
			}
			if status != contract.SessionStatusArchived || lc.CompactedThrough == nil || *lc.CompactedThrough != curLast || curLast != last || left {
				return &txFinal{fmt.Errorf("%w: it is %s and its log is still here (only an archived session whose whole log was compacted away can be restored over)", store.ErrSessionExists, status)}
			}
			if _, err := tx.Exec(ctx, `UPDATE sessions SET status = $1, agent_id = $2, project = $3, record = $4, snapshot = $5, lineage = $6, active_branch = $7 WHERE sk = $8`,
				rec.Status, rec.AgentID, rec.Project.Get(), string(row.Record), string(row.Snapshot),
				nullJSON(row.Lineage), nullJSON(row.ActiveBranch), sk); err != nil {
				return fmt.Errorf("update session: %w", err)
			}
			if _, err := tx.Exec(ctx, `DELETE FROM runs WHERE sk = $1`, sk); err != nil {
				return fmt.Errorf("delete runs: %w", err)
			}
		}
		s.heads.drop(sk)
		// The rollup of an earlier life of the session (kept through its compaction) is
		// counted again from the imported log.
		if err := dropUsageRows(ctx, tx, sk); err != nil {
			return err
		}
		b := &pgx.Batch{}
		// The session's head (made at -1 by migration 0009's trigger for a new session): the
		// log's last sequence and chain hash.
		b.Queue(`UPDATE session_heads SET last_seq = $2, head_hash = $3, base_hash = NULL WHERE sk = $1`, sk, last, head[:])
		if len(ev.seqs) > 0 {
			b.Queue(qInsertEvents, sk, ev.seqs, ev.ids, ev.keys, ev.types, ev.runIDs, ev.datas, ev.hashes)
			if err := queueUsage(b, sk, imp.Events); err != nil {
				return err
			}
		}
		if len(rIDs) > 0 {
			b.Queue(qUpsertRuns, sk, rIDs, rOrds, rActive, rDatas, rAttempts, rQueued)
		}
		if b.Len() > 0 {
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return fmt.Errorf("write events and runs: %w", err)
			}
		}
		return storeLifecycle(ctx, tx, sk, imp.Lifecycle)
	})
	if err != nil {
		return fmt.Errorf("import session %q: %w", id, err)
	}
	return nil
}

// recordChainBase records the chain's base of session sk compacted through sequence through:
// the hash of the event at through (the predecessor of the first kept event, store/chain.go),
// computed from the last marked event at or before it (store.ChainThrough), or from the
// session's base when the log starts after that one. When the event at through is gone
// already (compacted before), the base stays.
func recordChainBase(ctx context.Context, tx pgx.Tx, sk, through int64) error {
	var base []byte
	if err := tx.QueryRow(ctx, `SELECT base_hash FROM session_heads WHERE sk = $1`, sk).Scan(&base); err != nil {
		return fmt.Errorf("record the chain's base: %w", err)
	}
	from := through - (through+1)%store.ChainEvery // the last marked sequence at or before through
	rows, err := tx.Query(ctx, `SELECT seq, data, hash FROM events WHERE sk = $1 AND seq BETWEEN $2 AND $3 ORDER BY seq`, sk, max(from, 0), through)
	if err != nil {
		return fmt.Errorf("record the chain's base: %w", err)
	}
	var evs []store.StoredEvent
	for rows.Next() {
		var e store.StoredEvent
		if err := rows.Scan(&e.Sequence, &e.Data, &e.Hash); err != nil {
			rows.Close()
			return fmt.Errorf("record the chain's base: %w", err)
		}
		evs = append(evs, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("record the chain's base: %w", err)
	}
	if len(evs) == 0 || evs[len(evs)-1].Sequence != through {
		return nil // the event at through is gone already: the base recorded then stays
	}
	start, ok := store.ChainHead(base)
	if !ok {
		return fmt.Errorf("record the chain's base: the session's chain base is %d bytes: the store is damaged (run sessiond fsck)", len(base))
	}
	h, err := store.ChainThrough(start, evs)
	if err != nil {
		return fmt.Errorf("record the chain's base: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE session_heads SET base_hash = $2 WHERE sk = $1`, sk, h[:]); err != nil {
		return fmt.Errorf("record the chain's base: %w", err)
	}
	return nil
}
