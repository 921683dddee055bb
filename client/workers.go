package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/wire"
)

// Claim asks for the oldest queued run matching req, waiting up to req.Wait for one (POST
// /v1/runs/claim). It returns nil, nil when no run came in time.
func (c *Client) Claim(ctx context.Context, req wire.ClaimRequest) (*wire.Claim, error) {
	body, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	var out wire.Claim
	status, err := c.send(ctx, http.MethodPost, "/v1/runs/claim", nil, body, "application/json", &out)
	if err != nil || status == http.StatusNoContent {
		return nil, err
	}
	return &out, nil
}

func leasePath(sessionID, runID string) string {
	return "/v1/sessions/" + url.PathEscape(sessionID) + "/runs/" + url.PathEscape(runID) + "/lease"
}

// RenewLease extends the lease on a run by ttl from now (0: the server's default). An
// *api.Error with code LEASE_LOST means the lease is gone: stop working on the run.
func (c *Client) RenewLease(ctx context.Context, sessionID, runID string, lease wire.Lease, ttl time.Duration) (*wire.Lease, error) {
	req := wire.LeaseRequest{LeaseID: lease.LeaseID, Token: lease.Token}
	if ttl > 0 {
		req.LeaseTTL = ttl.String()
	}
	body, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	var out wire.Lease
	return &out, c.do(ctx, http.MethodPost, leasePath(sessionID, runID), body, "application/json", &out)
}

// ReleaseLease gives the lease on a run up.
func (c *Client) ReleaseLease(ctx context.Context, sessionID, runID string, lease wire.Lease) error {
	body, err := jsonBody(wire.LeaseRequest{LeaseID: lease.LeaseID, Token: lease.Token})
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPost, leasePath(sessionID, runID)+"/release", body, "application/json", nil)
}

// AppendUnderLease appends typed events as one all-or-nothing batch, carrying lease in the
// Sessiond-Lease header (AppendEventsWith with AppendOptions.Lease).
func (c *Client) AppendUnderLease(ctx context.Context, id string, lease wire.Lease, events []contract.Event, expected *int64) (*api.AppendResponse, error) {
	return c.AppendEventsWith(ctx, id, events, AppendOptions{Expected: expected, Lease: &lease})
}

// Worker claims queued runs and hands each to Handle, with its lease renewed in the background,
// and released when Handle returns nil and its context has not ended by then. When Handle
// fails, or its context has ended (the lease was lost, Run's context ended) whatever it
// returns, the lease is left to expire: the server's lease expirer
// then fails the run, or queues it again, with an event naming the lost lease, where a
// released run would stay as it is, unheld, until its session's heartbeat runs out. Run drives
// it.
type Worker struct {
	// Client is the server to work for.
	Client *Client
	// Filter selects the runs (project, agent_id, role, capabilities). Its Wait is how long
	// one claim waits (default "30s"), its LeaseTTL the lease's length (default "30s").
	Filter wire.ClaimRequest
	// Concurrency is how many runs are handled at once (default 1).
	Concurrency int
	// Handle does a run's work; it appends through job.Append, which carries the lease. Its
	// context ends when the lease is lost (a renewal answered LEASE_LOST) or Run's context
	// ends: it should then stop at once, since nothing more it appends is accepted.
	Handle func(ctx context.Context, job *Job) error
	// MinBackoff and MaxBackoff bound the wait after a failed claim, doubled at each failure
	// in a row (defaults 100ms and 10s).
	MinBackoff, MaxBackoff time.Duration
	// OnError, when set, hears of failed claims, renewals and releases, and of Handle's errors.
	OnError func(error)
}

// Job is a claimed run in a Worker's hands.
type Job struct {
	// Claim is what the claim answered: the run, its lease and its attempt.
	Claim wire.Claim
	c     *Client
	mu    sync.Mutex
	lease wire.Lease
}

// Lease returns the job's lease as last renewed.
func (j *Job) Lease() wire.Lease {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lease
}

// Append appends events to the run's session under the job's lease.
func (j *Job) Append(ctx context.Context, events []contract.Event) (*api.AppendResponse, error) {
	return j.c.AppendUnderLease(ctx, j.Claim.Run.SessionID, j.Lease(), events, nil)
}

// Run claims and handles runs until ctx ends, then waits for the runs in hand (their contexts
// end with ctx; the leases of those Handle did not finish expire). It returns ctx's error.
func (w *Worker) Run(ctx context.Context) error {
	if w.Client == nil || w.Handle == nil {
		return errors.New("client.Worker: Client and Handle are required")
	}
	n := max(w.Concurrency, 1)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop(ctx)
		}()
	}
	wg.Wait()
	return ctx.Err()
}

func (w *Worker) report(err error) {
	if w.OnError != nil && err != nil {
		w.OnError(err)
	}
}

// loop claims one run at a time until ctx ends, backing off after failures.
func (w *Worker) loop(ctx context.Context) {
	minB, maxB := w.MinBackoff, w.MaxBackoff
	if minB <= 0 {
		minB = 100 * time.Millisecond
	}
	if maxB < minB {
		maxB = max(10*time.Second, minB)
	}
	req := w.Filter
	if req.Wait == "" {
		req.Wait = "30s"
	}
	backoff := minB
	for ctx.Err() == nil {
		c, err := w.Client.Claim(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.report(fmt.Errorf("claim: %w", err))
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, maxB)
			continue
		}
		backoff = minB
		if c != nil {
			w.handle(ctx, c)
		}
	}
}

// handle runs Handle on one claimed run, renewing its lease at a third of its length, and
// releases the lease afterwards when Handle succeeded (see Worker).
func (w *Worker) handle(ctx context.Context, c *wire.Claim) {
	job := &Job{Claim: *c, c: w.Client, lease: c.Lease}
	ttl := 30 * time.Second
	if d, err := time.ParseDuration(w.Filter.LeaseTTL); err == nil && d > 0 {
		ttl = d
	}
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-jctx.Done():
				return
			case <-t.C:
			}
			l, err := w.Client.RenewLease(jctx, c.Run.SessionID, c.Run.RunID, job.Lease(), ttl)
			var aerr *api.Error
			switch {
			case errors.As(err, &aerr) && aerr.Code == contract.CodeLeaseLost:
				w.report(fmt.Errorf("run %s of session %s: %w", c.Run.RunID, c.Run.SessionID, err))
				cancel() // the run is someone else's now: stop the work
				return
			case err != nil:
				if jctx.Err() == nil {
					w.report(fmt.Errorf("renew the lease of run %s: %w", c.Run.RunID, err))
				}
			default:
				job.mu.Lock()
				job.lease = *l
				job.mu.Unlock()
			}
		}
	}()
	herr := w.Handle(jctx, job)
	w.report(herr)
	// The work's context ended (the lease was lost, or Run's context ended): whatever Handle
	// returned, the run may be unfinished. Released, a started run would stay unheld until its
	// session's heartbeat ran out; left to expire, it is failed or queued again.
	ended := jctx.Err() != nil
	cancel()
	<-renewed
	if herr != nil || ended {
		return // the lease expires: the server fails or re-queues the run, as its policy says
	}
	// A run that ended has dropped its lease already (LEASE_LOST then says so): nothing to do.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer rcancel()
	err := w.Client.ReleaseLease(rctx, c.Run.SessionID, c.Run.RunID, job.Lease())
	var aerr *api.Error
	if err != nil && !(errors.As(err, &aerr) && aerr.Code == contract.CodeLeaseLost) {
		w.report(fmt.Errorf("release the lease of run %s: %w", c.Run.RunID, err))
	}
}
