package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/internal/testenv"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/sqlite"
)

// unavailableStore is a real SQLite store whose calls fail, while down is set, the way the
// PostgreSQL driver's do during a failover: classified store.Unreachable, and an append
// store.CommitUnknown (its connection was lost while committing).
type unavailableStore struct {
	*sqlite.Store
	down atomic.Bool
}

func (s *unavailableStore) fail() error {
	if s.down.Load() {
		return store.Unavailable(store.Unreachable, errors.New("failed to connect: read only connection"))
	}
	return nil
}

func (s *unavailableStore) GetSession(ctx context.Context, id string) (*store.Session, error) {
	if err := s.fail(); err != nil {
		return nil, err
	}
	return s.Store.GetSession(ctx, id)
}

func (s *unavailableStore) CreateSession(ctx context.Context, ss *store.Session) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.CreateSession(ctx, ss)
}

func (s *unavailableStore) LastSequence(ctx context.Context, id string) (int64, error) {
	if err := s.fail(); err != nil {
		return 0, err
	}
	return s.Store.LastSequence(ctx, id)
}

func (s *unavailableStore) ReadEvents(ctx context.Context, id string, after int64, limit int) ([]store.StoredEvent, error) {
	if err := s.fail(); err != nil {
		return nil, err
	}
	return s.Store.ReadEvents(ctx, id, after, limit)
}

func (s *unavailableStore) Append(ctx context.Context, id string, evs []*contract.EncodedEvent, opts store.AppendOptions) ([]store.AppendResult, error) {
	if err := s.fail(); err != nil {
		return nil, store.Unavailable(store.CommitUnknown, fmt.Errorf("write and commit: %w", err))
	}
	return s.Store.Append(ctx, id, evs, opts)
}

func (s *unavailableStore) Ready(ctx context.Context) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.Ready(ctx)
}

// TestStoreUnavailableAnswers: while the store cannot be reached, every route answers with
// its availability code, its status and Retry-After (contract.RetryFor), never INTERNAL; an
// append says its outcome is unknown and that a retry with the same keys is safe.
func TestStoreUnavailableAnswers(t *testing.T) {
	sq, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := &unavailableStore{Store: sq}
	srv := newServer(t, st, server.Options{})
	ts := httptest.NewServer(validated(t, srv))
	t.Cleanup(func() { srv.Close(); ts.Close(); sq.Close() })
	b := &bundle{st: sq, srv: srv, ts: ts, cl: client.New(ts.URL, ts.Client())}
	b.createSession(t, "S-a")
	st.down.Store(true)
	for _, c := range []struct {
		method, path, body string
		code               contract.ErrorCode
		says               string
	}{
		{"POST", "/v1/sessions/S-a/events", event("S-a", 1), contract.CodeCommitUnknown, "same idempotency keys"},
		{"GET", "/v1/sessions/S-a/events", "", contract.CodeStoreUnavailable, "retry"},
		{"GET", "/v1/sessions/S-a/events/stream", "", contract.CodeStoreUnavailable, "retry"},
		{"GET", "/v1/sessions/S-a", "", contract.CodeStoreUnavailable, "retry"},
		{"POST", "/v1/sessions", fmt.Sprintf(createBody, "S-b"), contract.CodeStoreUnavailable, "retry"},
		{"GET", "/readyz", "", contract.CodeStoreUnavailable, "not ready"},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			ct := ""
			if c.body != "" {
				ct = "application/json"
			}
			resp := b.do(t, c.method, c.path, ct, c.body)
			e := errorBody(t, resp.body)
			r := contract.RetryFor(c.code)
			if e.Code != c.code || resp.status != http.StatusServiceUnavailable || !strings.Contains(e.Message, c.says) {
				t.Fatalf("%d %s %q, want 503 %s saying %q", resp.status, e.Code, e.Message, c.code, c.says)
			}
			if got := resp.header.Get("Retry-After"); got != strconv.Itoa(r.AfterSeconds) {
				t.Errorf("Retry-After %q, want %d", got, r.AfterSeconds)
			}
		})
	}
	st.down.Store(false)
	if resp := b.do(t, "POST", "/v1/sessions/S-a/events", "application/json", event("S-a", 1)); resp.status != http.StatusCreated {
		t.Fatalf("the retried append once the store is back: %d %s", resp.status, resp.body)
	}
}

