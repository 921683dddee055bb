// Package sqlite is the embedded storage driver of sessiond: one SQLite database file in a data
// directory, opened with the pure Go modernc.org/sqlite, so the binary needs no C toolchain.
//
// Durability: the database runs in WAL mode and every commit is synced to disk before Append
// returns. Throughput comes from group commit and pipelining: a single writer goroutine owns
// the only write connection, takes every append queued meanwhile, runs them in one transaction
// (a SAVEPOINT each, so that a failing append undoes only itself) and commits; a syncer
// goroutine syncs the WAL and answers the group while the writer runs the next one, and reads
// wait for the sync of any commit they could see (durable.go). Reads use a separate pool of
// read-only connections, which WAL lets run alongside the writer. Event ids and idempotency
// keys of a log's open generation are kept in the writer's memory and written, in key order,
// only when the generation is sealed: an append writes its event row and little else
// (generation.go).
//
// One process at a time: Open takes an exclusive lock on dir/LOCK and fails, naming the
// holder's pid, when another process (or another Store in this one) has the directory open.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"modernc.org/sqlite" // also registers the "sqlite" database/sql driver

	"github.com/sessiond/sessiond/store"
)

// DBFile is the name of the database file inside the data directory.
const DBFile = "sessiond.db"

// LockFile is the name of the lock file inside the data directory.
const LockFile = "LOCK"

// Group commit bounds: the writer puts at most this many appends, or this many events, into
// one transaction. Appends queued beyond them wait for the next commit.
const (
	maxGroupRequests = 256
	maxGroupEvents   = 16384
)

// Store is the SQLite driver. It implements store.Store; create it with Open and release it
// with Close. All methods are safe for concurrent use.
type Store struct {
	// noUsage skips the usage rollup's writes (usage.go): set only by the benchmark that
	// measures what the rollup costs an append.
	noUsage bool

	dir  string
	lock *dirLock
	log  *slog.Logger   // Options.Logger
	obs  store.Observer // Options.Observer

	wdb *sql.DB // exactly one connection, owned by the writer goroutine
	rdb *sql.DB // read-only pool
	rd  readStmts
	cdb *sql.DB // the checkpointer's connection

	ckptKick chan struct{} // the writer asks for a checkpoint
	ckptStop chan struct{}
	ckptDone chan struct{}

	reqs       chan *request
	writerDone chan struct{}

	bits     uint           // generation size: 2^bits sequences (generation.go)
	tailRows int            // the tail_rows setting: a move pass starts when the tail holds this many rows (tail.go)
	dur      durability     // the sync pipeline (durable.go)
	syncq    chan committed // the writer's commits, to be synced
	syncDone chan struct{}

	mu       sync.RWMutex // guards closed and the sending side of reqs
	closed   bool
	inflight sync.WaitGroup

	subs       store.Subscribers
	releases   store.Registry[string]  // SubscribeReleases
	changeSubs store.ChangeSubscribers // SubscribeChanges (changes.go)

	sessKeys sync.Map // session id -> sk (int64); sessions are never deleted, sk never changes
	openIdx  sync.Map // sk -> *openIndex: the writer's open generation indexes, for readers, shown once their group commits (publishOpen)
	// session id -> *atomic.Int64: the last sequence of each session appended to since Open,
	// set by the syncer once the commit that ended the log there is durable (LastSequence).
	durableLast sync.Map

	searchMu sync.Mutex   // guards search
	search   *SearchIndex // the search index (search.go), opened by Search

	// full is the failure of the last group the disk was too full for (SQLITE_FULL), until a
	// commit goes through again (readiness.go).
	full atomic.Pointer[error]
}

var _ store.Store = (*Store)(nil)

// Options configure a [Store]. Zero fields take the defaults documented on each field.
type Options struct {
	// Logger receives what the store's background work (the checkpointer, the syncer) cannot
	// return to a caller: a failed checkpoint (retried), a failed sync (the store refuses
	// writes from then on). Default: discard.
	Logger *slog.Logger
	// Observer is told of each group commit and each sync, for metrics (default: nothing).
	Observer store.Observer
}

