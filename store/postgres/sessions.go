package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// sessionCols are the columns scanSession reads, from sessionFrom: the session's row and its
// head (migration 0009), which holds the last sequence and the heartbeat of the last append.
const (
	sessionCols = `sk, record, snapshot, lineage, active_branch, last_seq, heartbeat`
	sessionFrom = `sessions JOIN session_heads USING (sk)`
)

// readAttempts is how many times a read is tried when the connection fails under it.
const readAttempts = 3

// nullJSON passes nil as SQL NULL and anything else as JSON text.
func nullJSON(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// scanSession decodes a row of sessionCols. The heartbeat of the last append, when the record
// was not written since, is the record's last_heartbeat_at (migration 0009).
func scanSession(row pgx.Row) (int64, *store.Session, error) {
	var (
		sk   int64
		c    store.SessionColumns
		last int64
		hb   *string
	)
	if err := row.Scan(&sk, &c.Record, &c.Snapshot, &c.Lineage, &c.ActiveBranch, &last, &hb); err != nil {
		return 0, nil, err
	}
	s, err := store.DecodeSession(c, last)
	if err != nil {
		return 0, nil, err
	}
	if hb != nil {
		s.Record.LastHeartbeatAt = contract.Some(*hb)
	}
	return sk, s, nil
}

// lockSession locks session id's row in tx (FOR NO KEY UPDATE: the lock every writer of the
// session takes, appends included) and then reads the session, in a statement of its own: its
// snapshot, taken once the lock is held, sees the session's head (last sequence, heartbeat) as
// the lock's previous holder committed it. The error is pgx.ErrNoRows for an unknown id.
func lockSession(ctx context.Context, tx pgx.Tx, id string) (int64, *store.Session, error) {
	sk, _, err := lockRow(ctx, tx, id)
	if err != nil {
		return 0, nil, err
	}
	return scanSession(tx.QueryRow(ctx, `SELECT `+sessionCols+` FROM `+sessionFrom+` WHERE sk = $1`, sk))
}

// lockHead is lockSession for the session's key, status and last sequence alone.
func lockHead(ctx context.Context, tx pgx.Tx, id string) (sk int64, status string, last int64, err error) {
	sk, status, err = lockRow(ctx, tx, id)
	if err != nil {
		return 0, "", 0, err
	}
	err = tx.QueryRow(ctx, `SELECT last_seq FROM session_heads WHERE sk = $1`, sk).Scan(&last)
	return sk, status, last, err
}

// lockRow locks session id's row (see lockSession) and returns its key and status.
func lockRow(ctx context.Context, tx pgx.Tx, id string) (sk int64, status string, err error) {
	err = tx.QueryRow(ctx, `SELECT sk, status FROM sessions WHERE id = $1 FOR NO KEY UPDATE`, id).Scan(&sk, &status)
	return sk, status, err
}

// CreateSession stores a new session, keyed by s.Record.SessionID, with an empty log. It
// returns store.ErrSessionExists when the id is taken (by any instance). s.LastSequence is
// ignored and set to -1.
func (s *Store) CreateSession(ctx context.Context, sess *store.Session) error {
	defer s.kickChanges() // after the commit: the changes it recorded get their numbers (changes.go)
	if sess == nil || sess.Record.SessionID == "" {
		return errors.New("create session: the record has no session_id")
	}
	id := sess.Record.SessionID
	if err := s.enter(); err != nil {
		return fmt.Errorf("create session %q: %w", id, err)
	}
	defer s.inflight.Done()
	row, err := store.EncodeSession(sess)
	if err != nil {
		return fmt.Errorf("create session %q: %w", id, err)
	}
	var sk int64
	created, tries := false, 0
	err = retry(ctx, readAttempts, func() error {
		tries++
		// ON CONFLICT DO NOTHING: the id is taken (ErrSessionExists), unless an earlier try of
		// this call committed and lost its answer (a connection cut, a failover): then the row
		// holds exactly what this call inserts (the record's times included), and the
		// session was created by this call.
		err := s.pool.QueryRow(ctx, `INSERT INTO sessions (id, status, agent_id, project, record, snapshot, lineage, active_branch)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING RETURNING sk`,
			id, sess.Record.Status, sess.Record.AgentID, sess.Record.Project.Get(),
			string(row.Record), string(row.Snapshot), nullJSON(row.Lineage), nullJSON(row.ActiveBranch)).Scan(&sk)
		if errors.Is(err, pgx.ErrNoRows) {
			created = false
			if tries > 1 {
				err = s.pool.QueryRow(ctx, `SELECT sk FROM sessions WHERE id = $1 AND record::text = $2 AND snapshot::text = $3`,
					id, string(row.Record), string(row.Snapshot)).Scan(&sk)
				if errors.Is(err, pgx.ErrNoRows) {
					return nil
				}
				created = err == nil
				return err
			}
			return nil
		}
		created = err == nil
		return err
	})
	if err != nil {
		return fmt.Errorf("create session %q: %w", id, err)
	}
	if !created {
		return fmt.Errorf("create session %q: %w", id, store.ErrSessionExists)
	}
	// The new log's head: empty, at the chain's genesis (heads.go).
	s.heads.put(sk, -1, store.ChainGenesis)
	sess.LastSequence = -1
	return nil
}

// GetSession returns the session as last committed, or store.ErrSessionNotFound.
func (s *Store) GetSession(ctx context.Context, id string) (*store.Session, error) {
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("get session %q: %w", id, err)
	}
	defer s.inflight.Done()
	var sess *store.Session
	err := retry(ctx, readAttempts, func() (err error) {
		_, sess, err = scanSession(s.pool.QueryRow(ctx, `SELECT `+sessionCols+` FROM `+sessionFrom+` WHERE id = $1`, id))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get session %q: %w", id, store.ErrSessionNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get session %q: %w", id, err)
	}
	return sess, nil
}

