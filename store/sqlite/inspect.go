package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"modernc.org/sqlite"

	"github.com/sessiond/sessiond/store"
)

// ErrNotAStore is returned (wrapped) by OpenInspector for a file that is not a sessiond
// SQLite database: not SQLite at all, or SQLite without sessiond's schema.
var ErrNotAStore = errors.New("not a sessiond database")

// ErrCorrupt is returned (wrapped) by OpenInspector when SQLite finds the database file
// malformed before its schema can be read (a truncated or overwritten file).
var ErrCorrupt = errors.New("the database file is corrupt")

// SQLite's result codes for a malformed database and a file that is not a database.
const (
	sqliteCorrupt = 11
	sqliteNotADB  = 26
)

// sqliteCode returns the primary SQLite result code of err, 0 when it has none.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	return 0
}

// Inspector is the read-only [store.Inspector] of a data directory. It never writes: the
// database is opened read-only (mode=ro, query_only), no migration runs, nothing is created
// (a missing database is an error, not a new one), and the directory's LOCK is only ever
// taken shared and never written.
//
// It works whether or not a server has the directory open. Without one (Online false) it
// holds a shared lock on LOCK for its life, so no server can start and write while it reads;
// when the database has no WAL file then (a server that stopped cleanly removes it), the file
// is opened immutable, and SQLite creates no -wal or -shm file beside it. With a WAL file, SQLite
// reads it through its shared-memory index (sessiond.db-shm, created if missing).
// With one (Online true) it reads beside the server through SQLite's own WAL locking, which
// lets readers of other processes run alongside the writer: each session is read in one read
// transaction, a consistent snapshot, so a commit in progress is either wholly seen or not at
// all. Such a read transaction only delays the server's checkpointer (the WAL grows a little
// for the time one session takes to read); it never blocks an append.
type Inspector struct {
	dir    string
	db     *sql.DB
	lock   *dirLock
	online bool
}

var _ store.Inspector = (*Inspector)(nil)

// OpenInspector opens the store in dir for reading only. It fails when dir holds no
// sessiond.db, when the file is not a sessiond database (an error wrapping ErrNotAStore), or
// when its schema is not the one this sessiond writes (older: start sessiond serve on it once
// to migrate it; newer: use the newer sessiond).
func OpenInspector(ctx context.Context, dir string) (*Inspector, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("data directory %q: %w", dir, err)
	}
	path := filepath.Join(abs, DBFile)
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("no sessiond database: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	lock, held, err := shareLock(abs)
	if err != nil {
		return nil, err
	}
	online := !held && fileExists(filepath.Join(abs, LockFile))
	q := url.Values{}
	q.Add("mode", "ro")
	if !online && !fileExists(path+"-wal") {
		// No server can start while the lock is held, and there is no WAL to read: the file
		// is all there is. immutable=1 reads it without the WAL index and lock files that
		// SQLite would otherwise create beside it, so nothing in the directory changes.
		q.Add("immutable", "1")
	}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "query_only(1)")
	q.Add("_pragma", "cache_size(-16384)")
	db, err := sql.Open("sqlite", fileURI(path)+"?"+q.Encode())
	if err != nil {
		lock.release()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	in := &Inspector{dir: abs, db: db, lock: lock, online: online}
	if err := in.checkSchema(ctx, path); err != nil {
		in.Close()
		return nil, err
	}
	return in, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// checkSchema refuses a file that is not a sessiond database of this sessiond's schema.
func (in *Inspector) checkSchema(ctx context.Context, path string) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	var v int
	err = in.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&v)
	switch {
	case err != nil && (strings.Contains(err.Error(), "no such table") || sqliteCode(err) == sqliteNotADB):
		return fmt.Errorf("%s: %w (SQLite says: %v)", path, ErrNotAStore, err)
	case err != nil && sqliteCode(err) == sqliteCorrupt:
		return fmt.Errorf("%s: %w: %v", path, ErrCorrupt, err)
	case err != nil:
		return fmt.Errorf("%s: read the schema version: %w", path, err)
	case v < len(ms):
		return fmt.Errorf("%s has schema version %d, older than this sessiond's %d: start sessiond serve on it once (it migrates the schema), then check it", path, v, len(ms))
	case v > len(ms):
		return fmt.Errorf("%s has schema version %d but this sessiond knows only up to %d; check it with a newer sessiond", path, v, len(ms))
	}
	return nil
}

// Online reports whether a server had the directory open when the inspector opened it.
func (in *Inspector) Online() bool { return in.online }

// Close releases the connections and the lock.
func (in *Inspector) Close() error {
	err := in.db.Close()
	if lerr := in.lock.release(); err == nil {
		err = lerr
	}
	return err
}

// InspectDatabase reads the write-ahead log from its file and reports commits SQLite would
// silently ignore (checkWAL), then runs PRAGMA quick_check: the b-trees' structure, page by page (not the
// indexes' agreement with their tables, which integrity_check adds at several times the cost).
func (in *Inspector) InspectDatabase(ctx context.Context) ([]string, error) {
	// The write-ahead log first, as read from its file: what SQLite ignores of it (a frame
	// whose checksum fails, and every commit after it) no query can show (walcheck.go).
	out, err := checkWAL(filepath.Join(in.dir, DBFile) + "-wal")
	if err != nil {
		return nil, err
	}
	rows, err := in.db.QueryContext(ctx, `PRAGMA quick_check`)
	if err != nil {
		return nil, fmt.Errorf("quick_check: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("quick_check: %w", err)
		}
		if s != "ok" {
			out = append(out, s)
		}
	}
	if err := rows.Err(); err != nil {
		return append(out, err.Error()), nil
	}
	return out, nil
}