// TestStoreFullAnswers fills a real file system under the server's SQLite store: the append
// that finds no room answers 507 STORE_FULL with Retry-After, /readyz answers the same, reads
// go on, and once space is freed /readyz and appends recover without a restart. It needs root
// (a tmpfs mount) and skips without it; CI runs as root.
func TestStoreFullAnswers(t *testing.T) {
	dir := testenv.Tmpfs(t, 16<<20)
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 6<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, st, server.Options{})
	ts := httptest.NewServer(validated(t, srv))
	t.Cleanup(func() { srv.Close(); ts.Close(); st.Close() })
	b := &bundle{st: st, srv: srv, ts: ts, cl: client.New(ts.URL, ts.Client())}
	b.createSession(t, "S-a")
	big := strings.Repeat("x", 60000)
	bigEvent := func(n int) string {
		return strings.Replace(event("S-a", n), "hello", big, 1)
	}
	var resp response
	acked := 0
	for i := 0; i < 1000; i++ {
		if resp = b.do(t, "POST", "/v1/sessions/S-a/events", "application/json", bigEvent(i)); resp.status != http.StatusCreated {
			break
		}
		acked++
	}
	if e := errorBody(t, resp.body); resp.status != http.StatusInsufficientStorage || e.Code != contract.CodeStoreFull || resp.header.Get("Retry-After") != "30" {
		t.Fatalf("after %d appends: %d %s (Retry-After %q), want 507 STORE_FULL with Retry-After 30", acked, resp.status, resp.body, resp.header.Get("Retry-After"))
	}
	if r := b.do(t, "GET", "/readyz", "", ""); r.status != http.StatusInsufficientStorage || errorBody(t, r.body).Code != contract.CodeStoreFull {
		t.Fatalf("/readyz on a full disk: %d %s, want STORE_FULL", r.status, r.body)
	}
	if r := b.do(t, "GET", "/v1/sessions/S-a/events?limit=1", "", ""); r.status != http.StatusOK {
		t.Fatalf("a read on a full disk: %d %s", r.status, r.body)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for r := b.do(t, "GET", "/readyz", "", ""); r.status != http.StatusOK; r = b.do(t, "GET", "/readyz", "", "") {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz 30 s after freeing space: %d %s", r.status, r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := b.do(t, "POST", "/v1/sessions/S-a/events", "application/json", bigEvent(acked)); r.status != http.StatusCreated {
		t.Fatalf("the refused append retried after freeing space: %d %s", r.status, r.body)
	}
}

// TestStreamWaitsItOut follows a session with client.Stream through what a restart or a
// failover looks like from the client: the connection dropped, a proxy answering 502 while the
// server restarts, 503 STORE_UNAVAILABLE with Retry-After while the database switches, and a
// stream the server ends with STREAM_FAILED. The follower keeps going and sees every event
// exactly once, in order.
func TestStreamWaitsItOut(t *testing.T) {
	b := setup(t, server.Options{})
	b.createSession(t, "S-a")
	const (
		pass = iota
		proxy502
		unavailable
		streamFailed
	)
	var mode atomic.Int32
	var refused atomic.Int64
	var dropMu sync.Mutex
	dropped := make(chan struct{}) // closed (and replaced) to drop the open stream
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/events/stream") {
			b.srv.ServeHTTP(w, r)
			return
		}
		switch mode.Load() {
		case proxy502:
			refused.Add(1)
			http.Error(w, "bad gateway", http.StatusBadGateway)
		case unavailable:
			refused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, `{"error":{"code":%q,"message":"the database cannot be reached now"}}`+"\n", contract.CodeStoreUnavailable)
		case streamFailed:
			refused.Add(1)
			mode.Store(pass)
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: stream.error\ndata: {\"code\":%q,\"message\":\"reading the log failed; reconnect with Last-Event-ID\"}\n\n", contract.CodeStreamFailed)
		default:
			dropMu.Lock()
			ch := dropped
			dropMu.Unlock()
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			go func() {
				select {
				case <-ch:
					cancel()
				case <-ctx.Done():
				}
			}()
			b.srv.ServeHTTP(w, r.WithContext(ctx)) // a stream the test can drop
		}
	}))
	defer front.Close()
	cl := client.New(front.URL, front.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := make(chan int64, 100)
	done := make(chan error, 1)
	go func() {
		done <- cl.Stream(ctx, "S-a", client.StreamOptions{After: -1, MaxBackoff: 200 * time.Millisecond}, func(e client.StreamEvent) error {
			got <- e.Sequence
			return nil
		})
	}()
	next := int64(0)
	receive := func(upTo int64) {
		t.Helper()
		for next <= upTo {
			select {
			case seq := <-got:
				if seq != next {
					t.Fatalf("the follower got sequence %d, want %d (exactly once, in order)", seq, next)
				}
				next++
			case err := <-done:
				t.Fatalf("the follower gave up at sequence %d: %v", next, err)
			case <-ctx.Done():
				t.Fatalf("the follower is stuck at sequence %d", next)
			}
		}
	}
	appendN := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if r := b.do(t, "POST", "/v1/sessions/S-a/events", "application/json", event("S-a", i)); r.status != http.StatusCreated {
				t.Fatalf("append %d: %d %s", i, r.status, r.body)
			}
		}
	}
	waitRefused := func(n int64) {
		t.Helper()
		for refused.Load() < n {
			select {
			case err := <-done:
				t.Fatalf("the follower gave up at sequence %d: %v", next, err)
			case <-ctx.Done():
				t.Fatal("no reconnect came")
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	appendN(0, 5)
	receive(4)
	for _, m := range []int32{proxy502, unavailable, streamFailed} {
		before := refused.Load()
		mode.Store(m)
		dropMu.Lock()
		close(dropped) // drop the stream: the follower reconnects into the window
		dropped = make(chan struct{})
		dropMu.Unlock()
		appendN(int(next), int(next)+3)
		waitRefused(before + 2 - int64(m/streamFailed)) // the window answered at least twice (once for STREAM_FAILED)
		mode.Store(pass)
		receive(next + 2)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Stream ended with %v, want context.Canceled", err)
	}
}
