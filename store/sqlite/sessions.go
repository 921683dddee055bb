package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/sessiond/sessiond/store"
)

const sessionCols = `sk, record, snapshot, lineage, active_branch, ` + lastSeqExpr

// lastSeqExpr is the last sequence of the session of a row of sessions: the highest of its
// acknowledged head (session_heads, written in the commit of every append that adds events),
// the sequence of its last event (one step down the events table's key, rid, and
// event_tail's), and the last_seq column (written by the writes that remove the log's tail,
// CompactEvents, or write a whole log, ImportSession). The head keeps an acknowledged
// sequence from being handed out again when the log lost its newest rows, and lets fsck see
// that loss (the Inspector's last sequence is this).
const lastSeqExpr = `max(sessions.last_seq,
	coalesce((SELECT h.last_seq FROM session_heads AS h WHERE h.sk = sessions.sk), -1),
	coalesce((SELECT e.seq FROM events AS e WHERE e.rid >= (sessions.sk << 32) AND e.rid < ((sessions.sk + 1) << 32) ORDER BY e.rid DESC LIMIT 1), -1),
	coalesce((SELECT e.seq FROM event_tail AS e WHERE e.rid >= (sessions.sk << 32) AND e.rid < ((sessions.sk + 1) << 32) ORDER BY e.rid DESC LIMIT 1), -1))`

// scanSession decodes a row of sessionCols.
func scanSession(sc interface{ Scan(...any) error }) (int64, *store.Session, error) {
	var (
		sk   int64
		c    store.SessionColumns
		last int64
	)
	if err := sc.Scan(&sk, &c.Record, &c.Snapshot, &c.Lineage, &c.ActiveBranch, &last); err != nil {
		return 0, nil, err
	}
	s, err := store.DecodeSession(c, last)
	if err != nil {
		return 0, nil, err
	}
	return sk, s, nil
}

func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// CreateSession stores a new session, keyed by s.Record.SessionID, with an empty log. It
// returns store.ErrSessionExists when the id is taken. s.LastSequence is ignored and set to -1.
func (s *Store) CreateSession(ctx context.Context, sess *store.Session) error {
	if sess == nil || sess.Record.SessionID == "" {
		return errors.New("create session: the record has no session_id")
	}
	id := sess.Record.SessionID
	row, err := store.EncodeSession(sess)
	if err != nil {
		return fmt.Errorf("create session %q: %w", id, err)
	}
	r := &request{ctx: ctx, op: func(w *writer) error {
		res, err := w.st.insertSession.ExecContext(w.ctx, id, sess.Record.Status, sess.Record.AgentID, sess.Record.Project.Get(),
			row.Record, row.Snapshot, nullBytes(row.Lineage), nullBytes(row.ActiveBranch))
		if err != nil {
			return fatal("insert session", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fatal("insert session", err)
		}
		if n == 0 {
			return store.ErrSessionExists
		}
		return nil
	}}
	if err := s.submit(ctx, r); err != nil {
		return fmt.Errorf("create session %q: %w", id, err)
	}
	if r.err != nil {
		return fmt.Errorf("create session %q: %w", id, r.err)
	}
	sess.LastSequence = -1
	return nil
}

// GetSession returns the session as last committed, or store.ErrSessionNotFound.
func (s *Store) GetSession(ctx context.Context, id string) (*store.Session, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.inflight.Done()
	_, sess, err := scanSession(s.rd.session.QueryRowContext(ctx, id))
	err = s.settle(ctx, err)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get session %q: %w", id, store.ErrSessionNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get session %q: %w", id, err)
	}
	return sess, nil
}

// ListSessions returns the sessions matching f in id order, at most f.Limit (default 100, capped
// at 1000), and the cursor of the next page: the last id returned when more sessions match,
// "" otherwise.
func (s *Store) ListSessions(ctx context.Context, f store.ListFilter) ([]*store.Session, string, error) {
	if err := s.enter(); err != nil {
		return nil, "", err
	}
	defer s.inflight.Done()
	limit := f.PageLimit()
	var where []string
	var args []any
	for _, c := range []struct{ col, val string }{{"status", f.Status}, {"agent_id", f.AgentID}, {"project", f.Project}} {
		if c.val != "" {
			where = append(where, c.col+" = ?")
			args = append(args, c.val)
		}
	}
	if f.ForkedFrom != "" {
		// The same expression as the sessions_forked_from index, so the index serves it.
		where = append(where, "lineage IS NOT NULL AND json_extract(lineage, '$.forkedFromThreadId') = ?")
		args = append(args, f.ForkedFrom)
	}
	if f.After != "" {
		where = append(where, "id > ?")
		args = append(args, f.After)
	}
	q := `SELECT ` + sessionCols + ` FROM sessions`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY id LIMIT ?`
	args = append(args, limit+1)
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	var out []*store.Session
	for rows.Next() {
		_, sess, err := scanSession(rows)
		if err != nil {
			return nil, "", fmt.Errorf("list sessions: %w", err)
		}
		out = append(out, sess)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("list sessions: %w", err)
	}
	if err := s.visible(ctx); err != nil {
		return nil, "", fmt.Errorf("list sessions: %w", err)
	}
	out, next := store.CutPage(out, limit)
	return out, next, nil
}

// updateSession loads the session id inside the writer's transaction, applies fn to it (with
// the session's key) as store.ApplySessionUpdate does, and stores the result.
func (w *writer) updateSession(id string, fn func(sk int64, cur *store.Session) error) (*store.Session, error) {
	sk, cur, err := scanSession(w.st.sessionRow.QueryRowContext(w.ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrSessionNotFound
	}
	if err != nil {
		return nil, fatal("load session", err)
	}
	row, err := store.ApplySessionUpdate(id, cur, func(cur *store.Session) error { return fn(sk, cur) })
	if err != nil {
		return nil, err
	}
	if _, err := w.st.updateSession.ExecContext(w.ctx, cur.Record.Status, cur.Record.AgentID, cur.Record.Project.Get(),
		row.Record, row.Snapshot, nullBytes(row.Lineage), nullBytes(row.ActiveBranch), sk); err != nil {
		return nil, fatal("update session", err)
	}
	return cur, nil
}

// UpdateSession applies fn to the current session inside the writer's transaction and stores
// Record, Snapshot, Lineage and ActiveBranch as fn leaves them; changes to LastSequence are
// ignored and the session id may not change. fn runs on the writer goroutine, holding up other
// writes: it must be quick and must not call the store. It returns store.ErrSessionNotFound for
// an unknown id, or fn's error (nothing stored).
func (s *Store) UpdateSession(ctx context.Context, id string, fn func(*store.Session) error) (*store.Session, error) {
	var out *store.Session
	r := &request{ctx: ctx, op: func(w *writer) error {
		var err error
		out, err = w.updateSession(id, func(_ int64, cur *store.Session) error { return fn(cur) })
		return err
	}}
	if err := s.submit(ctx, r); err != nil {
		return nil, fmt.Errorf("update session %q: %w", id, err)
	}
	if r.err != nil {
		return nil, fmt.Errorf("update session %q: %w", id, r.err)
	}
	return out, nil
}
