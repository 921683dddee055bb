package postgres

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Failover: the deadlines that find a server that does not answer, and the choice of which of
// the URL's servers a new connection tries first.
//
// A PostgreSQL server that is frozen (SIGSTOP, a hung host, a partition that still lets its
// kernel answer) completes TCP handshakes and acknowledges keepalives: only a deadline in the
// application finds it. The store therefore keeps a probe per server of the URL (a connection
// of its own that asks pg_is_in_recovery() every probeEvery and waits at most probeTimeout for
// the answer). A server whose probe gets no answer in time is unresponsive: every socket the
// store holds to it is closed at once, so that the statements waiting on it fail now (and are
// tried again, idempotently, on another connection) instead of at their own deadline, and new
// connections try it last. A server that answers as a primary is the one new connections try
// first (and so is the server a new read-write connection reached): pgx tries the URL's hosts
// in order, and with the first one frozen every new connection would otherwise wait out its
// connect timeout there first.
const (
	// DefaultConnectTimeout bounds each connection attempt to one server (libpq's
	// connect_timeout) when the URL does not set connect_timeout.
	DefaultConnectTimeout = 3 * time.Second
	// DefaultStatementTimeout is the server's statement_timeout for the store's connections when
	// the URL does not set statement_timeout: a statement running longer is cancelled by the
	// server (and the request answered STORE_UNAVAILABLE).
	DefaultStatementTimeout = "60s"
	// DefaultLockTimeout is the server's lock_timeout for the store's connections when the URL
	// does not set lock_timeout: a statement waiting longer for a lock (a session's row held by
	// an instance that froze inside its transaction) is cancelled.
	DefaultLockTimeout = "10s"
	// DefaultIdleInTransactionTimeout is the server's idle_in_transaction_session_timeout for
	// the store's connections when the URL does not set it: the server ends a session that sits
	// inside a transaction for longer (an instance that froze between the round trips of an
	// append), releasing the session's row it locked.
	DefaultIdleInTransactionTimeout = "60s"

	// probeEvery is how often each server of the URL is probed.
	probeEvery = time.Second
	// probeTimeout is how long a probe waits for its answer before the server is declared
	// unresponsive.
	probeTimeout = 2 * time.Second
	// pingTimeout bounds the ping the pool sends on a connection idle for more than a second
	// before handing it out.
	pingTimeout = 2 * time.Second
	// groupTimeout bounds a group of appends (group.go): BEGIN, up to maxGroup one-statement
	// appends that never wait for a lock, COMMIT. A group that takes longer gives its
	// connection up; its appends are tried again with their idempotency keys.
	groupTimeout = 10 * time.Second

	// TCP keepalive and TCP_USER_TIMEOUT on every connection: a server whose host is gone (not
	// frozen: then its kernel answers) is found within about keepAliveIdle + keepAliveCount ×
	// keepAliveInterval when the connection is idle, and within tcpUserTimeout when data sent
	// to it is not acknowledged.
	keepAliveIdle     = 5 * time.Second
	keepAliveInterval = 2 * time.Second
	keepAliveCount    = 3
	tcpUserTimeout    = 10 * time.Second
)

// hostState is what the store knows of one server of the URL.
type hostState int

const (
	hostUnknown      hostState = iota // not probed yet, or the probe could not tell
	hostPrimary                       // answers, and takes writes
	hostStandby                       // answers, read-only (in recovery)
	hostDown                          // refuses connections or closed them
	hostUnresponsive                  // does not answer within the probe's deadline
)

func (s hostState) String() string {
	switch s {
	case hostPrimary:
		return "primary"
	case hostStandby:
		return "standby"
	case hostDown:
		return "down"
	case hostUnresponsive:
		return "unresponsive"
	}
	return "unknown"
}

// rank orders the servers for a new connection: the primary first, servers that failed last.
func (s hostState) rank() int {
	switch s {
	case hostPrimary:
		return 0
	case hostDown, hostUnresponsive:
		return 2
	}
	return 1
}

// HostState is one server of the store's URL as the store sees it now (Store.Hosts).
type HostState struct {
	Host  string    // host:port, or the socket's path, as the URL names it
	State string    // primary, standby, down, unresponsive or unknown
	Since time.Time // when it entered this state
}

// hosts tracks the servers of the URL: their state, the sockets open to each, and the order in
// which a new connection tries them.
type hosts struct {
	log     *slog.Logger
	keys    []string // the servers, in the URL's order
	dialer  *net.Dialer
	resolve pgconn.LookupFunc

	mu     sync.Mutex
	state  map[string]hostState
	since  map[string]time.Time
	ipName map[string]string                    // resolved address -> the host name that resolved to it
	conns  map[string]map[*trackedConn]struct{} // server -> sockets open to it
}

