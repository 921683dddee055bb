package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
	"github.com/sessiond/sessiond/store/storetest"
)

// TestHostOrder: a new connection tries the primary first and failed servers last, the URL's
// order otherwise, keeping a server's TLS and plain attempts together.
func TestHostOrder(t *testing.T) {
	cfg, err := pgconn.ParseConfig("postgres://u@h1:5432,h2:5433,h3:5434/db?sslmode=prefer")
	if err != nil {
		t.Fatal(err)
	}
	h := newHosts(cfg, slog.New(slog.DiscardHandler))
	order := func() string {
		c := cfg.Copy()
		h.order(c)
		var s []string
		for _, e := range entries(c) {
			tls := "plain"
			if e.TLSConfig != nil {
				tls = "tls"
			}
			s = append(s, entryKey(e)+"/"+tls)
		}
		return strings.Join(s, " ")
	}
	for _, c := range []struct {
		set  map[string]hostState
		want string
	}{
		{nil, "h1:5432/tls h1:5432/plain h2:5433/tls h2:5433/plain h3:5434/tls h3:5434/plain"},
		{map[string]hostState{"h2:5433": hostPrimary}, "h2:5433/tls h2:5433/plain h1:5432/tls h1:5432/plain h3:5434/tls h3:5434/plain"},
		{map[string]hostState{"h2:5433": hostPrimary, "h1:5432": hostUnresponsive}, "h2:5433/tls h2:5433/plain h3:5434/tls h3:5434/plain h1:5432/tls h1:5432/plain"},
		{map[string]hostState{"h3:5434": hostPrimary, "h2:5433": hostStandby}, "h3:5434/tls h3:5434/plain h1:5432/tls h1:5432/plain h2:5433/tls h2:5433/plain"},
		{map[string]hostState{"h1:5432": hostDown, "h3:5434": hostDown}, "h2:5433/tls h2:5433/plain h1:5432/tls h1:5432/plain h3:5434/tls h3:5434/plain"},
	} {
		h.state = map[string]hostState{}
		for k, st := range c.set {
			h.set(k, st, nil)
		}
		if got := order(); got != c.want {
			t.Errorf("states %v: order %s, want %s", c.set, got, c.want)
		}
	}
	// A new primary takes the place of the old one.
	h.state = map[string]hostState{}
	h.set("h1:5432", hostPrimary, nil)
	h.set("h2:5433", hostPrimary, nil)
	if got := h.snapshot(); got[0].State != "unknown" || got[1].State != "primary" {
		t.Errorf("after h2 became the primary: %+v", got)
	}
}

// TestFailedState: a probe's failure says how the server failed.
func TestFailedState(t *testing.T) {
	for _, c := range []struct {
		err  error
		want hostState
	}{
		{context.DeadlineExceeded, hostUnresponsive},
		{fmt.Errorf("probe: %w", &net.OpError{Op: "read", Err: timeoutErr{}}), hostUnresponsive},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), hostDown},
		{io.ErrUnexpectedEOF, hostDown},
		{&pgconn.PgError{Code: codeCannotConnectNow}, hostUnknown},
	} {
		if got := failedState(c.err); got != c.want {
			t.Errorf("failedState(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestAcknowledgement: what the store says at start about an acknowledgement under the
// server's replication settings; a warning exactly when an acknowledged event may not survive
// the primary's loss in a deployment that plans a failover.
func TestAcknowledgement(t *testing.T) {
	for _, c := range []struct {
		syncCommit, names string
		hosts             int
		warn              bool
		says              string
	}{
		{"on", "", 1, false, "no synchronous standby"},
		{"on", "", 2, true, "may lack the last acknowledged events"},
		{"off", "", 1, true, "before its commit is flushed"},
		{"off", "*", 2, true, "before its commit is flushed"},
		{"local", "*", 2, true, "before it reaches the synchronous standby"},
		{"on", "*", 2, false, "flushed on the primary and on a synchronous standby"},
		{"remote_apply", "FIRST 1 (s1, s2)", 2, false, "visible there"},
		{"remote_write", "ANY 1 (s1)", 2, false, "not a crash of both hosts"},
	} {
		got := acknowledgement(c.syncCommit, c.names, c.hosts)
		if (got.level == slog.LevelWarn) != c.warn || !strings.Contains(got.text, c.says) {
			t.Errorf("synchronous_commit=%s synchronous_standby_names=%q hosts=%d: %v %q; want warning %v saying %q",
				c.syncCommit, c.names, c.hosts, got.level, got.text, c.warn, c.says)
		}
	}
}

// freezer is a TCP proxy to the test database that can freeze: it keeps accepting connections
// and reading what clients send, but forwards nothing more either way, as a hung server whose
// kernel still answers.
type freezer struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	frozen bool
	wake   chan struct{}
}

func newFreezer(t *testing.T, target string) *freezer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{l: l, target: target, wake: make(chan struct{})}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

func (f *freezer) addr() string { return f.l.Addr().String() }

func (f *freezer) freeze() {
	f.mu.Lock()
	f.frozen = true
	f.mu.Unlock()
}

// pipe copies from src to dst while not frozen; once frozen it reads and drops.
func (f *freezer) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			dst.Close()
			return
		}
		f.mu.Lock()
		frozen := f.frozen
		f.mu.Unlock()
		if frozen {
			continue
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			src.Close()
			return
		}
	}
}