// InspectSessionIDs implements [store.Inspector].
func (in *Inspector) InspectSessionIDs(ctx context.Context, after string, limit int) ([]string, error) {
	rows, err := in.db.QueryContext(ctx, `SELECT id FROM sessions WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return ids, nil
}

// InspectSession implements [store.Inspector]: one read transaction for all of the session.
func (in *Inspector) InspectSession(ctx context.Context, id string, fn func(*store.RawSession) error) error {
	tx, err := in.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("session %q: begin: %w", id, err)
	}
	defer tx.Rollback()
	var sk int64
	raw := &store.RawSession{ID: id}
	err = tx.QueryRowContext(ctx, `SELECT sk, status, record, snapshot, lineage, active_branch, `+lastSeqExpr+` FROM sessions WHERE id = ?`, id).
		Scan(&sk, &raw.Status, &raw.Record, &raw.Snapshot, &raw.Lineage, &raw.ActiveBranch, &raw.LastSequence)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrSessionNotFound
	}
	if err != nil {
		return fmt.Errorf("session %q: %w", id, err)
	}
	err = tx.QueryRowContext(ctx, `SELECT head_hash, base_hash FROM session_heads WHERE sk = ?`, sk).Scan(&raw.HeadHash, &raw.BaseHash)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("session %q: head: %w", id, err)
	}
	err = tx.QueryRowContext(ctx, `SELECT data FROM session_lifecycle WHERE sk = ?`, sk).Scan(&raw.Lifecycle)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("session %q: lifecycle: %w", id, err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT run_id, ord, status, data FROM runs WHERE sk = ? ORDER BY ord`, sk)
	if err != nil {
		return fmt.Errorf("session %q: runs: %w", id, err)
	}
	for rows.Next() {
		var r store.RawRun
		if err := rows.Scan(&r.RunID, &r.Ord, &r.Status, &r.Data); err != nil {
			rows.Close()
			return fmt.Errorf("session %q: runs: %w", id, err)
		}
		raw.Runs = append(raw.Runs, r)
	}
	if err := closeRows(rows); err != nil {
		return fmt.Errorf("session %q: runs: %w", id, err)
	}
	if rows, err = tx.QueryContext(ctx, `SELECT idem_key, result FROM command_results WHERE sk = ? ORDER BY idem_key`, sk); err != nil {
		return fmt.Errorf("session %q: command results: %w", id, err)
	}
	for rows.Next() {
		var r store.RawCommandResult
		if err := rows.Scan(&r.Key, &r.Result); err != nil {
			rows.Close()
			return fmt.Errorf("session %q: command results: %w", id, err)
		}
		raw.CommandResults = append(raw.CommandResults, r)
	}
	if err := closeRows(rows); err != nil {
		return fmt.Errorf("session %q: command results: %w", id, err)
	}
	if err := inspectUsage(ctx, tx, sk, raw); err != nil {
		return fmt.Errorf("session %q: usage rollup: %w", id, err)
	}
	raw.Events = func(visit func(*store.StoredEvent) error) error {
		rows, err := tx.QueryContext(ctx, inBothTables(`SELECT seq, event_id, idem_key, event_type, run_id, data, hash FROM %[1]s WHERE rid >= (?1 << 32) AND rid < ((?1 + 1) << 32)`), sk)
		if err != nil {
			return fmt.Errorf("session %q: events: %w", id, err)
		}
		defer rows.Close()
		var e store.StoredEvent
		var data, hash sql.RawBytes
		for rows.Next() {
			if err := rows.Scan(&e.Sequence, &e.EventID, &e.IdempotencyKey, &e.EventType, &e.RunID, &data, &hash); err != nil {
				return fmt.Errorf("session %q: events: %w", id, err)
			}
			e.Data, e.Hash = data, hash
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

func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}

// inspectUsage reads session sk's usage rollup rows into raw, when the store has a built
// rollup (migration 0015, usage_state.built).
func inspectUsage(ctx context.Context, tx *sql.Tx, sk int64, raw *store.RawSession) error {
	var built int64
	err := tx.QueryRowContext(ctx, `SELECT coalesce((SELECT built FROM usage_state), 0) WHERE EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'usage_state')`).Scan(&built)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && built == 0) {
		return nil
	}
	if err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, `SELECT day, `+strings.Join(usageDayCols, ", ")+` FROM usage_days WHERE sk = ? ORDER BY day`, sk)
	if err != nil {
		return err
	}
	for rows.Next() {
		var d store.UsageDay
		t := &d.UsageTotals
		if err := rows.Scan(&d.Day, &t.UsageEvents, &t.InputTokens, &t.OutputTokens, &t.TotalTokens, &t.RunsCompleted, &t.RunsFailed, &t.RunsStopped, &t.RunDurationMs, &t.ToolCalls, &t.ToolFailures, &t.ToolDenied); err != nil {
			rows.Close()
			return err
		}
		raw.UsageDays = append(raw.UsageDays, d)
	}
	if err := closeRows(rows); err != nil {
		return err
	}
	if rows, err = tx.QueryContext(ctx, `SELECT day, tool, calls, failures, denied FROM usage_tools WHERE sk = ? ORDER BY day, tool`, sk); err != nil {
		return err
	}
	for rows.Next() {
		var d store.ToolDay
		if err := rows.Scan(&d.Day, &d.Tool, &d.Calls, &d.Failures, &d.Denied); err != nil {
			rows.Close()
			return err
		}
		raw.UsageTools = append(raw.UsageTools, d)
	}
	if err := closeRows(rows); err != nil {
		return err
	}
	raw.UsageRead = true
	return nil
}
