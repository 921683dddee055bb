package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/store"
)

// Where two features meet: an interrupt and its retry, racing interrupts, a stop and a lease
// expiry, the sweeper and the lease expirer, a backlog and staleness (docs/runtime.md,
// "Where features meet"). Each test runs on both drivers.

// onDrivers runs f with a server of opt over a fresh store of each driver. The bundle's st is
// nil (it is SQLite's type): f gets the store itself.
func onDrivers(t *testing.T, opt server.Options, f func(t *testing.T, b *bundle, st store.Store)) {
	drivers(t, func(t *testing.T, open func(t *testing.T) store.Store) {
		st := open(t)
		srv := server.New(st, opt)
		ts := httptest.NewServer(validated(t, srv))
		t.Cleanup(func() { srv.Close(); ts.Close() })
		f(t, &bundle{srv: srv, ts: ts, cl: client.New(ts.URL, ts.Client())}, st)
	})
}

// runStatus is a run status event of run runID (source message src) with key k and the
// timestamp and duration its status needs.
func runStatus(sid, k, runID, src, status string) string {
	pl := fmt.Sprintf(`{"status":%q`, status)
	if f := map[string]string{"running": "startedAt", "stopping": "stoppingRequestedAt", "stopped": "stoppedAt", "completed": "completedAt", "failed": "failedAt"}[status]; f != "" {
		pl += fmt.Sprintf(`,%q:"2026-03-01T12:01:00Z"`, f)
	}
	if contract.IsTerminal(status) {
		pl += `,"durationMs":1500`
	}
	return fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":%q,"sessionId":%q,"sequence":0,"idempotencyKey":%q,"occurredAt":"2026-03-01T12:00:00Z","runId":%q,"sourceMessageId":%q,"eventType":"status","payload":%s}`, k, sid, k, runID, src, pl+"}")
}

// stoppings counts the stopping status events of each run in the session's log.
func stoppings(t *testing.T, b *bundle, sid string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, e := range b.readAll(t, sid) {
		if e.EventType == "status" && e.Payload.(*contract.StatusPayload).Status == contract.RunStatusStopping {
			out[e.RunID]++
		}
	}
	return out
}

// TestInterruptRetryStopsNothing: an interrupting request resent byte for byte after a later
// run started is answered from the log: every event a duplicate, no interruption named, and
// the later run goes on.
func TestInterruptRetryStopsNothing(t *testing.T) {
	onDrivers(t, server.Options{}, func(t *testing.T, b *bundle, _ store.Store) {
		b.queueRun(t, "S-1")
		c := b.claim(t, `{}`, http.StatusOK)
		if resp := b.doLease(t, "POST", "/v1/sessions/S-1/events", c.Lease.Header, statusEvent("S-1", "s1", "r1", "running")); resp.status != http.StatusCreated {
			t.Fatalf("running: %d %s", resp.status, resp.body)
		}
		batch := userTurn("S-1", "m2", "r2")
		resp := b.do(t, "POST", "/v1/sessions/S-1/events?multitask=interrupt", "", batch)
		if a := appendAnswer(t, resp); resp.status != http.StatusCreated || a.Interrupted == nil || a.Interrupted.RunID != "r1" {
			t.Fatalf("interrupt: %d %s", resp.status, resp.body)
		}
		if resp := b.doLease(t, "POST", "/v1/sessions/S-1/events", c.Lease.Header, runStatus("S-1", "s2", "r1", "m1", "stopped")); resp.status != http.StatusCreated {
			t.Fatalf("stopped: %d %s", resp.status, resp.body)
		}
		// r2 runs and completes; r4 is queued, claimed and running.
		c2 := b.claim(t, `{}`, http.StatusOK)
		for _, ev := range []string{runStatus("S-1", "s3", "r2", "m2", "running"), runStatus("S-1", "s4", "r2", "m2", "completed")} {
			if resp := b.doLease(t, "POST", "/v1/sessions/S-1/events", c2.Lease.Header, ev); resp.status != http.StatusCreated {
				t.Fatalf("r2: %d %s", resp.status, resp.body)
			}
		}
		if resp := b.do(t, "POST", "/v1/sessions/S-1/events", "", userTurn("S-1", "m4", "r4")); resp.status != http.StatusCreated {
			t.Fatalf("r4: %d %s", resp.status, resp.body)
		}
		c4 := b.claim(t, `{}`, http.StatusOK)
		if resp := b.doLease(t, "POST", "/v1/sessions/S-1/events", c4.Lease.Header, runStatus("S-1", "s5", "r4", "m4", "running")); resp.status != http.StatusCreated {
			t.Fatalf("r4 running: %d %s", resp.status, resp.body)
		}
		// The first request again, byte for byte.
		resp = b.do(t, "POST", "/v1/sessions/S-1/events?multitask=interrupt", "", batch)
		a := appendAnswer(t, resp)
		if resp.status != http.StatusOK || a.Interrupted != nil || len(a.Results) != 2 || a.Results[0].Status != api.Duplicate || a.Results[1].Status != api.Duplicate {
			t.Fatalf("the retried interrupt: %d %s; want every event a duplicate and no interruption", resp.status, resp.body)
		}
		if got := b.runStatuses(t, "S-1"); got != "r1:stopped r2:completed r4:running" {
			t.Fatalf("runs after the retry = %s; want r4 still running", got)
		}
	})
}

// TestRacingInterrupts: concurrent interrupting requests, each a message and a new queued run,
// are all accepted; each run is stopped at most once, and only the request that stopped a run
// names it. Of a queued run nobody holds, each stops the run the one before it queued; of a
// running run, the first one stops it and the others find it stopping.
func TestRacingInterrupts(t *testing.T) {
	for _, running := range []bool{false, true} {
		t.Run(map[bool]string{false: "queued", true: "running"}[running], func(t *testing.T) {
			onDrivers(t, server.Options{}, func(t *testing.T, b *bundle, _ store.Store) {
				b.queueRun(t, "S-1")
				if running {
					c := b.claim(t, `{}`, http.StatusOK)
					if resp := b.doLease(t, "POST", "/v1/sessions/S-1/events", c.Lease.Header, statusEvent("S-1", "s1", "r1", "running")); resp.status != http.StatusCreated {
						t.Fatalf("running: %d %s", resp.status, resp.body)
					}
				}
				const n = 8
				answers := make([]response, n)
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						answers[i] = b.do(t, "POST", "/v1/sessions/S-1/events?multitask=interrupt", "", userTurn("S-1", fmt.Sprintf("m%d", i+2), fmt.Sprintf("r%d", i+2)))
					})
				}
				wg.Wait()
				named := map[string]int{}
				for i, resp := range answers {
					a := appendAnswer(t, resp)
					if resp.status != http.StatusCreated {
						t.Errorf("request %d: %d %s", i, resp.status, resp.body)
						continue
					}
					if a.Interrupted != nil {
						named[a.Interrupted.RunID]++
					}
				}
				stops := stoppings(t, b, "S-1")
				for run, k := range stops {
					if k != 1 || named[run] != 1 {
						t.Errorf("run %s: %d stopping events, named by %d answers; want 1 and 1", run, k, named[run])
					}
				}
				if len(named) != len(stops) {
					t.Errorf("answers name %v, the log stops %v", named, stops)
				}
				if want := map[bool]int{false: n, true: 1}[running]; len(stops) != want {
					t.Errorf("%d runs stopped (%v), want %d", len(stops), stops, want)
				}
			})
		})
	}
}
