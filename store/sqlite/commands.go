package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sessiond/sessiond/store"
)

// PutCommandResult stores result under (sessionID, key) unless a result is there already, and
// returns the stored one and whether it existed. The write goes through the writer like every
// other write, so it is durable when this returns.
func (s *Store) PutCommandResult(ctx context.Context, sessionID, key string, result []byte) ([]byte, bool, error) {
	var (
		stored  []byte
		existed bool
	)
	r := &request{ctx: ctx, op: func(w *writer) error {
		ss, err := w.session(sessionID)
		if err != nil {
			return err
		}
		if ss == nil {
			return store.ErrSessionNotFound
		}
		res, err := w.conn.ExecContext(w.ctx, `INSERT INTO command_results (sk, idem_key, result) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, ss.sk, key, result)
		if err != nil {
			return fatal("store command result", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			stored = result
			return nil
		}
		existed = true
		if err := w.conn.QueryRowContext(w.ctx, `SELECT result FROM command_results WHERE sk = ? AND idem_key = ?`, ss.sk, key).Scan(&stored); err != nil {
			return fatal("load command result", err)
		}
		return nil
	}}
	if err := s.submit(ctx, r); err != nil {
		return nil, false, fmt.Errorf("put command result: %w", err)
	}
	if r.err != nil {
		return nil, false, fmt.Errorf("put command result: %w", r.err)
	}
	return stored, existed, nil
}

// CommandResult returns the result stored under (sessionID, key), or store.ErrCommandNotFound.
func (s *Store) CommandResult(ctx context.Context, sessionID, key string) ([]byte, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.inflight.Done()
	sk, err := s.sessionKey(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("command result: %w", err)
	}
	var out []byte
	err = s.settle(ctx, s.rdb.QueryRowContext(ctx, `SELECT result FROM command_results WHERE sk = ? AND idem_key = ?`, sk, key).Scan(&out))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrCommandNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("command result: %w", err)
	}
	return out, nil
}