func (f *freezer) serve(c net.Conn) {
	f.mu.Lock()
	frozen := f.frozen
	f.mu.Unlock()
	if frozen { // a frozen server's kernel completes the handshake; nothing answers after
		go io.Copy(io.Discard, c)
		return
	}
	up, err := net.Dial("tcp", f.target)
	if err != nil {
		c.Close()
		return
	}
	go f.pipe(up, c)
	go f.pipe(c, up)
}

// TestFrozenServerLeftBehind: with the URL naming two servers (two proxies to the test
// database) and the first one freezing under load, appends go on through the second within
// seconds: the probe finds the frozen one, its connections are closed and new connections try
// it last. No append fails meanwhile but with a retryable store error.
func TestFrozenServerLeftBehind(t *testing.T) {
	base := pgtest.Schema(t)
	cfg, err := pgconn.ParseConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	target := net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	p1, p2 := newFreezer(t, target), newFreezer(t, target)
	u := strings.Replace(base, "@"+target, "@"+p1.addr()+","+p2.addr(), 1)
	if u == base {
		t.Skipf("the test database's URL %s does not name host:port after @", base)
	}
	ctx := context.Background()
	st, err := Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 4 {
		createSession(t, st, fmt.Sprintf("S-frozen-%d", i))
	}
	if hs := st.Hosts(); hs[0].State != "primary" {
		t.Logf("hosts before the freeze: %+v", hs)
	}
	var (
		mu   sync.Mutex
		acks []time.Time
		bad  []error
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := fmt.Sprintf("S-frozen-%d", i)
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				ev := storetest.Batch(t, sid, fmt.Sprintf("k%d-", n), 1)
				for {
					actx, cancel := context.WithTimeout(ctx, time.Minute)
					_, err := st.Append(actx, sid, ev, store.AppendOptions{})
					cancel()
					if err == nil {
						break
					}
					if _, ok := store.UnavailabilityOf(err); !ok || errors.Is(err, context.DeadlineExceeded) {
						mu.Lock()
						bad = append(bad, err)
						mu.Unlock()
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
				mu.Lock()
				acks = append(acks, time.Now())
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	frozeAt := time.Now()
	p1.freeze()
	var resumed time.Time // an append accepted once the probe could have found the freeze
	for deadline := time.Now().Add(30 * time.Second); resumed.IsZero() && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		for _, a := range acks {
			if a.After(frozeAt.Add(probeTimeout + probeEvery)) {
				resumed = a
				break
			}
		}
		mu.Unlock()
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("writers stopped %v after the freeze", time.Since(frozeAt).Round(time.Millisecond))
	at := time.Now()
	st.Close()
	t.Logf("closed in %v", time.Since(at).Round(time.Millisecond))
	t.Cleanup(func() { t.Logf("cleaned up in %v", time.Since(at).Round(time.Millisecond)) })
	if resumed.IsZero() {
		t.Fatalf("no append accepted within 30 s of the first server's freeze; hosts: %+v", st.Hosts())
	}
	for _, err := range bad {
		t.Errorf("an append failed with an error that is not a retryable store error: %v", err)
	}
	// The longest time without an accepted append from the freeze on.
	var stall time.Duration
	prev := frozeAt
	for _, a := range acks {
		if a.After(frozeAt) {
			stall, prev = max(stall, a.Sub(prev)), a
		}
	}
	t.Logf("the longest time without an accepted append after the freeze: %v; hosts: %+v", stall.Round(time.Millisecond), st.Hosts())
	if hs := st.Hosts(); hs[0].State != "unresponsive" {
		t.Errorf("the frozen server's state: %+v, want unresponsive", hs[0])
	}
	if limit := probeEvery + probeTimeout + DefaultConnectTimeout; stall > limit {
		t.Errorf("no append was accepted for %v after the freeze; want at most the probe's period and deadline and a connect timeout (%v)", stall.Round(time.Millisecond), limit)
	}
}

// TestOpenWarnsWithoutSynchronousStandby: a URL naming two servers (the test database twice,
// as 127.0.0.1 and localhost)
// on a server without synchronous_standby_names gets the warning that an acknowledged event may
// not survive the primary's loss; the same URL naming one server does not.
func TestOpenWarnsWithoutSynchronousStandby(t *testing.T) {
	base := pgtest.Schema(t)
	cfg, err := pgconn.ParseConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	hp := net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	if cfg.Host != "127.0.0.1" {
		t.Skipf("the test database is not on 127.0.0.1 (%s): the test names it twice as 127.0.0.1 and localhost", hp)
	}
	two := strings.Replace(base, "@"+hp, "@"+hp+",localhost:"+fmt.Sprint(cfg.Port), 1)
	if two == base {
		t.Skipf("the test database's URL %s does not name host:port after @", base)
	}
	var names string
	if err := pgtest.Admin(t).QueryRow(context.Background(), "SELECT current_setting('synchronous_standby_names')").Scan(&names); err != nil {
		t.Fatal(err)
	}
	if names != "" {
		t.Skipf("the test server has a synchronous standby (%q)", names)
	}
	const warning = "may lack the last acknowledged events"
	for _, c := range []struct {
		url  string
		warn bool
	}{{base, false}, {two, true}} {
		var logs logBuffer
		st, err := Open(context.Background(), c.url, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		if got := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), warning); got != c.warn {
			t.Errorf("Open(%s): warned %v, want %v; the log:\n%s", c.url, got, c.warn, logs.String())
		}
	}
}
