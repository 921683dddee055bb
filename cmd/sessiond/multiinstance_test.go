package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/internal/testenv"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
)

// startServe runs "sessiond serve" with args on a free loopback port and returns its URL and
// process; the process is killed when the test ends.
func startServe(t *testing.T, args ...string) (string, *exec.Cmd, *testenv.SyncBuffer) {
	t.Helper()
	return startServeIn(t, "", args...)
}

// startServeIn is startServe with the process's working directory dir ("" for the test's).
func startServeIn(t *testing.T, dir string, args ...string) (string, *exec.Cmd, *testenv.SyncBuffer) {
	t.Helper()
	cmd := sessiond(context.Background(), append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Dir = dir
	u, stderr := testenv.StartServe(t, cmd)
	return u, cmd, stderr
}

// switchTransport sends every request to the host it currently holds, whatever the URL says:
// a client that fails over from one instance to another.
type switchTransport struct{ host atomic.Value }

func (s *switchTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Host = s.host.Load().(string)
	r.Host = r.URL.Host
	return http.DefaultTransport.RoundTrip(r)
}

func hostOf(t *testing.T, base string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// TestMultiInstancePostgres runs two "sessiond serve" processes on one PostgreSQL schema. A
// writer appends batches through instance A while an SSE subscriber (client.Stream) follows the
// session on instance B; B is SIGKILLed mid-stream and the subscriber fails over to A, resuming
// from its last sequence. It must receive every event exactly once, in order.
func TestMultiInstancePostgres(t *testing.T) {
	dbURL := pgtest.Schema(t)
	urlA, _, errA := startServe(t, "--store", dbURL, "--data", filepath.Join(t.TempDir(), "unused"))
	urlB, procB, errB := startServe(t, "--store", dbURL, "--data", filepath.Join(t.TempDir(), "unused"))
	defer func() {
		if t.Failed() {
			t.Logf("instance A stderr:\n%s\ninstance B stderr:\n%s", errA.String(), errB.String())
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	writer := client.New(urlA, nil)
	const sid = "S-multi"
	if _, err := writer.CreateSession(ctx, api.CreateSessionRequest{SessionID: sid, AgentID: "agent-1", Role: "implementer",
		Snapshot: contract.Snapshot{Mode: "work", ModelID: "m", Capabilities: contract.Capabilities{}}}); err != nil {
		t.Fatalf("create session through A: %v", err)
	}

	sw := &switchTransport{}
	sw.host.Store(hostOf(t, urlB))
	reader := client.New(urlB, &http.Client{Transport: sw})
	const batches, size = 60, 10
	const total = batches * size
	var (
		received  atomic.Int64
		reconnect atomic.Int64
		streamErr = make(chan error, 1)
	)
	go func() {
		next := int64(0)
		err := reader.Stream(ctx, sid, client.StreamOptions{After: -1, MaxBackoff: 200 * time.Millisecond,
			OnReconnect: func(after int64, cause error) { reconnect.Add(1) }},
			func(e client.StreamEvent) error {
				if e.Sequence != next {
					return fmt.Errorf("received sequence %d, want %d", e.Sequence, next)
				}
				var ev struct {
					EventID  string `json:"eventId"`
					Sequence int64  `json:"sequence"`
				}
				if err := json.Unmarshal(e.Data, &ev); err != nil || ev.Sequence != next || ev.EventID != fmt.Sprintf("e%d", next) {
					return fmt.Errorf("event %d: %s (%v)", next, e.Data, err)
				}
				next++
				received.Store(next)
				if next == total {
					return errDone
				}
				return nil
			})
		streamErr <- err
	}()

	killed := false
	for b := 0; b < batches; b++ {
		var nd strings.Builder
		for i := b * size; i < (b+1)*size; i++ {
			nd.WriteString(cliEvent(sid, i) + "\n")
		}
		res, err := writer.AppendNDJSON(ctx, sid, []byte(nd.String()), nil)
		if err != nil {
			t.Fatalf("append batch %d through A: %v", b, err)
		}
		if res.LastSequence != int64((b+1)*size-1) {
			t.Fatalf("batch %d: last sequence %d", b, res.LastSequence)
		}
		if b == batches/3 {
			// Let B's subscriber get part of the way, then kill B and fail over to A.
			deadline := time.Now().Add(20 * time.Second)
			for received.Load() < int64(size) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if received.Load() == 0 {
				t.Fatal("the subscriber on B received nothing of what was appended through A")
			}
			if err := procB.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			sw.host.Store(hostOf(t, urlA))
			killed = true
			t.Logf("instance B killed after the subscriber received %d events", received.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !killed {
		t.Fatal("instance B was never killed")
	}
	select {
	case err := <-streamErr:
		if err != errDone {
			t.Fatalf("stream: %v (received %d of %d)", err, received.Load(), total)
		}
	case <-ctx.Done():
		t.Fatalf("the subscriber received %d of %d events", received.Load(), total)
	}
	if reconnect.Load() == 0 {
		t.Error("the subscriber never reconnected: the fail-over was not exercised")
	}
}

var errDone = fmt.Errorf("all events received")

// TestServeStoreFlag checks that --store accepts only PostgreSQL URLs.
func TestServeStoreFlag(t *testing.T) {
	for _, c := range []struct {
		name, store, want string
		code              int
	}{
		{"not a URL", "somewhere", "is not a PostgreSQL URL", 2},
		{"other scheme", "mysql://root@127.0.0.1/test", "hint: leave --store out for SQLite", 2},
		{"unreachable database", "postgres://postgres@127.0.0.1:1/test?connect_timeout=2", "hint: check that PostgreSQL at postgres://postgres@127.0.0.1:1/test", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, "", "serve", "--addr", "127.0.0.1:0", "--store", c.store)
			if code != c.code || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, c.code, c.want)
			}
		})
	}
}
