package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// Limits of ExpiredSessions.
const (
	defaultExpiredLimit = 100
	maxExpiredLimit     = 10000
)

// qHeartbeat records a heartbeat on the session row (see store.AppendOptions): the record's
// last_heartbeat_at (?1), and a stale session back to running. heartbeat_ms follows from the
// record.
//
// qAppendHeartbeat is the same write for an append, made only when it changes something that
// matters: the session is stale (it comes back to running), it has no heartbeat yet, or the
// stored one is at least heartbeatResolution older (?3 is the new heartbeat's milliseconds
// minus the resolution). Otherwise the row is only read, and the append writes its event rows
// and nothing else: a session row page (and the sweeper's index page) rewritten for every
// single-event append was most of what such an append wrote (docs/storage.md).
const (
	qHeartbeat       = `UPDATE sessions SET ` + heartbeatSet + ` WHERE sk = ?2`
	qAppendHeartbeat = `UPDATE sessions SET ` + heartbeatSet + ` WHERE sk = ?2
		AND (status = 'stale' OR json_extract(record, '$.last_heartbeat_at') IS NULL OR heartbeat_ms <= ?3)`

	heartbeatSet = `status = CASE WHEN ?1 IS NOT NULL AND status = 'stale' THEN 'running' ELSE status END,
	record = CASE WHEN ?1 IS NULL THEN record WHEN status = 'stale'
		THEN json_set(record, '$.last_heartbeat_at', ?1, '$.status', 'running', '$.updated_at', ?1, '$.updated_by_gate', 'owner')
		ELSE json_set(record, '$.last_heartbeat_at', ?1) END`
)

// heartbeatResolution is how far an append's heartbeat may run ahead of the stored one before
// the append writes it (qAppendHeartbeat): the stored last_heartbeat_at is never more than
// this older than the heartbeat of the session's latest acknowledged append, before a crash
// and after it. It is far below any staleness timeout the sweeper uses.
const heartbeatResolution = time.Second

// heartbeat applies opts.Heartbeat to session sk inside the writer's transaction.
func (w *writer) heartbeat(sk int64, opts store.AppendOptions) error {
	if opts.Heartbeat.IsZero() {
		return nil
	}
	if _, err := w.st.heartbeat.ExecContext(w.ctx, contract.FormatTime(opts.Heartbeat), sk); err != nil {
		return fatal("record heartbeat", err)
	}
	return nil
}

// ExpiredSessions returns the running and paused sessions whose heartbeat is before cutoff,
// oldest first, at most limit (default 100, capped at 10000). It reads the partial index
// sessions_live_heartbeat: the cost is that of the sessions returned.
func (s *Store) ExpiredSessions(ctx context.Context, cutoff time.Time, limit int) ([]store.ExpiredSession, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.inflight.Done()
	if limit <= 0 {
		limit = defaultExpiredLimit
	}
	limit = min(limit, maxExpiredLimit)
	// INDEXED BY: without statistics the planner prefers sessions_status, which would scan
	// every running session; with it, the query fails rather than silently scanning.
	rows, err := s.rdb.QueryContext(ctx, `SELECT id, heartbeat_ms FROM sessions INDEXED BY sessions_live_heartbeat
		WHERE status IN ('running', 'paused') AND heartbeat_ms < ? ORDER BY heartbeat_ms LIMIT ?`, cutoff.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("expired sessions: %w", err)
	}
	defer rows.Close()
	var out []store.ExpiredSession
	for rows.Next() {
		var e store.ExpiredSession
		var ms int64
		if err := rows.Scan(&e.SessionID, &ms); err != nil {
			return nil, fmt.Errorf("expired sessions: %w", err)
		}
		e.Heartbeat = time.UnixMilli(ms).UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("expired sessions: %w", err)
	}
	if err := s.visible(ctx); err != nil {
		return nil, fmt.Errorf("expired sessions: %w", err)
	}
	return out, nil
}

