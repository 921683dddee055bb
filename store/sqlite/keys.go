package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sessiond/sessiond/store"
)

// CreateKey stores a new key, as documented on store.Keys. Like every write it goes through
// the writer, so it is durable when this returns.
func (s *Store) CreateKey(ctx context.Context, k *store.Key) error {
	row := store.KeyToRow(k)
	r := &request{ctx: ctx, op: func(w *writer) error {
		res, err := w.conn.ExecContext(w.ctx, `INSERT INTO api_keys (`+store.KeyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, row.Args()...)
		if err != nil {
			return fatal("store key", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return store.ErrKeyExists
		}
		return nil
	}}
	if err := s.submit(ctx, r); err != nil {
		return fmt.Errorf("create key %q: %w", k.ID, err)
	}
	if r.err != nil {
		return fmt.Errorf("create key %q: %w", k.ID, r.err)
	}
	return nil
}

// Key returns the key with that id, or store.ErrKeyNotFound.
func (s *Store) Key(ctx context.Context, id string) (store.Key, error) {
	if err := s.enter(); err != nil {
		return store.Key{}, err
	}
	defer s.inflight.Done()
	var row store.KeyRow
	err := s.settle(ctx, s.rdb.QueryRowContext(ctx, `SELECT `+store.KeyColumns+` FROM api_keys WHERE id = ?`, id).Scan(row.Dest()...))
	if errors.Is(err, sql.ErrNoRows) {
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
		WHERE (?1 = '' OR project = ?1) AND (?2 OR parent = '') ORDER BY created_ms, id`, f.Project, f.Derived)
}

// LapsedKeys returns the keys among ids revoked or expired at now, in one read.
func (s *Store) LapsedKeys(ctx context.Context, ids []string, now time.Time) ([]store.Key, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if len(ids) > store.MaxLapsedKeys {
		return nil, fmt.Errorf("lapsed keys: %d ids, at most %d", len(ids), store.MaxLapsedKeys)
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("lapsed keys: %w", err)
	}
	return s.queryKeys(ctx, "lapsed keys", `SELECT `+store.KeyColumns+` FROM api_keys
		WHERE (revoked_ms <> 0 OR expires_ms <> 0 AND expires_ms <= ?) AND id IN (SELECT value FROM json_each(?))`, now.UnixMilli(), string(list))
}

// queryKeys runs a query of whole key rows on the read pool; what names it in errors.
func (s *Store) queryKeys(ctx context.Context, what, query string, args ...any) ([]store.Key, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.inflight.Done()
	rows, err := s.rdb.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []store.Key
	for rows.Next() {
		var row store.KeyRow
		if err := rows.Scan(row.Dest()...); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, row.Key())
	}
	if err := s.settle(ctx, rows.Err()); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// RevokeKey marks the key revoked at at (keeping an earlier revocation) and returns it.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time) (store.Key, error) {
	var row store.KeyRow
	r := &request{ctx: ctx, op: func(w *writer) error {
		err := w.conn.QueryRowContext(w.ctx, `UPDATE api_keys SET revoked_ms = CASE WHEN revoked_ms = 0 THEN ? ELSE revoked_ms END
			WHERE id = ? RETURNING `+store.KeyColumns, at.UnixMilli(), id).Scan(row.Dest()...)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrKeyNotFound
		}
		if err != nil {
			return fatal("revoke key", err)
		}
		return nil
	}}
	if err := s.submit(ctx, r); err != nil {
		return store.Key{}, fmt.Errorf("revoke key %q: %w", id, err)
	}
	if r.err != nil {
		return store.Key{}, fmt.Errorf("revoke key %q: %w", id, r.err)
	}
	return row.Key(), nil
}

// TouchKeys records the keys' last use in one write.
func (s *Store) TouchKeys(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	r := &request{ctx: ctx, op: func(w *writer) error {
		for id, at := range used {
			if _, err := w.conn.ExecContext(w.ctx, `UPDATE api_keys SET last_used_ms = MAX(last_used_ms, ?) WHERE id = ?`, at.UnixMilli(), id); err != nil {
				return fatal("touch key", err)
			}
		}
		return nil
	}}
	if err := s.submit(ctx, r); err != nil {
		return fmt.Errorf("touch keys: %w", err)
	}
	if r.err != nil {
		return fmt.Errorf("touch keys: %w", r.err)
	}
	return nil
}

// DeleteExpiredKeys deletes the derived keys that expired before cutoff.
func (s *Store) DeleteExpiredKeys(ctx context.Context, cutoff time.Time) (int64, error) {
	var n int64
	r := &request{ctx: ctx, op: func(w *writer) error {
		res, err := w.conn.ExecContext(w.ctx, `DELETE FROM api_keys WHERE parent <> '' AND expires_ms <> 0 AND expires_ms < ?`, cutoff.UnixMilli())
		if err != nil {
			return fatal("delete expired keys", err)
		}
		n, _ = res.RowsAffected()
		return nil
	}}
	if err := s.submit(ctx, r); err != nil {
		return 0, fmt.Errorf("delete expired keys: %w", err)
	}
	if r.err != nil {
		return 0, fmt.Errorf("delete expired keys: %w", r.err)
	}
	return n, nil
}
