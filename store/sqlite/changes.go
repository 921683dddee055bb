package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/sessiond/sessiond/store"
)

// The change feed (store/changes.go). The triggers of migration 0007 write the changes in the
// transaction of the write they record; the writer notes the last change sequence of each group
// before its COMMIT (lastChange) and the syncer tells the change subscribers once the group is
// durable.

const changeCols = `seq, kind, session_id, project, agent_id, run_id, status, previous, attempt, token, at_ms`

// ReadChanges returns the changes after the sequence after that match f, as documented on
// store.ChangeFeed. A project filter reads the index changes_project, an agent filter (alone)
// changes_agent, no filter the table in sequence order.
func (s *Store) ReadChanges(ctx context.Context, after int64, f store.ChangeFilter, limit int) ([]store.Change, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.inflight.Done()
	q := `SELECT ` + changeCols + ` FROM changes WHERE seq > ?`
	args := []any{after}
	if f.Project != "" {
		q += ` AND project = ?`
		args = append(args, f.Project)
	}
	if f.AgentID != "" {
		q += ` AND agent_id = ?`
		args = append(args, f.AgentID)
	}
	q += ` ORDER BY seq LIMIT ?`
	args = append(args, store.ChangesLimit(limit))
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read changes: %w", err)
	}
	defer rows.Close()
	var out []store.Change
	for rows.Next() {
		c, err := scanChange(rows)
		if err != nil {
			return nil, fmt.Errorf("read changes: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read changes: %w", err)
	}
	// What the query saw may be committed but not yet synced: wait until it is durable.
	if err := s.visible(ctx); err != nil {
		return nil, fmt.Errorf("read changes: %w", err)
	}
	return out, nil
}

// scanChange decodes a row of changeCols.
func scanChange(sc interface{ Scan(...any) error }) (store.Change, error) {
	var c store.Change
	var at int64
	if err := sc.Scan(&c.Seq, &c.Kind, &c.SessionID, &c.Project, &c.AgentID, &c.RunID, &c.Status, &c.Previous, &c.Attempt, &c.Token, &at); err != nil {
		return c, err
	}
	c.At = time.UnixMilli(at).UTC()
	return c, nil
}

// LastChange returns the sequence of the last durable change, 0 when there is none.
func (s *Store) LastChange(ctx context.Context) (int64, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.inflight.Done()
	var n int64
	err := s.settle(ctx, s.rdb.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM changes`).Scan(&n))
	if err != nil {
		return 0, fmt.Errorf("last change: %w", err)
	}
	return n, nil
}

// SubscribeChanges registers fn, called by the syncer after each durable group that recorded
// changes. It must not block and must not call the store's methods.
func (s *Store) SubscribeChanges(fn func(seq int64)) (cancel func()) { return s.changeSubs.Add(fn) }

// lastChange returns the sequence of the last change the writer's transaction holds (MAX of
// the rowid: one index step).
func (w *writer) lastChange() (int64, error) {
	var n sql.NullInt64
	if err := w.st.lastChange.QueryRowContext(w.ctx).Scan(&n); err != nil {
		return 0, fatal("read the last change", err)
	}
	return n.Int64, nil
}

// qLastChange is lastChange's query, prepared once with the writer's statements: it runs
// before every group's COMMIT.
const qLastChange = `SELECT MAX(seq) FROM changes`
