package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sessiond/sessiond/store"
)

// CreateKey stores a new key, as documented on store.Keys.
func (s *Store) CreateKey(ctx context.Context, k *store.Key) error {
	if err := s.enter(); err != nil {
		return fmt.Errorf("create key %q: %w", k.ID, err)
	}
	defer s.inflight.Done()
	row := store.KeyToRow(k)
	var n int64
	attempts := 0
	err := retry(ctx, readAttempts, func() error {
		attempts++
		tag, err := s.pool.Exec(ctx, `INSERT INTO api_keys (`+store.KeyColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING`, row.Args()...)
		n = tag.RowsAffected()
		return err
	})
	if err == nil && n == 0 {
		err = store.ErrKeyExists
		// A retry after an attempt whose answer was lost finds the row that attempt wrote:
		// that is this key, created, not a clash (its secret's hash says which).
		if attempts > 1 {
			if got, kerr := s.Key(ctx, k.ID); kerr == nil && bytes.Equal(got.Hash, k.Hash) {
				err = nil
			}
		}
	}
	if err != nil {
		return fmt.Errorf("create key %q: %w", k.ID, err)
	}
	return nil
}

// Key returns the key with that id, or store.ErrKeyNotFound.
func (s *Store) Key(ctx context.Context, id string) (store.Key, error) {
	if err := s.enter(); err != nil {
		return store.Key{}, fmt.Errorf("key %q: %w", id, err)
	}
	defer s.inflight.Done()
	var row store.KeyRow
	err := retry(ctx, readAttempts, func() error {
		return s.pool.QueryRow(ctx, `SELECT `+store.KeyColumns+` FROM api_keys WHERE id = $1`, id).Scan(row.Dest()...)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Key{}, fmt.Errorf("key %q: %w", id, store.ErrKeyNotFound)
	}
	if err != nil {
		return store.Key{}, fmt.Errorf("key %q: %w", id, err)
	}
	return row.Key(), nil
}

// ListKeys returns the keys matching f, oldest first.
func (s *Store) ListKeys(ctx context.Context, f store.KeyFilter) ([]store.Key, error) {
	return s.queryKeys(ctx, "list keys", `SELECT `+store.KeyColumns+` FROM api_keys
		WHERE ($1 = '' OR project = $1) AND ($2 OR parent = '') ORDER BY created_ms, id`, f.Project, f.Derived)
}

// LapsedKeys returns the keys among ids revoked or expired at now, in one read. The planner
// tests the integer columns before the array (cheaper quals first), so the ids are compared
// only for the lapsed keys.
func (s *Store) LapsedKeys(ctx context.Context, ids []string, now time.Time) ([]store.Key, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if len(ids) > store.MaxLapsedKeys {
		return nil, fmt.Errorf("lapsed keys: %d ids, at most %d", len(ids), store.MaxLapsedKeys)
	}
	return s.queryKeys(ctx, "lapsed keys", `SELECT `+store.KeyColumns+` FROM api_keys
		WHERE (revoked_ms <> 0 OR expires_ms <> 0 AND expires_ms <= $2) AND id = ANY($1)`, ids, now.UnixMilli())
}

// queryKeys runs a query of whole key rows, retried like every read; what names it in
// errors.
func (s *Store) queryKeys(ctx context.Context, what, query string, args ...any) ([]store.Key, error) {
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer s.inflight.Done()
	var out []store.Key
	err := retry(ctx, readAttempts, func() error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var row store.KeyRow
			if err := rows.Scan(row.Dest()...); err != nil {
				return err
			}
			out = append(out, row.Key())
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// RevokeKey marks the key revoked at at (keeping an earlier revocation) and returns it.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time) (store.Key, error) {
	if err := s.enter(); err != nil {
		return store.Key{}, fmt.Errorf("revoke key %q: %w", id, err)
	}
	defer s.inflight.Done()
	var row store.KeyRow
	err := retry(ctx, readAttempts, func() error {
		return s.pool.QueryRow(ctx, `UPDATE api_keys SET revoked_ms = CASE WHEN revoked_ms = 0 THEN $1 ELSE revoked_ms END
			WHERE id = $2 RETURNING `+store.KeyColumns, at.UnixMilli(), id).Scan(row.Dest()...)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Key{}, fmt.Errorf("revoke key %q: %w", id, store.ErrKeyNotFound)
	}
	if err != nil {
		return store.Key{}, fmt.Errorf("revoke key %q: %w", id, err)
	}
	return row.Key(), nil
}

// TouchKeys records the keys' last use in one statement.
func (s *Store) TouchKeys(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	if err := s.enter(); err != nil {
		return fmt.Errorf("touch keys: %w", err)
	}
	defer s.inflight.Done()
	ids := make([]string, 0, len(used))
	ats := make([]int64, 0, len(used))
	for id, at := range used {
		ids = append(ids, id)
		ats = append(ats, at.UnixMilli())
	}
	err := retry(ctx, readAttempts, func() error {
		_, err := s.pool.Exec(ctx, `UPDATE api_keys AS k SET last_used_ms = GREATEST(k.last_used_ms, u.at)
			FROM unnest($1::text[], $2::bigint[]) AS u(id, at) WHERE k.id = u.id`, ids, ats)
		return err
	})
	if err != nil {
		return fmt.Errorf("touch keys: %w", err)
	}
	return nil
}

// DeleteExpiredKeys deletes the derived keys that expired before cutoff.
func (s *Store) DeleteExpiredKeys(ctx context.Context, cutoff time.Time) (int64, error) {
	if err := s.enter(); err != nil {
		return 0, fmt.Errorf("delete expired keys: %w", err)
	}
	defer s.inflight.Done()
	var n int64
	err := retry(ctx, readAttempts, func() error {
		tag, err := s.pool.Exec(ctx, `DELETE FROM api_keys WHERE parent <> '' AND expires_ms <> 0 AND expires_ms < $1`, cutoff.UnixMilli())
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete expired keys: %w", err)
	}
	return n, nil
}
