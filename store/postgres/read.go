package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

const eventCols = `seq, event_id, idem_key, event_type, run_id, data`

// sessionKey returns a session's internal key, or store.ErrSessionNotFound. Keys are cached:
// sessions are never deleted, so a session's key never changes.
func (s *Store) sessionKey(ctx context.Context, id string) (int64, error) {
	if v, ok := s.sessKeys.Load(id); ok {
		return v.(int64), nil
	}
	var sk int64
	err := retry(ctx, readAttempts, func() error {
		return s.pool.QueryRow(ctx, `SELECT sk FROM sessions WHERE id = $1`, id).Scan(&sk)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, store.ErrSessionNotFound
	}
	if err != nil {
		return 0, err
	}
	s.sessKeys.Store(id, sk)
	return sk, nil
}

// ReadEvents returns the committed events of the session with sequence > after, in order, at
// most limit (default and cap 10000). It returns store.ErrSessionNotFound for an unknown
// session. The events are read in one statement, so they are a gap-free prefix of what
// follows after: appends to one session commit in sequence order (see Append).
func (s *Store) ReadEvents(ctx context.Context, sessionID string, after int64, limit int) ([]store.StoredEvent, error) {
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("read events of session %q: %w", sessionID, err)
	}
	defer s.inflight.Done()
	limit = store.ReadLimit(limit)
	if after < -1 {
		after = -1
	}
	sk, err := s.sessionKey(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("read events of session %q: %w", sessionID, err)
	}
	var out []store.StoredEvent
	err = retry(ctx, readAttempts, func() error {
		rows, err := s.pool.Query(ctx, `SELECT `+eventCols+` FROM events WHERE sk = $1 AND seq > $2 ORDER BY seq LIMIT $3`, sk, after, limit)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, scanEvent)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read events of session %q: %w", sessionID, err)
	}
	if out == nil {
		out = []store.StoredEvent{}
	}
	return out, nil
}