// newHosts tracks the servers of cfg and installs its dialer and resolver in cfg: every socket
// the store opens from cfg or a copy of it is tracked.
func newHosts(cfg *pgconn.Config, log *slog.Logger) *hosts {
	h := &hosts{log: log, resolve: cfg.LookupFunc, state: map[string]hostState{}, since: map[string]time.Time{},
		ipName: map[string]string{}, conns: map[string]map[*trackedConn]struct{}{}}
	for _, e := range entries(cfg) {
		if k := entryKey(e); !slices.Contains(h.keys, k) {
			h.keys = append(h.keys, k)
			h.since[k] = time.Now()
		}
	}
	h.dialer = &net.Dialer{
		Timeout:         cfg.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount},
		Control:         setUserTimeout,
	}
	cfg.DialFunc = h.dial
	cfg.LookupFunc = h.lookup
	return h
}

// entries returns cfg's servers as pgx tries them: its Host and Port, then its Fallbacks.
func entries(cfg *pgconn.Config) []*pgconn.FallbackConfig {
	return append([]*pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port, TLSConfig: cfg.TLSConfig}}, cfg.Fallbacks...)
}

// entryKey names a server: host:port, or a Unix socket's path.
func entryKey(e *pgconn.FallbackConfig) string {
	if strings.HasPrefix(e.Host, "/") {
		_, addr := pgconn.NetworkAddress(e.Host, e.Port)
		return addr
	}
	return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
}

// order puts cfg's servers in the order a new connection should try them: the primary first,
// servers that failed last, the URL's order otherwise (a server's TLS and plain attempts stay
// together, in their order).
func (h *hosts) order(cfg *pgconn.Config) {
	es := entries(cfg)
	h.mu.Lock()
	slices.SortStableFunc(es, func(a, b *pgconn.FallbackConfig) int {
		return h.state[entryKey(a)].rank() - h.state[entryKey(b)].rank()
	})
	h.mu.Unlock()
	cfg.Host, cfg.Port, cfg.TLSConfig = es[0].Host, es[0].Port, es[0].TLSConfig
	cfg.Fallbacks = es[1:]
}

// lookup resolves a host name as cfg's resolver did, and remembers which name each address
// came from, to name the server a socket goes to.
func (h *hosts) lookup(ctx context.Context, host string) ([]string, error) {
	addrs, err := h.resolve(ctx, host)
	h.mu.Lock()
	for _, a := range addrs {
		ip := a
		if hh, _, err := net.SplitHostPort(a); err == nil {
			ip = hh
		}
		h.ipName[ip] = host
	}
	h.mu.Unlock()
	return addrs, err
}

// keyOf names the server of a dialled address.
func (h *hosts) keyOf(network, addr string) string {
	if network == "unix" {
		return addr
	}
	ip, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if name, ok := h.ipName[ip]; ok {
		return net.JoinHostPort(name, port)
	}
	return addr
}

// dial opens a tracked socket (with keepalive and TCP_USER_TIMEOUT). A refused connection marks
// the server down.
func (h *hosts) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	key := h.keyOf(network, addr)
	c, err := h.dialer.DialContext(ctx, network, addr)
	if err != nil {
		if ctx.Err() == nil {
			h.set(key, failedState(err), err)
		}
		return nil, err
	}
	tc := &trackedConn{Conn: c, h: h, key: key}
	h.mu.Lock()
	if h.conns[key] == nil {
		h.conns[key] = map[*trackedConn]struct{}{}
	}
	h.conns[key][tc] = struct{}{}
	h.mu.Unlock()
	return tc, nil
}

// connected records what a new pooled connection says of its server: PostgreSQL (14 and
// later) reports in_hot_standby with every new connection, "off" on a primary.
func (h *hosts) connected(c *pgconn.PgConn) {
	tc := trackedOf(c.Conn())
	if tc == nil {
		return
	}
	switch c.ParameterStatus("in_hot_standby") {
	case "off":
		h.set(tc.key, hostPrimary, nil)
	case "on":
		h.set(tc.key, hostStandby, nil)
	}
}

// trackedOf returns the tracked socket under c (a TLS connection's too), nil when there is none.
func trackedOf(c net.Conn) *trackedConn {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	tc, _ := c.(*trackedConn)
	return tc
}

// set records the state of server key, logging a change. When a server becomes the primary, a
// server that was the primary before is no longer assumed to be one.
func (h *hosts) set(key string, st hostState, err error) {
	h.mu.Lock()
	prev := h.state[key]
	if prev == st {
		h.mu.Unlock()
		return
	}
	h.state[key] = st
	h.since[key] = time.Now()
	if st == hostPrimary {
		for k, s := range h.state {
			if k != key && s == hostPrimary {
				h.state[k], h.since[k] = hostUnknown, time.Now()
			}
		}
	}
	h.mu.Unlock()
	switch {
	case st == hostDown || st == hostUnresponsive:
		h.log.Warn("postgres store: a database server failed; new connections try it last", "host", key, "state", st.String(), "was", prev.String(), "err", err)
	case prev == hostUnknown: // first heard of, or back after an error answer: nothing to tell
		h.log.Debug("postgres store: database server state", "host", key, "state", st.String())
	case st == hostPrimary:
		h.log.Info("postgres store: new connections go first to the new primary", "host", key, "was", prev.String())
	default:
		h.log.Info("postgres store: database server state", "host", key, "state", st.String(), "was", prev.String())
	}
}

