package postgres

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/store/postgres/pgtest"
)

// logBuffer is an io.Writer for a test's logger, safe for the store's goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestListenerReconnectIsLogged: the commit listener's lost connection and its return reach
// the logger given to Open, and a healthy store logs nothing.
func TestListenerReconnectIsLogged(t *testing.T) {
	fastListener(t)
	var logs logBuffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := Open(ctx, pgtest.Schema(t), Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	createSession(t, st, "S-log")
	if s := logs.String(); s != "" {
		t.Fatalf("a healthy store logged:\n%s", s)
	}
	if _, err := pgtest.Admin(t).Exec(ctx, `SELECT pg_terminate_backend($1)`, int64(st.lis.pid.Load())); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"level=WARN msg=\"postgres store: the commit listener lost its connection; reconnecting\"",
		"level=INFO msg=\"postgres store: the commit listener is listening again; missed commits were caught up\""} {
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), want); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the log does not say %s; it holds:\n%s", want, logs.String())
			}
		}
	}
	if !strings.Contains(logs.String(), "channel="+st.channel) {
		t.Errorf("the log does not name the channel %s:\n%s", st.channel, logs.String())
	}
}

// TestOpenTakesOneOptions: Open refuses more than one Options rather than pick one.
func TestOpenTakesOneOptions(t *testing.T) {
	_, err := Open(context.Background(), "postgres://127.0.0.1:1/none", Options{}, Options{})
	if err == nil || !strings.Contains(err.Error(), "at most one Options") {
		t.Fatalf("Open with two Options: %v; want a refusal", err)
	}
}

// TestPoolState: what PoolState reports for the metrics follows the pool and the listener: the
// listener up, a connection lost (a reconnect counted), up again.
func TestPoolState(t *testing.T) {
	fastListener(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := Open(ctx, pgtest.Schema(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	createSession(t, st, "S-pool")
	ps := st.PoolState()
	if !ps.ListenerUp || ps.TotalConns < 1 || ps.MaxConns < ps.TotalConns || ps.ListenerReconnects != 0 {
		t.Fatalf("PoolState of a healthy store: %+v", ps)
	}
	if _, err := pgtest.Admin(t).Exec(ctx, `SELECT pg_terminate_backend($1)`, int64(st.lis.pid.Load())); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if ps = st.PoolState(); ps.ListenerReconnects == 1 && ps.ListenerUp {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PoolState after the listener's connection was killed: %+v; want 1 reconnect and the listener up", ps)
		}
	}
}
