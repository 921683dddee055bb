package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sessiond/sessiond/store"
)

// DefaultMaxConns is the size of the connection pool when the URL does not set pool_max_conns.
// Each Store also keeps one more connection for its listener.
const DefaultMaxConns = 16

// channelBase is the LISTEN/NOTIFY channel of the schema "public"; other schemas append
// ":<schema>" (see channelFor), because NOTIFY channels are per database, not per schema.
const channelBase = "sessiond_commits"

// maxNotifyPayload is PostgreSQL's limit on a NOTIFY payload (8000 bytes, less one).
const maxNotifyPayload = 7999

// Store is the PostgreSQL driver. It implements store.Store; create it with Open and release it
// with Close. All methods are safe for concurrent use, and any number of Stores, in any number
// of processes, may share one database schema.
type Store struct {
	log      *slog.Logger // Options.Logger
	pool     *pgxpool.Pool
	hosts    *hosts  // the URL's servers: their state, sockets and order (hosts.go)
	probe    *prober // probes every server of the URL (hosts.go)
	schema   string
	channel  string
	lis      *listener
	notifier *notifier
	group    *grouper // commits concurrent one-statement appends together (group.go)

	mu       sync.RWMutex // guards closed
	closed   bool
	inflight sync.WaitGroup

	subs store.Subscribers
	// releases are the SubscribeReleases callbacks: called for this store's releases at
	// their commit, and for every instance's as the listener hears of them.
	releases store.Registry[string]

	// The change feed (changes.go): its NOTIFY channel, subscribers and the last sequence
	// they were told of.
	changeChannel    string
	changeSubs       store.ChangeSubscribers
	changesDelivered atomic.Int64
	num              *numberer

	// deliverMu serialises calls of the subscribers and guards delivered.
	deliverMu sync.Mutex
	delivered deliveredSet

	sessKeys sync.Map // session id -> sk (int64); sessions are never deleted, sk never changes
	// heads is where this store's appends last left each session's log (heads.go).
	heads headCache

	searchMu sync.Mutex   // guards search
	search   *SearchIndex // the search index (search.go), made by Search
}

var _ store.Store = (*Store)(nil)

// Options configure a [Store]. Zero fields take the defaults documented on each field.
type Options struct {
	// Logger receives what the store's background work cannot return to a caller: the commit
	// listener losing its connection and reconnecting. Default: discard.
	Logger *slog.Logger
}