// AppendEventsData appends to dst the stored bytes of the events ReadEvents returns, sep between
// two of them (store.EventsDataAppender): one column per row, copied once from the driver's
// buffer (pgtype.DriverBytes) into dst, in one statement as ReadEvents.
func (s *Store) AppendEventsData(ctx context.Context, sessionID string, after int64, limit int, sep byte, dst []byte) ([]byte, int, error) {
	fail := func(err error) ([]byte, int, error) {
		return dst, 0, fmt.Errorf("read events of session %q: %w", sessionID, err)
	}
	if err := s.enter(); err != nil {
		return fail(err)
	}
	defer s.inflight.Done()
	limit = store.ReadLimit(limit)
	if after < -1 {
		after = -1
	}
	sk, err := s.sessionKey(ctx, sessionID)
	if err != nil {
		return fail(err)
	}
	out, n := dst, 0
	err = retry(ctx, readAttempts, func() error {
		out, n = dst, 0 // an attempt that failed part way leaves nothing behind
		rows, err := s.pool.Query(ctx, `SELECT data FROM events WHERE sk = $1 AND seq > $2 ORDER BY seq LIMIT $3`, sk, after, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		var data pgtype.DriverBytes
		for rows.Next() {
			if err := rows.Scan(&data); err != nil {
				return err
			}
			if n > 0 {
				out = append(out, sep)
			}
			out = append(out, data...)
			n++
		}
		return rows.Err()
	})
	if err != nil {
		return fail(err)
	}
	return out, n, nil
}

func scanEvent(row pgx.CollectableRow) (store.StoredEvent, error) {
	var e store.StoredEvent
	err := row.Scan(&e.Sequence, &e.EventID, &e.IdempotencyKey, &e.EventType, &e.RunID, &e.Data)
	return e, err
}

// LastSequence returns the sequence of the session's last committed event, -1 when its log is
// empty, or store.ErrSessionNotFound.
func (s *Store) LastSequence(ctx context.Context, sessionID string) (int64, error) {
	if err := s.enter(); err != nil {
		return 0, fmt.Errorf("last sequence of session %q: %w", sessionID, err)
	}
	defer s.inflight.Done()
	var last int64
	err := retry(ctx, readAttempts, func() error {
		return s.pool.QueryRow(ctx, `SELECT last_seq FROM `+sessionFrom+` WHERE id = $1`, sessionID).Scan(&last)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("last sequence of session %q: %w", sessionID, store.ErrSessionNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("last sequence of session %q: %w", sessionID, err)
	}
	return last, nil
}

// EventByID returns the session's event with that eventId, store.ErrEventNotFound when there is
// none, or store.ErrSessionNotFound for an unknown session.
func (s *Store) EventByID(ctx context.Context, sessionID, eventID string) (store.StoredEvent, error) {
	return s.eventBy(ctx, "event_id", "eventId", sessionID, eventID)
}

// EventByIdempotencyKey returns the session's event with that idempotency key,
// store.ErrEventNotFound when there is none, or store.ErrSessionNotFound for an unknown session.
func (s *Store) EventByIdempotencyKey(ctx context.Context, sessionID, key string) (store.StoredEvent, error) {
	return s.eventBy(ctx, "idem_key", "idempotencyKey", sessionID, key)
}

func (s *Store) eventBy(ctx context.Context, col, what, sessionID, val string) (store.StoredEvent, error) {
	var e store.StoredEvent
	if err := s.enter(); err != nil {
		return e, fmt.Errorf("event with %s %q in session %q: %w", what, val, sessionID, err)
	}
	defer s.inflight.Done()
	sk, err := s.sessionKey(ctx, sessionID)
	if err != nil {
		return e, fmt.Errorf("event with %s %q in session %q: %w", what, val, sessionID, err)
	}
	err = retry(ctx, readAttempts, func() error {
		return s.pool.QueryRow(ctx, `SELECT `+eventCols+` FROM events WHERE sk = $1 AND `+col+` = $2`, sk, val).
			Scan(&e.Sequence, &e.EventID, &e.IdempotencyKey, &e.EventType, &e.RunID, &e.Data)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return e, fmt.Errorf("event with %s %q in session %q: %w", what, val, sessionID, store.ErrEventNotFound)
	}
	if err != nil {
		return e, fmt.Errorf("event with %s %q in session %q: %w", what, val, sessionID, err)
	}
	return e, nil
}

// Runs returns the session's runs in the order they were created, or store.ErrSessionNotFound.
func (s *Store) Runs(ctx context.Context, sessionID string) ([]contract.Run, error) {
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("runs of session %q: %w", sessionID, err)
	}
	defer s.inflight.Done()
	sk, err := s.sessionKey(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("runs of session %q: %w", sessionID, err)
	}
	var datas [][]byte
	err = retry(ctx, readAttempts, func() error {
		rows, err := s.pool.Query(ctx, `SELECT data FROM runs WHERE sk = $1 ORDER BY ord`, sk)
		if err != nil {
			return err
		}
		datas, err = pgx.CollectRows(rows, pgx.RowTo[[]byte])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("runs of session %q: %w", sessionID, err)
	}
	out := make([]contract.Run, len(datas))
	for i, d := range datas {
		if err := json.Unmarshal(d, &out[i]); err != nil {
			return nil, fmt.Errorf("runs of session %q: decode stored run: %w", sessionID, err)
		}
	}
	return out, nil
}

// Run returns one run of the session, store.ErrRunNotFound when there is none, or
// store.ErrSessionNotFound for an unknown session.
func (s *Store) Run(ctx context.Context, sessionID, runID string) (contract.Run, error) {
	var r contract.Run
	if err := s.enter(); err != nil {
		return r, fmt.Errorf("run %q of session %q: %w", runID, sessionID, err)
	}
	defer s.inflight.Done()
	sk, err := s.sessionKey(ctx, sessionID)
	if err != nil {
		return r, fmt.Errorf("run %q of session %q: %w", runID, sessionID, err)
	}
	var data []byte
	err = retry(ctx, readAttempts, func() error {
		return s.pool.QueryRow(ctx, `SELECT data FROM runs WHERE sk = $1 AND run_id = $2`, sk, runID).Scan(&data)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("run %q of session %q: %w", runID, sessionID, store.ErrRunNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("run %q of session %q: %w", runID, sessionID, err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("run %q of session %q: decode stored run: %w", runID, sessionID, err)
	}
	return r, nil
}
