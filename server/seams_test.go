package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
)

// Where two features meet: an interrupt and its retry, racing interrupts, a stop and a lease
// expiry, the sweeper and the lease expirer, a backlog and staleness (docs/runtime.md,
// "Where features meet"). Each test runs on both drivers.

// onDrivers runs f with a server over a fresh store of each driver, its session service with
// the settings sopt. The bundle's st is nil (it is SQLite's type): f gets the store itself.
func onDrivers(t *testing.T, sopt session.Options, f func(t *testing.T, b *bundle, st store.Store)) {
	drivers(t, func(t *testing.T, open func(t *testing.T) store.Store) {
		st := open(t)
		srv := newServer(t, st, server.Options{}, sopt)
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
	onDrivers(t, session.Options{}, func(t *testing.T, b *bundle, _ store.Store) {
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
			onDrivers(t, session.Options{}, func(t *testing.T, b *bundle, _ store.Store) {
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

// errorEvents returns the error events of run runID in the session's log.
func errorEvents(t *testing.T, b *bundle, sid, runID string) []*contract.ErrorPayload {
	t.Helper()
	var out []*contract.ErrorPayload
	for _, e := range b.readAll(t, sid) {
		if e.EventType == "error" && e.RunID == runID {
			out = append(out, e.Payload.(*contract.ErrorPayload))
		}
	}
	return out
}

// waitTerminal waits until run runID of the session is terminal and returns the runs.
func waitTerminal(t *testing.T, b *bundle, sid, runID string) []api.RunResource {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		runs := b.runs(t, sid)
		for _, r := range runs {
			if r.RunID == runID && contract.IsTerminal(r.Status) {
				return runs
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s never ended: %+v", runID, runs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStoppedRunStaysStoppedWhenItsLeaseExpires: a run a person stopped (a stop command, or
// an interrupt) whose worker dies before confirming is stopped by the lease expirer, with a
// LEASE_EXPIRED error that is not retryable, and no new attempt, even below --max-attempts.
func TestStoppedRunStaysStoppedWhenItsLeaseExpires(t *testing.T) {
	for _, how := range []string{"stop", "interrupt"} {
		t.Run(how, func(t *testing.T) {
			onDrivers(t, session.Options{MaxAttempts: 2, LeaseExpiryInterval: 20 * time.Millisecond}, func(t *testing.T, b *bundle, _ store.Store) {
				b.queueRun(t, "S-1")
				c := b.claim(t, `{"leaseTtl":"1s"}`, http.StatusOK)
				if resp := b.doLease(t, "POST", "/v1/sessions/S-1/events", c.Lease.Header, statusEvent("S-1", "s1", "r1", "running")); resp.status != http.StatusCreated {
					t.Fatalf("running: %d %s", resp.status, resp.body)
				}
				want := "r1:stopped"
				switch how {
				case "stop":
					var last int64
					for _, r := range b.readAll(t, "S-1") {
						last = r.Sequence
					}
					if status, res := b.command(t, "S-1", "stop", "r1", "stop-1", last, `{"reason":"enough"}`, ""); status != http.StatusOK || res.Outcome != "accepted" {
						t.Fatalf("stop: %d %+v", status, res)
					}
				case "interrupt":
					if resp := b.do(t, "POST", "/v1/sessions/S-1/events?multitask=interrupt", "", userTurn("S-1", "m2", "r2")); resp.status != http.StatusCreated {
						t.Fatalf("interrupt: %d %s", resp.status, resp.body)
					}
					want += " r2:queued"
				}
				// The worker dies: its lease expires.
				waitTerminal(t, b, "S-1", "r1")
				if got := b.runStatuses(t, "S-1"); got != want {
					t.Fatalf("runs after the expiry = %s, want %s (no new attempt of a stopped run)", got, want)
				}
				errs := errorEvents(t, b, "S-1", "r1")
				if len(errs) != 1 || errs[0].Code != session.LeaseExpired || errs[0].Retryable {
					t.Fatalf("r1's error events = %+v, want one LEASE_EXPIRED, not retryable", errs)
				}
			})
		})
	}
}

// TestSweeperLeavesALeasedRunToTheExpirer: a run waiting for approval whose lease expired in
// a session silent past --stale-after is not failed by the sweeper (HEARTBEAT_LOST, no new
// attempt) but by the lease expirer: LEASE_EXPIRED and the next attempt queued.
func TestSweeperLeavesALeasedRunToTheExpirer(t *testing.T) {
	onDrivers(t, session.Options{StaleAfter: 100 * time.Millisecond, LeaseExpiryInterval: -1}, func(t *testing.T, b *bundle, st store.Store) {
		b.queueRun(t, "S-1")
		c := b.claim(t, `{"leaseTtl":"1s"}`, http.StatusOK)
		for _, ev := range []string{statusEvent("S-1", "s1", "r1", "running"), statusEvent("S-1", "s2", "r1", "waiting_approval")} {
			if resp := b.doLease(t, "POST", "/v1/sessions/S-1/events", c.Lease.Header, ev); resp.status != http.StatusCreated {
				t.Fatalf("%d %s", resp.status, resp.body)
			}
		}
		expires, err := time.Parse(time.RFC3339Nano, c.Lease.ExpiresAt)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(expires) + 50*time.Millisecond) // the lease and the heartbeat are both past
		b.mustDo(t, "POST", "/v1/sweep", "", "", http.StatusOK)
		if got := b.runStatuses(t, "S-1"); got != "r1:waiting_approval" {
			t.Fatalf("runs after the sweep = %s; the sweeper took the leased run", got)
		}
		res, err := session.New(st, session.Options{}).ExpireLeases(t.Context(), session.LeaseExpiryOptions{MaxAttempts: 2})
		if err != nil || res.Failed != 1 || res.Requeued != 1 {
			t.Fatalf("ExpireLeases = %+v, %v; want r1 failed and requeued", res, err)
		}
		runs := b.runs(t, "S-1")
		if len(runs) != 2 || runs[0].Status != contract.RunStatusFailed || runs[1].Status != contract.RunStatusQueued || runs[1].Attempt != 2 {
			t.Fatalf("runs = %+v, want r1 failed and attempt 2 queued", runs)
		}
		if errs := errorEvents(t, b, "S-1", "r1"); len(errs) != 1 || errs[0].Code != session.LeaseExpired {
			t.Fatalf("r1's error events = %+v, want one LEASE_EXPIRED", errs)
		}
	})
}

// TestSweeperLeavesTheBacklog: a queued run no worker has claimed is not failed however long
// its session is silent: the sweeper marks the session stale and the run stays claimable.
func TestSweeperLeavesTheBacklog(t *testing.T) {
	onDrivers(t, session.Options{StaleAfter: 100 * time.Millisecond}, func(t *testing.T, b *bundle, _ store.Store) {
		b.queueRun(t, "S-1")
		time.Sleep(200 * time.Millisecond)
		b.mustDo(t, "POST", "/v1/sweep", "", "", http.StatusOK)
		if got := b.runStatuses(t, "S-1"); got != "r1:queued" {
			t.Fatalf("runs after the sweep = %s; the sweeper failed a run waiting for a worker", got)
		}
		if s, err := b.cl.GetSession(t.Context(), "S-1"); err != nil || s.Record.Status != contract.SessionStatusStale {
			t.Fatalf("session = %+v, %v; want stale", s, err)
		}
		if c := b.claim(t, `{}`, http.StatusOK); c.Run.RunID != "r1" {
			t.Fatalf("claim = %+v, want r1", c)
		}
	})
}
