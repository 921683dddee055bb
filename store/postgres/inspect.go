package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sessiond/sessiond/store"
)

// ErrNotAStore is returned (wrapped) by OpenInspector when the URL's schema holds no
// sessiond tables.
var ErrNotAStore = errors.New("not a sessiond schema")

// Inspector is the read-only [store.Inspector] of a PostgreSQL schema. It never writes: no
// migration runs, and every session is read in a REPEATABLE READ READ ONLY transaction, a
// consistent snapshot that running instances keep writing beside (PostgreSQL's MVCC: the read
// blocks no writer). It is safe against a live deployment at any time.
type Inspector struct {
	pool *pgxpool.Pool
}

var _ store.Inspector = (*Inspector)(nil)

// OpenInspector connects to the database at url for reading only. It fails when the
// schema named by search_path holds no sessiond tables (an error wrapping ErrNotAStore) or
// has another schema version than this sessiond's.
func OpenInspector(ctx context.Context, url string) (*Inspector, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse the database URL: %w", err)
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "sessiond-fsck"
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	in := &Inspector{pool: pool}
	ms, err := migrations()
	if err != nil {
		pool.Close()
		return nil, err
	}
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL AND to_regclass('sessions') IS NOT NULL`).Scan(&exists); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	if !exists {
		pool.Close()
		return nil, fmt.Errorf("the search_path's schema has no sessiond tables: %w", ErrNotAStore)
	}
	var v int
	if err := pool.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		pool.Close()
		return nil, fmt.Errorf("read the schema version: %w", err)
	}
	if v != len(ms) {
		pool.Close()
		return nil, fmt.Errorf("the schema has version %d and this sessiond's is %d: check it with the sessiond that serves it", v, len(ms))
	}
	return in, nil
}

// Close closes the connections.
func (in *Inspector) Close() error {
	in.pool.Close()
	return nil
}

// InspectDatabase implements [store.Inspector]: PostgreSQL checksums its pages itself (when
// the cluster has data checksums) and has no cheap whole-database check to run here.
func (in *Inspector) InspectDatabase(context.Context) ([]string, error) { return nil, nil }

// InspectSessionIDs implements [store.Inspector].
func (in *Inspector) InspectSessionIDs(ctx context.Context, after string, limit int) ([]string, error) {
	rows, err := in.pool.Query(ctx, `SELECT id FROM sessions WHERE id > $1 ORDER BY id LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return ids, nil
}