// loadLifecycle reads the lifecycle state of session sk through q (the reader pool or the
// writer's connection); the zero value when none is stored.
func loadLifecycle(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, sk int64) (store.Lifecycle, error) {
	var lc store.Lifecycle
	var data []byte
	err := q.QueryRowContext(ctx, `SELECT data FROM session_lifecycle WHERE sk = ?`, sk).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
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

func (w *writer) storeLifecycle(sk int64, lc store.Lifecycle) error {
	data, err := json.Marshal(lc)
	if err != nil {
		return fmt.Errorf("encode lifecycle: %w", err)
	}
	if _, err := w.conn.ExecContext(w.ctx, `INSERT INTO session_lifecycle (sk, data) VALUES (?, ?)
		ON CONFLICT (sk) DO UPDATE SET data = excluded.data`, sk, string(data)); err != nil {
		return fatal("store lifecycle", err)
	}
	return nil
}

// Lifecycle returns the session's lifecycle state, or store.ErrSessionNotFound.
func (s *Store) Lifecycle(ctx context.Context, id string) (store.Lifecycle, error) {
	if err := s.enter(); err != nil {
		return store.Lifecycle{}, err
	}
	defer s.inflight.Done()
	sk, err := s.sessionKey(ctx, id)
	if err != nil {
		return store.Lifecycle{}, fmt.Errorf("lifecycle of session %q: %w", id, err)
	}
	lc, err := loadLifecycle(ctx, s.rdb, sk)
	if err == nil {
		err = s.visible(ctx)
	}
	if err != nil {
		return store.Lifecycle{}, fmt.Errorf("lifecycle of session %q: %w", id, err)
	}
	return lc, nil
}

// UpdateLifecycle applies fn to the session and its lifecycle state in the writer's
// transaction and stores both, as UpdateSession does. fn runs on the writer goroutine: it must
// be quick and must not call the store.
func (s *Store) UpdateLifecycle(ctx context.Context, id string, fn func(*store.Session, *store.Lifecycle) error) (*store.Session, store.Lifecycle, error) {
	var out *store.Session
	var outLC store.Lifecycle
	r := &request{ctx: ctx, op: func(w *writer) error {
		var lc store.Lifecycle
		var sk int64
		cur, err := w.updateSession(id, func(key int64, cur *store.Session) error {
			sk = key
			var err error
			if lc, err = loadLifecycle(w.ctx, w.conn, sk); err != nil {
				return fatal("load lifecycle", err)
			}
			return fn(cur, &lc)
		})
		if err != nil {
			return err
		}
		if err := w.storeLifecycle(sk, lc); err != nil {
			return err
		}
		out, outLC = cur, lc
		return nil
	}}
	if err := s.submit(ctx, r); err != nil {
		return nil, store.Lifecycle{}, fmt.Errorf("update lifecycle of session %q: %w", id, err)
	}
	if r.err != nil {
		return nil, store.Lifecycle{}, fmt.Errorf("update lifecycle of session %q: %w", id, r.err)
	}
	return out, outLC, nil
}

// CompactEvents deletes the events with sequence <= through and records it in the lifecycle
// state, in one transaction (see store.Store).
func (s *Store) CompactEvents(ctx context.Context, id string, through int64) (int64, error) {
	var n int64
	r := &request{ctx: ctx, op: func(w *writer) error {
		ss, err := w.session(id)
		if err != nil {
			return err
		}
		if ss == nil {
			return store.ErrSessionNotFound
		}
		if through > ss.last {
			return fmt.Errorf("cannot compact through sequence %d: the log ends at %d", through, ss.last)
		}
		if err := w.recordChainBase(ss.sk, through); err != nil {
			return err
		}
		// The tail's rows that a move pass has copied into events are counted there (tail.go).
		if err := w.conn.QueryRowContext(w.ctx, `SELECT count(*) FROM event_tail_live WHERE rid BETWEEN (?1 << 32) AND (?1 << 32) + ?2`, ss.sk, through).Scan(&n); err != nil {
			return fatal("count events", err)
		}
		for _, table := range []string{"events", "event_tail"} {
			res, err := w.conn.ExecContext(w.ctx, `DELETE FROM `+table+` WHERE rid BETWEEN (?1 << 32) AND (?1 << 32) + ?2`, ss.sk, through)
			if err != nil {
				return fatal("delete events", err)
			}
			if table == "events" {
				k, err := res.RowsAffected()
				if err != nil {
					return fatal("delete events", err)
				}
				n += k
			}
		}
		w.tail.known = false
		// The sealed generations' entries of the deleted events go with them; the open index
		// is rebuilt from the rows left at the next append.
		for _, q := range []string{`DELETE FROM event_keys WHERE sk = ?1 AND gen <= ?2 AND seq <= ?3`, `DELETE FROM event_ids WHERE sk = ?1 AND gen <= ?2 AND seq <= ?3`} {
			if _, err := w.conn.ExecContext(w.ctx, q, ss.sk, w.gen(through), through); err != nil {
				return fatal("delete sealed keys", err)
			}
		}
		// The log's end may be among the deleted events: the session row keeps it (lastSeqExpr).
		if _, err := w.conn.ExecContext(w.ctx, `UPDATE sessions SET last_seq = ? WHERE sk = ? AND last_seq < ?`, ss.last, ss.sk, ss.last); err != nil {
			return fatal("record last sequence", err)
		}
		w.dropOpen(ss)
		lc, err := loadLifecycle(w.ctx, w.conn, ss.sk)
		if err != nil {
			return fatal("load lifecycle", err)
		}
		if lc.CompactedThrough == nil || *lc.CompactedThrough < through {
			lc.CompactedThrough = &through // never backwards: earlier events are gone already
		}
		return w.storeLifecycle(ss.sk, lc)
	}}
	if err := s.submit(ctx, r); err != nil {
		return 0, fmt.Errorf("compact session %q: %w", id, err)
	}
	if r.err != nil {
		return 0, fmt.Errorf("compact session %q: %w", id, r.err)
	}
	return n, nil
}

// ImportSession writes a whole session in one transaction (see store.Store).
func (s *Store) ImportSession(ctx context.Context, imp *store.Import) error {
	if err := imp.Check(); err != nil {
		return err
	}
	id := imp.Session.Record.SessionID
	row, err := store.EncodeSession(imp.Session)
	if err != nil {
		return fmt.Errorf("import session %q: %w", id, err)
	}
	runs := make([][]byte, len(imp.Runs))
	for i := range imp.Runs {
		if runs[i], err = json.Marshal(imp.Runs[i]); err != nil {
			return fmt.Errorf("import session %q: encode run %q: %w", id, imp.Runs[i].RunID, err)
		}
	}
	rec := &imp.Session.Record
	last := imp.Session.LastSequence
	if last > maxSequence {
		return fmt.Errorf("import session %q: its log ends at %d; a log holds at most %d events", id, last, maxSequence+1)
	}
	r := &request{ctx: ctx, op: func(w *writer) error {
		// The writer's cache may hold the session's old state: drop it whatever happens.
		if ss := w.cache[id]; ss != nil {
			w.dropFilters(ss)
			delete(w.cache, id)
		}
		var sk, curLast int64
		var status string
		err := w.conn.QueryRowContext(w.ctx, `SELECT sk, status, `+lastSeqExpr+` FROM sessions WHERE id = ?`, id).Scan(&sk, &status, &curLast)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if err := w.conn.QueryRowContext(w.ctx, `INSERT INTO sessions (id, status, agent_id, project, record, snapshot, lineage, active_branch, last_seq)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING sk`, id, rec.Status, rec.AgentID, rec.Project.Get(),
				row.Record, row.Snapshot, nullBytes(row.Lineage), nullBytes(row.ActiveBranch), last).Scan(&sk); err != nil {
				return fatal("insert session", err)
			}
		case err != nil:
			return fatal("look up session", err)
		default:
			lc, err := loadLifecycle(w.ctx, w.conn, sk)
			if err != nil {
				return fatal("load lifecycle", err)
			}
			var left int
			if err := w.conn.QueryRowContext(w.ctx, `SELECT count(*) FROM (`+inBothTables(`SELECT 1 FROM %[1]s WHERE rid >= (?1 << 32) AND rid < ((?1 + 1) << 32)`)+` LIMIT 1)`, sk).Scan(&left); err != nil {
				return fatal("count events", err)
			}
			if status != contract.SessionStatusArchived || lc.CompactedThrough == nil || *lc.CompactedThrough != curLast || curLast != last || left > 0 {
				return fmt.Errorf("%w: it is %s and its log is still here (only an archived session whose whole log was compacted away can be restored over)", store.ErrSessionExists, status)
			}
			if _, err := w.st.updateSession.ExecContext(w.ctx, rec.Status, rec.AgentID, rec.Project.Get(),
				row.Record, row.Snapshot, nullBytes(row.Lineage), nullBytes(row.ActiveBranch), sk); err != nil {
				return fatal("update session", err)
			}
			if _, err := w.conn.ExecContext(w.ctx, `DELETE FROM runs WHERE sk = ?`, sk); err != nil {
				return fatal("delete runs", err)
			}
		}
		// Filters and sealed keys of an earlier life of the session describe other events.
		for _, table := range []string{"event_filters", "event_keys", "event_ids"} {
			if _, err := w.conn.ExecContext(w.ctx, `DELETE FROM `+table+` WHERE sk = ?`, sk); err != nil {
				return fatal("delete "+table, err)
			}
		}
		// The rollup of an earlier life of the session (kept through its compaction) is
		// counted again from the imported log.
		if err := w.dropUsage(sk); err != nil {
			return err
		}
		// The log's chain is computed afresh from its bytes (store/chain.go): the imported
		// log is whole, so it starts at store.ChainGenesis and no base is recorded.
		hashes := store.ChainEvents(store.ChainGenesis, imp.Events)
		if err := w.insertEvents(id, sk, imp.Events, hashes); err != nil {
			return err
		}
		var head []byte
		if len(hashes) > 0 {
			head = hashes[len(hashes)-1][:]
		}
		if _, err := w.conn.ExecContext(w.ctx, `INSERT INTO session_heads (sk, last_seq, head_hash, base_hash) VALUES (?1, ?2, ?3, NULL)
			ON CONFLICT (sk) DO UPDATE SET last_seq = ?2, head_hash = ?3, base_hash = NULL`, sk, last, head); err != nil {
			return fatal("record the session's head", err)
		}
		ss := &sessState{sk: sk, last: last}
		for g := range w.gen(last + 1) {
			if err := w.seal(ss, g); err != nil {
				return err
			}
		}
		// Only the run the append's rule makes claimable is queued for claims; the runs queued
		// behind an active run wait for it to end, as they did before the export.
		claimable := store.ClaimableRun(imp.Runs)
		for i, run := range imp.Runs {
			if _, err := w.conn.ExecContext(w.ctx, `INSERT INTO runs (sk, run_id, ord, status, data, queued_ms, project, agent_id) VALUES (?1, ?2, ?3, ?4, ?5,
				CASE WHEN ?6 THEN `+sqlNowMS+` END,
				(SELECT project FROM sessions WHERE sk = ?1), (SELECT agent_id FROM sessions WHERE sk = ?1))`,
				sk, run.RunID, i, run.Status, runs[i], &imp.Runs[i] == claimable); err != nil {
				return fatal("insert run", err)
			}
		}
		return w.storeLifecycle(sk, imp.Lifecycle)
	}}
	if err := s.submit(ctx, r); err != nil {
		return fmt.Errorf("import session %q: %w", id, err)
	}
	if r.err != nil {
		return fmt.Errorf("import session %q: %w", id, r.err)
	}
	return nil
}