// Open opens (creating when needed) the store in dir: it creates dir and dir/sessiond.db, takes
// the directory's lock, applies the embedded migrations and starts the writer. It fails when
// another process holds the directory, or when the database was written by a newer sessiond.
// opt, at most one, configures the store (the zero Options when none is given).
func Open(ctx context.Context, dir string, opt ...Options) (*Store, error) {
	if len(opt) > 1 {
		return nil, errors.New("open store: give at most one Options")
	}
	var o Options
	if len(opt) == 1 {
		o = opt[0]
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if dir == "" {
		return nil, errors.New("open store: no data directory given")
	}
	// From here on the directory is absolute: the database's file URI (fileURI) and every
	// message name it the same way whatever the working directory is, now or later.
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open store: data directory %q: %w", dir, err)
	}
	dir = abs
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("open store: create data directory: %w", err)
	}
	// SQLite syncs with fdatasync(2) where the platform has it, as SQLite's own builds on
	// Linux do: it writes the data and the metadata needed to read it back (the size
	// included), so durability is the same as with fsync(2), without the timestamp update.
	// The switch is process-wide; it is ignored where unavailable.
	_, _ = sqlite.Fdatasync(true)
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, lock: lock, log: o.Logger, obs: o.Observer}
	if err := s.open(ctx); err != nil {
		s.closeDBs()
		lock.release()
		return nil, err
	}
	s.reqs = make(chan *request, maxGroupRequests)
	s.writerDone = make(chan struct{})
	s.syncq = make(chan committed, 4)
	s.syncDone = make(chan struct{})
	w, err := newWriter(ctx, s)
	if err != nil {
		s.closeDBs()
		lock.release()
		return nil, err
	}
	s.ckptKick = make(chan struct{}, 1)
	s.ckptStop = make(chan struct{})
	s.ckptDone = make(chan struct{})
	go w.run()
	go s.syncer()
	go s.checkpointer()
	if err := s.buildUsageOnce(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Connection roles: each gets the pragmas it needs.
const (
	roleWriter = iota
	roleReader
	roleCheckpointer
)

// dsn is the data source name of the database file at path for a connection of the role: its
// file URI with the role's pragmas as query parameters.
func dsn(path string, role int) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(0)")
	switch role {
	case roleReader:
		q.Add("_pragma", "query_only(1)")
		q.Add("_pragma", "cache_size(-16384)") // 16 MiB per reader
		// Readers map the database file (up to 1 GiB): a page already checkpointed is read
		// from the mapping, without a pread(2) and a copy into the reader's cache (long log
		// reads; see docs/benchmarks.md). Pages still in the WAL are read as before.
		q.Add("_pragma", "mmap_size(1073741824)")
	case roleWriter:
		// Pages are SQLite's default 4 KiB. (The driver runs _pragma values sorted by name,
		// so a page_size here would come after journal_mode has fixed the size already.)
		// Measured with 1 and 2 KiB pages: log reads and most appends were slower (reads
		// 234k vs 505k events/s with 1 KiB); see docs/benchmarks.md.
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)") // commits are synced by the syncer (durable.go)
		// 16 MiB, as a reader's. Every page the cache takes on its way to full is fresh memory,
		// touched for the first time (a page fault each, on the writer's goroutine): with
		// 64 MiB the first 64 MB of pages written after Open cost the writer that much more,
		// and no workload measured ran faster for the larger cache, a 1,000,000-event
		// session's appends included (docs/benchmarks.md, "The writer's page cache").
		q.Add("_pragma", "cache_size(-16384)")
		q.Add("_pragma", "wal_autocheckpoint(0)") // the checkpointer does it, off the commit path
		q.Add("_pragma", "temp_store(MEMORY)")    // savepoint sub-journals stay in memory
		q.Add("_pragma", "journal_size_limit(67108864)")
	case roleCheckpointer:
		q.Add("_pragma", "synchronous(FULL)")
		q.Add("_pragma", "cache_size(-2048)")
	}
	return fileURI(path) + "?" + q.Encode()
}

// fileURI is the SQLite URI (https://sqlite.org/uri.html) of the file at path, without a query.
// An absolute path becomes file:///abs/path (on Windows file:///C:/path), a relative one
// file:rel/path, which SQLite resolves against the working directory; never file://rel/path,
// where SQLite would take the first directory for the URI's authority. Characters that SQLite
// would read as the start of the query or the fragment, or as an escape ('?', '#', '%'),
// and spaces are %-escaped.
func fileURI(path string) string {
	p := filepath.ToSlash(path)
	abs := filepath.IsAbs(path)
	if abs && !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive letter: file:///C:/dir
	}
	u := url.URL{Scheme: "file", Path: p, OmitHost: !abs}
	return u.String()
}

