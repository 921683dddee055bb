package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sessiond/sessiond/store"
)

// qPutCommandResult inserts a result unless one is stored under the key, and answers the
// session's key (NULL: no such session), the inserted result (NULL: one existed) and the stored
// one as of the statement's snapshot.
const qPutCommandResult = `WITH s AS (SELECT sk FROM sessions WHERE id = $1),
	ins AS (INSERT INTO command_results (sk, idem_key, result) SELECT sk, $2, $3 FROM s
		ON CONFLICT (sk, idem_key) DO NOTHING RETURNING result)
	SELECT (SELECT sk FROM s), (SELECT result FROM ins),
		(SELECT result FROM command_results WHERE sk = (SELECT sk FROM s) AND idem_key = $2)`

// PutCommandResult stores result under (sessionID, key) unless a result is there already, and
// returns the stored one and whether it existed, or store.ErrSessionNotFound. The first result
// stored by any instance wins; the write is committed (durably) when this returns.
func (s *Store) PutCommandResult(ctx context.Context, sessionID, key string, result []byte) ([]byte, bool, error) {
	if err := s.enter(); err != nil {
		return nil, false, fmt.Errorf("put command result %q of session %q: %w", key, sessionID, err)
	}
	defer s.inflight.Done()
	var (
		stored  []byte
		existed bool
	)
	err := retry(ctx, readAttempts+2, func() error {
		var sk *int64
		var inserted, found []byte
		if err := s.pool.QueryRow(ctx, qPutCommandResult, sessionID, key, result).Scan(&sk, &inserted, &found); err != nil {
			return err
		}
		switch {
		case sk == nil:
			return store.ErrSessionNotFound
		case inserted != nil:
			stored, existed = inserted, false
		case found != nil:
			stored, existed = found, true
		default:
			// Another transaction inserted the key after this statement's snapshot was
			// taken: the next try sees it.
			return errRetryPut
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("put command result %q of session %q: %w", key, sessionID, err)
	}
	return stored, existed, nil
}

// errRetryPut is transient: PutCommandResult raced another instance's insert.
var errRetryPut = &retryableError{"a concurrent insert of the same command result"}

// retryableError is an error that transient reports as transient.
type retryableError struct{ msg string }

func (e *retryableError) Error() string { return e.msg }

// CommandResult returns the result stored under (sessionID, key), store.ErrCommandNotFound when
// there is none, or store.ErrSessionNotFound for an unknown session.
func (s *Store) CommandResult(ctx context.Context, sessionID, key string) ([]byte, error) {
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("command result %q of session %q: %w", key, sessionID, err)
	}
	defer s.inflight.Done()
	sk, err := s.sessionKey(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("command result %q of session %q: %w", key, sessionID, err)
	}
	var out []byte
	err = retry(ctx, readAttempts, func() error {
		return s.pool.QueryRow(ctx, `SELECT result FROM command_results WHERE sk = $1 AND idem_key = $2`, sk, key).Scan(&out)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("command result %q of session %q: %w", key, sessionID, store.ErrCommandNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("command result %q of session %q: %w", key, sessionID, err)
	}
	return out, nil
}