// Open connects to the PostgreSQL database at url (postgres://user:pass@host:port/db?...),
// applies the embedded migrations to the connection's current schema (the first schema of its
// search_path, which must exist; set it with search_path=... in the URL) and starts the
// listener that reports other instances' commits to Subscribe. It returns once the listener is
// listening, so every commit after Open returns is reported.
//
// URL parameters understood besides libpq's: pool_max_conns (default DefaultMaxConns) and the
// other pgxpool settings; any run-time parameter such as search_path or synchronous_commit. When
// the URL does not set synchronous_commit and the server's default is "off", the store sets it
// to "on" for its connections: an append is durable before it is acknowledged. When the URL
// does not set them, connect_timeout is DefaultConnectTimeout, statement_timeout
// DefaultStatementTimeout, lock_timeout DefaultLockTimeout, idle_in_transaction_session_timeout
// DefaultIdleInTransactionTimeout and pool_ping_timeout 2 s: a server
// that hangs must not hold the store's connections (see hosts.go for the probe that leaves it
// behind, and the order in which a URL's several servers are tried). Open logs a warning when
// the URL names several servers and the primary's synchronous_commit and
// synchronous_standby_names cannot promise that an acknowledged event survives its loss.
//
// opt, at most one, configures the store (the zero Options when none is given).
func Open(ctx context.Context, url string, opt ...Options) (*Store, error) {
	if len(opt) > 1 {
		return nil, errors.New("open postgres store: give at most one Options")
	}
	var o Options
	if len(opt) == 1 {
		o = opt[0]
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: parse the database URL: %w", err)
	}
	rp := cfg.ConnConfig.RuntimeParams
	if rp["application_name"] == "" {
		rp["application_name"] = "sessiond"
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	where := fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	if cfg.ConnConfig.ConnectTimeout == 0 && !strings.Contains(url, "connect_timeout") {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	if !strings.Contains(url, "pool_ping_timeout") {
		cfg.PingTimeout = pingTimeout
	}
	hs := newHosts(&cfg.ConnConfig.Config, o.Logger) // tracked sockets, keepalive (hosts.go)
	cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		hs.order(&cc.Config) // the primary first, failed servers last
		return nil
	}
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		hs.connected(c.PgConn())
		return nil
	}

	// A first connection checks the settings and applies the migrations.
	first := cfg.ConnConfig.Copy()
	hs.order(&first.Config)
	conn, err := pgx.ConnectConfig(ctx, first)
	if err != nil {
		return nil, fmt.Errorf("open postgres store %s: connect: %w", where, classify(err))
	}
	defer conn.Close(context.Background())
	hs.connected(conn.PgConn())
	var schema *string
	var syncCommit, searchPath, standbyNames string
	if err := conn.QueryRow(ctx, `SELECT current_schema(), current_setting('synchronous_commit'), current_setting('search_path'), current_setting('synchronous_standby_names')`).Scan(&schema, &syncCommit, &searchPath, &standbyNames); err != nil {
		return nil, fmt.Errorf("open postgres store %s: read settings: %w", where, err)
	}
	if schema == nil {
		return nil, fmt.Errorf("open postgres store %s: no schema of the search_path %q exists; create it (CREATE SCHEMA ...) or fix search_path in the URL",
			where, searchPath)
	}
	if syncCommit == "off" && !strings.Contains(url, "synchronous_commit") {
		rp["synchronous_commit"] = "on"
	}
	if v := rp["synchronous_commit"]; v != "" {
		syncCommit = v
	}
	if err := migrate(ctx, conn); err != nil {
		return nil, fmt.Errorf("open postgres store %s schema %q: %w", where, *schema, err)
	}
	// After the migrations, which may wait for another instance's longer than these allow.
	if rp["statement_timeout"] == "" {
		rp["statement_timeout"] = DefaultStatementTimeout
	}
	if rp["lock_timeout"] == "" {
		rp["lock_timeout"] = DefaultLockTimeout
	}
	if rp["idle_in_transaction_session_timeout"] == "" {
		rp["idle_in_transaction_session_timeout"] = DefaultIdleInTransactionTimeout
	}
	// What an acknowledgement means under replication: a warning when it may not survive the
	// primary's loss, said at debug level otherwise (a healthy store logs nothing).
	ack := acknowledgement(syncCommit, standbyNames, len(hs.keys))
	o.Logger.Log(ctx, ack.level, "postgres store: "+ack.text, "synchronous_commit", syncCommit,
		"synchronous_standby_names", standbyNames, "hosts", len(hs.keys))
	o.Logger.Debug("postgres store: deadlines", "connect_timeout", cfg.ConnConfig.ConnectTimeout,
		"statement_timeout", rp["statement_timeout"], "lock_timeout", rp["lock_timeout"],
		"idle_in_transaction_session_timeout", rp["idle_in_transaction_session_timeout"],
		"probeEvery", probeEvery, "probeTimeout", probeTimeout, "groupTimeout", groupTimeout)

	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres store %s: create the connection pool: %w", where, err)
	}
	s := &Store{log: o.Logger, pool: pool, hosts: hs, schema: *schema, channel: channelFor(*schema), changeChannel: changeChannelFor(*schema), num: newNumberer()}
	lcfg := cfg.ConnConfig.Copy()
	lcfg.RuntimeParams["application_name"] = rp["application_name"] + "-listener"
	s.lis = newListener(s, lcfg)
	if err := s.lis.start(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store %s: start the commit listener: %w", where, err)
	}
	s.probe = startProber(hs, cfg.ConnConfig)
	s.notifier = newNotifier(s)
	s.group = &grouper{s: s, maxLeaders: max(1, int(cfg.MaxConns)/4)}
	s.startNumberer()
	s.kickChanges() // changes an instance left unnumbered
	if err := s.buildUsageOnce(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open postgres store %s: build the usage rollup: %w", where, err)
	}
	return s, nil
}

// channelFor returns the NOTIFY channel of a schema: channelBase for "public", otherwise
// channelBase + ":" + schema, or a hash of the schema when that would be longer than
// PostgreSQL's 63-byte identifiers.
func channelFor(schema string) string {
	if schema == "public" {
		return channelBase
	}
	ch := channelBase + ":" + schema
	if len(ch) > 63 {
		sum := sha256.Sum256([]byte(schema))
		ch = channelBase + ":" + hex.EncodeToString(sum[:16])
	}
	return ch
}

// Capabilities reports the driver "postgres": shared across processes, and commits do not carry
// their events. Commits made through this Store and commits made by other instances reach the
// subscribers through the same ordered, deduplicated path (see the package documentation);
// carrying events for local commits only would mix two kinds of Commit in one session's order,
// and the events of a remote commit would have to be read back anyway.
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{Driver: "postgres", SharedAcrossProcesses: true, CommitCarriesEvents: false}
}