// InspectSession implements [store.Inspector]: one REPEATABLE READ READ ONLY transaction.
func (in *Inspector) InspectSession(ctx context.Context, id string, fn func(*store.RawSession) error) error {
	tx, err := in.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("session %q: begin: %w", id, err)
	}
	defer tx.Rollback(context.Background())
	var sk int64
	raw := &store.RawSession{ID: id}
	var lineage, branch *string
	var record, snapshot string
	err = tx.QueryRow(ctx, `SELECT sk, status,
			CASE WHEN heartbeat IS NULL THEN record::text ELSE (record::jsonb || jsonb_build_object('last_heartbeat_at', heartbeat))::text END,
			snapshot::text, lineage::text, active_branch::text, last_seq, head_hash, base_hash FROM `+sessionFrom+` WHERE id = $1`, id).
		Scan(&sk, &raw.Status, &record, &snapshot, &lineage, &branch, &raw.LastSequence, &raw.HeadHash, &raw.BaseHash)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrSessionNotFound
	}
	if err != nil {
		return fmt.Errorf("session %q: %w", id, err)
	}
	raw.Record, raw.Snapshot = []byte(record), []byte(snapshot)
	if lineage != nil {
		raw.Lineage = []byte(*lineage)
	}
	if branch != nil {
		raw.ActiveBranch = []byte(*branch)
	}
	var lc string
	switch err := tx.QueryRow(ctx, `SELECT data::text FROM session_lifecycle WHERE sk = $1`, sk).Scan(&lc); {
	case err == nil:
		raw.Lifecycle = []byte(lc)
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("session %q: lifecycle: %w", id, err)
	}
	rows, err := tx.Query(ctx, `SELECT run_id, ord, active, data::text FROM runs WHERE sk = $1 ORDER BY ord`, sk)
	if err != nil {
		return fmt.Errorf("session %q: runs: %w", id, err)
	}
	raw.Runs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.RawRun, error) {
		var r store.RawRun
		var data string
		err := row.Scan(&r.RunID, &r.Ord, &r.Active, &data)
		r.Data = []byte(data)
		return r, err
	})
	if err != nil {
		return fmt.Errorf("session %q: runs: %w", id, err)
	}
	rows, err = tx.Query(ctx, `SELECT idem_key, result FROM command_results WHERE sk = $1 ORDER BY idem_key COLLATE "C"`, sk)
	if err != nil {
		return fmt.Errorf("session %q: command results: %w", id, err)
	}
	raw.CommandResults, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.RawCommandResult, error) {
		var r store.RawCommandResult
		err := row.Scan(&r.Key, &r.Result)
		return r, err
	})
	if err != nil {
		return fmt.Errorf("session %q: command results: %w", id, err)
	}
	if err := inspectUsage(ctx, tx, sk, raw); err != nil {
		return fmt.Errorf("session %q: usage rollup: %w", id, err)
	}
	raw.Events = func(visit func(*store.StoredEvent) error) error {
		rows, err := tx.Query(ctx, `SELECT seq, event_id, idem_key, event_type, run_id, data, hash FROM events WHERE sk = $1 ORDER BY seq`, sk)
		if err != nil {
			return fmt.Errorf("session %q: events: %w", id, err)
		}
		defer rows.Close()
		var e store.StoredEvent
		for rows.Next() {
			if err := rows.Scan(&e.Sequence, &e.EventID, &e.IdempotencyKey, &e.EventType, &e.RunID, &e.Data, &e.Hash); err != nil {
				return fmt.Errorf("session %q: events: %w", id, err)
			}
			if err := visit(&e); err != nil {
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("session %q: events: %w", id, err)
		}
		return nil
	}
	return fn(raw)
}

// inspectUsage reads session sk's usage rollup rows into raw, when the store has a built
// rollup (migration 0012, usage_state.built).
func inspectUsage(ctx context.Context, tx pgx.Tx, sk int64, raw *store.RawSession) error {
	var built bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('usage_state') IS NOT NULL AND coalesce((SELECT built FROM usage_state), false)`).Scan(&built); err != nil || !built {
		return err
	}
	rows, err := tx.Query(ctx, `SELECT day, `+strings.Join(usageDayCols, ", ")+` FROM usage_days WHERE sk = $1 ORDER BY day`, sk)
	if err != nil {
		return err
	}
	raw.UsageDays, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.UsageDay, error) {
		var d store.UsageDay
		var day int32
		t := &d.UsageTotals
		err := row.Scan(&day, &t.UsageEvents, &t.InputTokens, &t.OutputTokens, &t.TotalTokens, &t.RunsCompleted, &t.RunsFailed, &t.RunsStopped, &t.RunDurationMs, &t.ToolCalls, &t.ToolFailures, &t.ToolDenied)
		d.Day = int64(day)
		return d, err
	})
	if err != nil {
		return err
	}
	rows, err = tx.Query(ctx, `SELECT day, tool, calls, failures, denied FROM usage_tools WHERE sk = $1 ORDER BY day, tool`, sk)
	if err != nil {
		return err
	}
	raw.UsageTools, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.ToolDay, error) {
		var d store.ToolDay
		var day int32
		err := row.Scan(&day, &d.Tool, &d.Calls, &d.Failures, &d.Denied)
		d.Day = int64(day)
		return d, err
	})
	if err != nil {
		return err
	}
	raw.UsageRead = true
	return nil
}