func (s *Store) open(ctx context.Context) error {
	path := filepath.Join(s.dir, DBFile)
	var err error
	if s.wdb, err = sql.Open("sqlite", dsn(path, roleWriter)); err != nil {
		return fmt.Errorf("open store %s: %w", path, err)
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxLifetime(0)
	s.wdb.SetConnMaxIdleTime(0)
	var mode string
	if err := s.wdb.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("open store %s: %w", path, err)
	}
	if mode != "wal" {
		return fmt.Errorf("open store %s: journal mode is %q, want wal (is the directory on a file system without shared memory?)", path, mode)
	}
	if err := migrate(ctx, s.wdb); err != nil {
		return fmt.Errorf("open store %s: %w", path, err)
	}
	// Sync both files before anything is read: the migrations committed without a sync, and
	// the WAL may hold commits of a process that died before syncing them (never acknowledged,
	// but readers must not see them before they are durable). Two syncs per Open.
	s.dur.init(path)
	if err := syncFile(path); err != nil {
		return fmt.Errorf("open store %s: sync database: %w", path, err)
	}
	if err := s.dur.syncWAL(); err != nil {
		return fmt.Errorf("open store %s: %w", path, err)
	}
	if s.rdb, err = sql.Open("sqlite", dsn(path, roleReader)); err != nil {
		return fmt.Errorf("open store %s: %w", path, err)
	}
	n := 2 * runtime.GOMAXPROCS(0)
	if n < 4 {
		n = 4
	}
	s.rdb.SetMaxOpenConns(n)
	s.rdb.SetMaxIdleConns(n)
	s.rdb.SetConnMaxIdleTime(0)
	s.rdb.SetConnMaxLifetime(0)
	if s.bits, err = readGenerationBits(ctx, s.wdb); err != nil {
		return fmt.Errorf("open store %s: %w", path, err)
	}
	if s.tailRows, err = readTailRows(ctx, s.wdb); err != nil {
		return fmt.Errorf("open store %s: %w", path, err)
	}
	if err := s.rd.prepare(ctx, s.rdb); err != nil {
		return fmt.Errorf("open store %s: %w", path, err)
	}
	if s.cdb, err = sql.Open("sqlite", dsn(path, roleCheckpointer)); err != nil {
		return fmt.Errorf("open store %s: %w", path, err)
	}
	s.cdb.SetMaxOpenConns(1)
	return nil
}

func (s *Store) closeDBs() error {
	var errs []error
	s.rd.close()
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	if s.cdb != nil {
		errs = append(errs, s.cdb.Close())
	}
	if s.wdb != nil {
		errs = append(errs, s.wdb.Close())
	}
	return errors.Join(errs...)
}

// Capabilities reports the driver "sqlite": commits carry their events, and the store belongs to
// one process.
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{Driver: "sqlite", CommitCarriesEvents: true}
}

// Subscribe registers fn to be called after every commit that added events, once the commit is
// synced, once per append, in commit order, before the append's caller is answered. fn runs on
// the syncer goroutine: it must not block and must not call the store's methods. The returned
// func unregisters fn; it is safe to call twice.
func (s *Store) Subscribe(fn func(store.Commit)) (cancel func()) { return s.subs.Add(fn) }

// SubscribeReleases registers fn for the lease releases of this store, as documented on
// store.Store.
func (s *Store) SubscribeReleases(fn func(string)) (cancel func()) { return s.releases.Add(fn) }

// Close stops accepting work, waits for appends already submitted to be committed and
// answered, stops the writer, closes the database and releases the directory lock. Calls after
// the first return nil.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.inflight.Wait()
	close(s.reqs)
	<-s.writerDone
	<-s.syncDone
	close(s.ckptStop)
	<-s.ckptDone
	s.searchMu.Lock()
	if s.search != nil {
		s.search.Close()
		s.search = nil
	}
	s.searchMu.Unlock()
	err := s.closeDBs()
	s.dur.close()
	if lerr := s.lock.release(); lerr != nil && err == nil {
		err = lerr
	}
	if err != nil {
		return fmt.Errorf("close store %s: %w", s.dir, err)
	}
	return nil
}

// enter registers an operation in flight; it fails with store.ErrClosed after Close.
func (s *Store) enter() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usable(); err != nil {
		return err
	}
	s.inflight.Add(1)
	return nil
}

// usable returns store.ErrClosed after Close, and the sync failure that makes the store refuse
// everything until it is reopened (durable.go); the caller holds s.mu.
func (s *Store) usable() error {
	if s.closed {
		return store.ErrClosed
	}
	if err := s.dur.err(); err != nil {
		return unusable(err)
	}
	return nil
}

// FileSizes returns the size in bytes of the database file and of its write-ahead log, for
// metrics (store.FileSizer); 0 for a file that does not exist.
func (s *Store) FileSizes() (data, wal int64) {
	size := func(path string) int64 {
		fi, err := os.Stat(path)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	db := filepath.Join(s.dir, DBFile)
	return size(db), size(db + "-wal")
}

// Ready returns nil when the store can take writes: ErrClosed after Close, the sync failure
// that makes it refuse every write until it is reopened (durable.go), and, after a write the
// disk was too full for, the answer of a probe write (readiness.go: store.Full until space is
// freed). Otherwise it does no I/O.
func (s *Store) Ready(ctx context.Context) error {
	s.mu.RLock()
	err := s.usable()
	s.mu.RUnlock()
	if err != nil {
		return err
	}
	if s.full.Load() != nil {
		return s.probeWrite(ctx)
	}
	return ctx.Err()
}

// rowQuerier is a database, a connection or a transaction.
type rowQuerier interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

// readSetting reads the setting name, an integer from lo to hi.
func readSetting(ctx context.Context, q rowQuerier, name string, lo, hi int64) (int64, error) {
	var v int64
	if err := q.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = ?`, name).Scan(&v); err != nil {
		return 0, fmt.Errorf("read %s setting: %w", name, err)
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("%s setting is %d, want %d to %d", name, v, lo, hi)
	}
	return v, nil
}