// Subscribe registers fn to be called after commits that added events to any session, made
// through this Store or any other instance on the same schema. Per session, the LastSequence
// values fn sees strictly increase: commits may be coalesced (a Commit for N stands for every
// commit up to N), never reordered. A commit made through this Store is reported before its
// Append returns; one made elsewhere within milliseconds, or after the listener reconnects
// when its connection was lost. fn must not block and must not call Subscribe or the cancel
// func; calls of fn never overlap. The returned func unregisters fn; it is safe to call twice.
func (s *Store) Subscribe(fn func(store.Commit)) (cancel func()) { return s.subs.Add(fn) }

// SubscribeReleases registers fn for the lease releases of every instance on the schema, as
// documented on store.Store: this store's are reported at their commit, the others' through
// the NOTIFY the releasing instance sends after it (notify.go). A release whose notification is
// lost is not reported to the other instances: a claim waiting there answers at the end of its
// wait, and the worker claims again.
func (s *Store) SubscribeReleases(fn func(string)) (cancel func()) { return s.releases.Add(fn) }

// deliverRelease reports a lease release of session id to the SubscribeReleases callbacks.
func (s *Store) deliverRelease(id string) {
	for _, fn := range s.releases.List() {
		fn(id)
	}
}

// deliver reports that session id's log reaches last to every subscriber, unless a commit at or
// beyond last was already reported: whichever of the appending goroutine and the listener comes
// first reports a commit, and a late, lower one is dropped, so each subscriber sees strictly
// increasing sequences per session.
func (s *Store) deliver(id string, last int64) {
	s.deliverMu.Lock()
	defer s.deliverMu.Unlock()
	if !s.delivered.advance(id, last, time.Now()) {
		return
	}
	c := store.Commit{SessionID: id, LastSequence: last}
	for _, fn := range s.subs.List() {
		fn(c)
	}
}

// deliveredSet remembers the last sequence reported per session, for the sessions that had a
// commit in the last one to two rotation periods: two generations of maps, the older dropped at
// each rotation, so memory follows recent activity rather than the number of sessions. A lower
// commit can only arrive a few milliseconds after a higher one (a racing local append, or the
// listener's catch-up query), far within a period.
type deliveredSet struct {
	cur, old  map[string]int64
	rotatedAt time.Time
}

const deliveredRotation = time.Minute

// advance records last for id and reports whether it is beyond what was recorded.
func (d *deliveredSet) advance(id string, last int64, now time.Time) bool {
	if d.cur == nil {
		d.cur, d.rotatedAt = map[string]int64{}, now
	}
	if now.Sub(d.rotatedAt) > deliveredRotation {
		d.old, d.cur, d.rotatedAt = d.cur, make(map[string]int64, len(d.cur)), now
	}
	prev, ok := d.cur[id]
	if !ok {
		prev, ok = d.old[id]
	}
	if ok && prev >= last {
		return false
	}
	d.cur[id] = last
	return true
}

// Close stops accepting work, waits for the operations in flight, sends the notifications of
// the last commits, stops the listener and closes the connection pool. Calls after the first return nil.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.inflight.Wait()
	s.stopNumberer()
	s.notifier.stop()
	s.lis.stop()
	// The pool before the prober: closing a connection to a hung server sends a cancel request
	// there, which waits until the prober closes its socket too.
	s.pool.Close()
	s.probe.stop()
	return nil
}

// enter registers an operation in flight; it fails with store.ErrClosed after Close.
func (s *Store) enter() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.ErrClosed
	}
	s.inflight.Add(1)
	return nil
}

// PoolState returns the connection pool's and the commit listener's state, for metrics
// (store.PoolReporter).
func (s *Store) PoolState() store.PoolState {
	st := s.pool.Stat()
	return store.PoolState{
		AcquiredConns:      st.AcquiredConns(),
		IdleConns:          st.IdleConns(),
		TotalConns:         st.TotalConns(),
		MaxConns:           st.MaxConns(),
		EmptyAcquires:      st.EmptyAcquireCount(),
		ListenerUp:         s.lis.up.Load(),
		ListenerReconnects: s.lis.reconnects.Load(),
	}
}

// Ready returns nil when the store can take writes: ErrClosed after Close, else the error of a
// round trip to the database server (a ping on a pooled connection), bounded by ctx.
func (s *Store) Ready(ctx context.Context) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.inflight.Done()
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres store: the database does not answer: %w", classify(err))
	}
	return nil
}