// ListSessions returns the sessions matching f in id order (byte order), at most f.Limit
// (default 100, capped at 1000), and the cursor of the next page: the last id returned when
// more sessions match, "" otherwise.
func (s *Store) ListSessions(ctx context.Context, f store.ListFilter) ([]*store.Session, string, error) {
	if err := s.enter(); err != nil {
		return nil, "", fmt.Errorf("list sessions: %w", err)
	}
	defer s.inflight.Done()
	limit := f.PageLimit()
	var where []string
	var args []any
	for _, c := range []struct{ col, val string }{{"status", f.Status}, {"agent_id", f.AgentID}, {"project", f.Project},
		{"lineage->>'forkedFromThreadId'", f.ForkedFrom}, {"id >", f.After}} {
		if c.val != "" {
			args = append(args, c.val)
			op := " = "
			col := c.col
			if strings.HasSuffix(col, " >") {
				col, op = strings.TrimSuffix(col, " >"), " > "
			}
			where = append(where, col+op+"$"+strconv.Itoa(len(args)))
		}
	}
	q := `SELECT ` + sessionCols + ` FROM ` + sessionFrom
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	args = append(args, limit+1)
	q += ` ORDER BY id LIMIT $` + strconv.Itoa(len(args))
	var out []*store.Session
	err := retry(ctx, readAttempts, func() error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			_, sess, err := scanSession(rows)
			if err != nil {
				return err
			}
			out = append(out, sess)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, "", fmt.Errorf("list sessions: %w", err)
	}
	out, next := store.CutPage(out, limit)
	return out, next, nil
}

// UpdateSession applies fn to the current session in a transaction that holds the session's
// row lock, and stores Record, Snapshot, Lineage and ActiveBranch as fn leaves them; changes to
// LastSequence are ignored and the session id may not change. While fn runs, appends to the
// session (through any instance) wait: fn must be quick and must not call the store. It
// returns store.ErrSessionNotFound for an unknown id, or fn's error (nothing stored). fn may be
// called again, on a fresh copy, when the connection fails before the commit.
func (s *Store) UpdateSession(ctx context.Context, id string, fn func(*store.Session) error) (*store.Session, error) {
	defer s.kickChanges() // after the commit: the changes it recorded get their numbers (changes.go)
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("update session %q: %w", id, err)
	}
	defer s.inflight.Done()
	var out *store.Session
	var fnErr error
	err := retry(ctx, readAttempts, func() error {
		fnErr = nil
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			sk, cur, err := lockSession(ctx, tx, id)
			if errors.Is(err, pgx.ErrNoRows) {
				fnErr = store.ErrSessionNotFound
				return fnErr
			}
			if err != nil {
				return fmt.Errorf("load session: %w", err)
			}
			row, err := store.ApplySessionUpdate(id, cur, fn)
			if err != nil {
				fnErr = err
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE sessions SET status = $1, agent_id = $2, project = $3, record = $4, snapshot = $5, lineage = $6, active_branch = $7 WHERE sk = $8`,
				cur.Record.Status, cur.Record.AgentID, cur.Record.Project.Get(),
				string(row.Record), string(row.Snapshot), nullJSON(row.Lineage), nullJSON(row.ActiveBranch), sk); err != nil {
				return fmt.Errorf("update session: %w", err)
			}
			out = cur
			return nil
		})
		if fnErr != nil {
			return nil // fn's answer (or an unknown session) is final: no retry
		}
		return err
	})
	if fnErr != nil {
		return nil, fmt.Errorf("update session %q: %w", id, fnErr)
	}
	if err != nil {
		return nil, fmt.Errorf("update session %q: %w", id, err)
	}
	return out, nil
}