// recordChainBase records the chain's base of session sk compacted through sequence through:
// the hash of the event at through (the predecessor of the first kept event, store/chain.go),
// computed from the last marked event at or before it (store.ChainThrough), or from the
// session's base when the log starts after that one. When the event at through is gone
// already (compacted before), the base stays.
func (w *writer) recordChainBase(sk, through int64) error {
	var base []byte
	err := w.conn.QueryRowContext(w.ctx, `SELECT base_hash FROM session_heads WHERE sk = ?`, sk).Scan(&base)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fatal("record the chain's base", err)
	}
	from := through - (through+1)%store.ChainEvery // the last marked sequence at or before through, or a later one's start
	rows, err := w.conn.QueryContext(w.ctx, inBothTables(`SELECT seq, data, hash FROM %[1]s WHERE rid BETWEEN (?1 << 32) + max(?2, 0) AND (?1 << 32) + ?3`)+` ORDER BY 1`, sk, from, through)
	if err != nil {
		return fatal("record the chain's base", err)
	}
	var evs []store.StoredEvent
	for rows.Next() {
		var e store.StoredEvent
		if err := rows.Scan(&e.Sequence, &e.Data, &e.Hash); err != nil {
			rows.Close()
			return fatal("record the chain's base", err)
		}
		evs = append(evs, e)
	}
	if err := closeRows(rows); err != nil {
		return fatal("record the chain's base", err)
	}
	if len(evs) == 0 || evs[len(evs)-1].Sequence != through {
		return nil // the event at through is gone already: the base recorded then stays
	}
	start, ok := store.ChainHead(base)
	if !ok {
		return fatal("record the chain's base", fmt.Errorf("the session's chain base is %d bytes: the store is damaged (run sessiond fsck)", len(base)))
	}
	h, err := store.ChainThrough(start, evs)
	if err != nil {
		return fatal("record the chain's base", err)
	}
	if _, err := w.conn.ExecContext(w.ctx, `UPDATE session_heads SET base_hash = ? WHERE sk = ?`, h[:], sk); err != nil {
		return fatal("record the chain's base", err)
	}
	return nil
}
