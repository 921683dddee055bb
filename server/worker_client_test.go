package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/wire"
)

// finish returns the running and completed status events of the job's run.
func finish(job *client.Job) []contract.Event {
	run := job.Claim.Run
	out := make([]contract.Event, 0, 2)
	for i, st := range []string{contract.RunStatusRunning, contract.RunStatusCompleted} {
		id := fmt.Sprintf("%s-%s-%d", run.SessionID, run.RunID, i)
		p := &contract.StatusPayload{Status: st, StartedAt: "2026-03-01T12:00:01Z"}
		if st == contract.RunStatusCompleted {
			p = &contract.StatusPayload{Status: st, CompletedAt: "2026-03-01T12:00:02Z", DurationMs: ptrNumber("1000")}
		}
		out = append(out, contract.Event{Contract: "AgentSessionEvent", EventID: id, IdempotencyKey: id, SessionID: run.SessionID,
			RunID: run.RunID, SourceMessageID: run.SourceMessageID, OccurredAt: "2026-03-01T12:00:01Z", EventType: "status", Payload: p})
	}
	return out
}

// TestWorkerServesManySessions: a client.Worker with 4 slots takes every queued run of 12
// sessions, each once, and completes it under its lease; one run outlives its lease's length
// and keeps it by the background renewal.
func TestWorkerServesManySessions(t *testing.T) {
	b := setup(t, server.Options{}, session.Options{LeaseExpiryInterval: 20 * time.Millisecond})
	const sessions = 12
	for i := range sessions {
		b.queueRun(t, fmt.Sprintf("S-%02d", i))
	}
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		errs []error
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &client.Worker{
		Client:      b.cl,
		Filter:      wire.ClaimRequest{Wait: "1s", LeaseTTL: "1s"},
		Concurrency: 4,
		OnError: func(err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		},
		Handle: func(ctx context.Context, job *client.Job) error {
			mu.Lock()
			seen[job.Claim.Run.SessionID]++
			mu.Unlock()
			if job.Claim.Run.SessionID == "S-00" {
				// Longer than the lease: only the renewals keep it.
				select {
				case <-time.After(2500 * time.Millisecond):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			_, err := job.Append(ctx, finish(job))
			return err
		},
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for i := range sessions {
		id := fmt.Sprintf("S-%02d", i)
		for {
			runs := b.runs(t, id)
			if len(runs) == 1 && runs[0].Status == contract.RunStatusCompleted {
				if runs[0].Lease != nil || runs[0].FencingToken != 1 {
					t.Errorf("%s: run %+v, want completed with no lease left and token 1", id, runs[0])
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: runs %+v, want r1 completed", id, runs)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range sessions {
		if n := seen[fmt.Sprintf("S-%02d", i)]; n != 1 {
			t.Errorf("S-%02d handled %d times, want once", i, n)
		}
	}
	if len(errs) > 0 {
		t.Errorf("the worker reported errors: %v", errs)
	}
}

func ptrNumber(s string) *json.Number { n := json.Number(s); return &n }

// TestWorkerFailedRunExpires: when Handle fails after starting its run, the worker does not
// release the lease (a released run would stay running, unheld, until the session's heartbeat
// runs out): the lease expires and the server fails the run.
func TestWorkerFailedRunExpires(t *testing.T) {
	b := setup(t, server.Options{}, session.Options{LeaseExpiryInterval: 20 * time.Millisecond})
	b.queueRun(t, "S-1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	handled := make(chan struct{})
	w := &client.Worker{
		Client: b.cl,
		Filter: wire.ClaimRequest{Wait: "1s", LeaseTTL: "1s"},
		Handle: func(ctx context.Context, job *client.Job) error {
			defer close(handled)
			if _, err := job.Append(ctx, finish(job)[:1]); err != nil { // running
				return err
			}
			return fmt.Errorf("the work failed")
		},
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	<-handled
	cancel() // no second claim: the test watches the first run alone
	<-done
	runs := b.waitRuns(t, "S-1", 1, contract.RunStatusFailed)
	if runs[0].Lease != nil {
		t.Errorf("the failed run still has a lease: %+v", runs[0].Lease)
	}
}

// lateRenewals delays each lease renewal by delay once armed: the renewal reaches the server
// after the lease has expired.
type lateRenewals struct {
	next  http.RoundTripper
	armed atomic.Bool
	delay time.Duration
}

func (l *lateRenewals) RoundTrip(r *http.Request) (*http.Response, error) {
	if l.armed.Load() && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/lease") {
		time.Sleep(l.delay)
	}
	return l.next.RoundTrip(r)
}

// TestWorkerLostLeaseIsNotReleased: when a renewal answers LEASE_LOST because the lease expired
// (and the expirer has not handled it yet), Handle's context ends and Handle returns nil, as a
// handler that stops at once does; the worker must not release the lease then. Released, the
// started run would stay running with no lease, which the expirer never looks at; left held,
// the expirer fails it.
func TestWorkerLostLeaseIsNotReleased(t *testing.T) {
	b := setup(t, server.Options{}, session.Options{LeaseExpiryInterval: time.Hour}) // the expirer waits
	b.queueRun(t, "S-1")
	late := &lateRenewals{next: b.ts.Client().Transport, delay: 1500 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	handled := make(chan struct{})
	var lost atomic.Bool
	w := &client.Worker{
		Client:  client.New(b.ts.URL, &http.Client{Transport: late}),
		Filter:  wire.ClaimRequest{Wait: "1s", LeaseTTL: "1s"},
		OnError: func(err error) { lost.Store(lost.Load() || strings.Contains(err.Error(), "LEASE_LOST")) },
		Handle: func(ctx context.Context, job *client.Job) error {
			defer close(handled)
			if _, err := job.Append(ctx, finish(job)[:1]); err != nil { // running
				return err
			}
			late.armed.Store(true)
			<-ctx.Done() // the renewal answered LEASE_LOST
			return nil
		},
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-handled:
	case <-time.After(10 * time.Second):
		t.Fatal("Handle's context never ended")
	}
	cancel()
	<-done
	if !lost.Load() {
		t.Fatal("the worker never heard LEASE_LOST: the test proved nothing")
	}
	runs := b.runs(t, "S-1")
	if len(runs) != 1 || runs[0].Status != contract.RunStatusRunning || runs[0].Lease == nil {
		t.Fatalf("runs %+v; want the run running, its expired lease still held for the expirer", runs)
	}
}