// closeSockets closes every socket open to server key: what waits on them fails at once.
func (h *hosts) closeSockets(key string) int {
	h.mu.Lock()
	var cs []*trackedConn
	for c := range h.conns[key] {
		cs = append(cs, c)
	}
	h.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
	return len(cs)
}

// snapshot returns every server's state, in the URL's order.
func (h *hosts) snapshot() []HostState {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]HostState, 0, len(h.keys))
	for _, k := range h.keys {
		out = append(out, HostState{Host: k, State: h.state[k].String(), Since: h.since[k]})
	}
	return out
}

// Hosts returns the state of every server of the store's URL, in the URL's order: what its
// probe found (primary, standby, down, unresponsive; unknown before the first answer).
func (s *Store) Hosts() []HostState { return s.hosts.snapshot() }

// trackedConn is a socket to a server, known to hosts until it is closed.
type trackedConn struct {
	net.Conn
	h    *hosts
	key  string
	once sync.Once
}

// Close closes the socket and forgets it.
func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.h.mu.Lock()
		delete(c.h.conns[c.key], c)
		c.h.mu.Unlock()
	})
	return c.Conn.Close()
}

// prober probes every server of the URL until stop.
type prober struct {
	h      *hosts
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startProber probes each server of cfg (a connection of its own per server, to any server,
// primary or standby, named application_name + "-probe").
func startProber(h *hosts, cfg *pgx.ConnConfig) *prober {
	ctx, cancel := context.WithCancel(context.Background())
	p := &prober{h: h, cancel: cancel}
	for _, key := range h.keys {
		pc := cfg.Config.Copy()
		var es []*pgconn.FallbackConfig
		for _, e := range entries(pc) {
			if entryKey(e) == key {
				es = append(es, e)
			}
		}
		pc.Host, pc.Port, pc.TLSConfig, pc.Fallbacks = es[0].Host, es[0].Port, es[0].TLSConfig, es[1:]
		pc.ValidateConnect, pc.AfterConnect = nil, nil
		pc.RuntimeParams["application_name"] += "-probe"
		p.wg.Add(1)
		go p.run(ctx, key, pc)
	}
	return p
}

func (p *prober) stop() {
	p.cancel()
	p.wg.Wait()
}

// run probes server key every probeEvery.
func (p *prober) run(ctx context.Context, key string, cfg *pgconn.Config) {
	defer p.wg.Done()
	var conn *pgconn.PgConn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		st, err := p.probe(ctx, &conn, cfg)
		if ctx.Err() != nil {
			return
		}
		if st != hostUnknown {
			p.h.set(key, st, err)
		}
		if st == hostUnresponsive || st == hostDown {
			if n := p.h.closeSockets(key); n > 0 {
				p.h.log.Warn("postgres store: closed the connections to a failed database server; their statements are tried again elsewhere", "host", key, "connections", n)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// probe asks the server whether it is in recovery, connecting first when *conn is nil, and
// returns what it learnt; a failed connection is closed and *conn set to nil.
func (p *prober) probe(ctx context.Context, conn **pgconn.PgConn, cfg *pgconn.Config) (hostState, error) {
	if *conn == nil {
		cctx := ctx // each attempt bounded by the connect timeout, or by the probe's when none
		if cfg.ConnectTimeout == 0 {
			var cancel context.CancelFunc
			cctx, cancel = context.WithTimeout(ctx, probeTimeout)
			defer cancel()
		}
		c, err := pgconn.ConnectConfig(cctx, cfg)
		if err != nil {
			return failedState(err), fmt.Errorf("probe: connect: %w", err)
		}
		*conn = c
	}
	qctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	res, err := (*conn).Exec(qctx, "SELECT pg_is_in_recovery()").ReadAll()
	if err == nil && (len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 1) {
		err = errors.New("pg_is_in_recovery() answered no value")
	}
	if err != nil {
		(*conn).Close(context.Background())
		*conn = nil
		return failedState(err), fmt.Errorf("probe: %w", err)
	}
	if string(res[0].Rows[0][0]) == "t" {
		return hostStandby, nil
	}
	return hostPrimary, nil
}

// failedState is the state a failed probe tells: unresponsive after a deadline, down when the
// connection was refused or lost, unknown when the server answered with an error (it is up:
// starting, shutting down, out of connections...).
func failedState(err error) hostState {
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		return hostUnknown
	case errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err):
		return hostUnresponsive
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return hostUnresponsive
	}
	return hostDown
}
