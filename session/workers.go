package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// Workers and leases (docs/runtime.md, "Workers and leases").
const (
	// DefaultLeaseTTL is how long a lease lasts without a renewal, unless the claim asks for
	// another.
	DefaultLeaseTTL = 30 * time.Second
	// MaxLeaseTTL is the longest lease a claim or renewal may ask for.
	MaxLeaseTTL = 10 * time.Minute
	// MinLeaseTTL is the shortest.
	MinLeaseTTL = time.Second
	// MaxClaimWait is the longest a claim may wait for a run.
	MaxClaimWait = 30 * time.Second
	// LeaseExpired is the code of the error event the lease expirer appends for a run whose
	// lease was not renewed in time.
	LeaseExpired = "LEASE_EXPIRED"
)

// queueSignal wakes the claims that wait for a run: its channel is closed (and replaced) by
// every commit that may have queued a run.
type queueSignal struct {
	mu     sync.Mutex
	ch     chan struct{}
	cancel func() // the store subscriptions, once taken
}

// wait returns a channel that is closed by the next kick.
func (q *queueSignal) wait() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ch == nil {
		q.ch = make(chan struct{})
	}
	return q.ch
}

// kick wakes every waiter.
func (q *queueSignal) kick() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ch != nil {
		close(q.ch)
		q.ch = nil
	}
}

// onCommit kicks the waiters when a commit may have made a run claimable: the store says so
// (store.Commit.Claimable: a run queued, or queued behind one that ended), or the driver does
// not say what a commit holds (PostgreSQL: any commit, also another instance's).
func (q *queueSignal) onCommit(c store.Commit) {
	if c.Events == nil || c.Claimable {
		q.kick()
	}
}

// onRelease kicks the waiters when a lease was released (by this process or, on PostgreSQL,
// another instance): the run may be queued, and claimable again.
func (q *queueSignal) onRelease(string) { q.kick() }

// subscribe takes the store subscriptions of the queue signal (commits and lease releases) on
// first use.
func (s *Service) subscribe() {
	s.queue.mu.Lock()
	defer s.queue.mu.Unlock()
	if s.queue.cancel == nil {
		commits, releases := s.st.Subscribe(s.queue.onCommit), s.st.SubscribeReleases(s.queue.onRelease)
		s.queue.cancel = func() { commits(); releases() }
	}
}

// Close stops the background work (Stop) and releases the service's store subscription, if
// it took one. The service must not be used afterwards.
func (s *Service) Close() {
	s.Stop()
	s.queue.mu.Lock()
	cancel := s.queue.cancel
	s.queue.cancel = nil
	s.queue.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	s.queue.kick()
}

// newLeaseID returns a fresh leaseId: "L-" and 24 random hex digits.
func newLeaseID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "L-" + hex.EncodeToString(b[:])
}

// Claim gives the oldest queued run matching f a lease of ttl, waiting up to wait for one to
// be queued when none is (0: answer at once). A wait ends as soon as a commit queues a run
// (store commit notifications; no polling). It returns nil, nil when no run came in time; ctx
// ending also ends the wait that way.
func (s *Service) Claim(ctx context.Context, f store.ClaimFilter, wait, ttl time.Duration) (*store.Claim, error) {
	if wait > 0 {
		s.subscribe()
	}
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	leaseID := newLeaseID()
	for {
		// The channel is taken before the attempt: a run queued during it kicks the channel
		// this claim then waits on, so it is never missed.
		woken := s.queue.wait()
		c, err := s.st.ClaimRun(ctx, f, leaseID, leaseExpiry(s.now(), ttl))
		if err == nil {
			return &c, nil
		}
		if !errors.Is(err, store.ErrNothingToClaim) {
			return nil, err
		}
		if wait <= 0 {
			return nil, nil
		}
		select {
		case <-woken:
		case <-timeout:
			return nil, nil
		case <-ctx.Done():
			return nil, nil
		}
	}
}

// leaseExpiry is now + ttl, to the millisecond the stores keep.
func leaseExpiry(now time.Time, ttl time.Duration) time.Time {
	return now.Add(ttl).Truncate(time.Millisecond).UTC()
}

// RenewLease extends the lease ref holds on the run to ttl from now. A lease that is not the
// run's current one, or that expired, is refused (*store.LeaseError, LEASE_LOST).
func (s *Service) RenewLease(ctx context.Context, sessionID, runID string, ref store.LeaseRef, ttl time.Duration) (store.Lease, error) {
	now := s.now()
	return s.st.RenewLease(ctx, sessionID, runID, ref, now, leaseExpiry(now, ttl))
}

// ReleaseLease drops the lease ref holds on the run. A queued run is claimable again at once
// (the claims waiting are woken, in every instance: store.Store.SubscribeReleases); a run the holder started stays as it is,
// without a lease: it is then live by its session's heartbeat, as a run of a session without
// workers is. A lease that has expired is not released (LEASE_LOST): the lease expirer fails
// the run, or queues it again.
func (s *Service) ReleaseLease(ctx context.Context, sessionID, runID string, ref store.LeaseRef) error {
	return s.st.ReleaseLease(ctx, sessionID, runID, ref, s.now())
}

// RunLeases returns the lease state of the session's runs, in creation order.
func (s *Service) RunLeases(ctx context.Context, sessionID string) ([]store.RunLease, error) {
	return s.st.RunLeases(ctx, sessionID)
}

// LeaseExpiryOptions configure [Service.ExpireLeases].
type LeaseExpiryOptions struct {
	// MaxAttempts is how many attempts a run gets (default the service's
	// Options.MaxAttempts): a run whose lease expired on an attempt below it is queued again
	// as a new run with the next attempt.
	MaxAttempts int
	// Batch is how many expired leases are fetched per store query (default 500).
	Batch int
}

// LeaseExpiryResult counts what ExpireLeases did.
type LeaseExpiryResult struct {
	// Expired is how many expired leases were found.
	Expired int
	// Failed is how many runs were ended: failed, or stopped when a stop was pending (each
	// failed one also counted in Requeued when a new attempt was queued).
	Failed int
	// Requeued is how many new attempts were queued.
	Requeued int
	// Skipped is how many changed before they could be handled (renewed, released, ended).
	Skipped int
}

// ExpireLeases handles every lease that expired by now, earliest first: the run is failed
// with a retryable LEASE_EXPIRED error event naming the lease, and, when its attempt is below
// opt.MaxAttempts, a new run with the same source message is queued as the next attempt. A
// run that was asked to stop (stopping: a stop command or an interrupt) is stopped instead,
// with a LEASE_EXPIRED error event that is not retryable, and no attempt follows: a run a
// person stopped stays stopped. All
// in one append fenced by the expired lease (store.Fence.ExpiredBy), so a renewal, a release
// or the run's end in between wins, and several instances racing on one lease append it once
// (the events' ids derive from the lease). Only expired leases are read (an index).
func (s *Service) ExpireLeases(ctx context.Context, opt LeaseExpiryOptions) (res LeaseExpiryResult, err error) {
	start := s.now()
	defer func() {
		if err == nil || ctx.Err() == nil {
			s.report(Pass{Kind: PassLeaseExpiry, Leases: res, Err: err, Took: s.now().Sub(start)})
		}
	}()
	if opt.MaxAttempts <= 0 {
		opt.MaxAttempts = s.opt.MaxAttempts
	}
	if opt.Batch <= 0 {
		opt.Batch = 500
	}
	cutoff := s.now()
	for {
		batch, err := s.st.ExpiredLeases(ctx, cutoff, opt.Batch)
		if err != nil {
			return res, fmt.Errorf("expire leases: %w", err)
		}
		progress := 0
		var firstErr error
		for _, e := range batch {
			res.Expired++
			requeued, err := s.expireLease(ctx, e, cutoff, opt.MaxAttempts)
			var le *store.LeaseError
			switch {
			case errors.As(err, &le), errors.Is(err, store.ErrRunNotFound), errors.Is(err, store.ErrSessionNotFound), errors.Is(err, errAlive):
				res.Skipped++
			case err != nil:
				// One lease that cannot be expired now does not hold up the others.
				if firstErr == nil {
					firstErr = fmt.Errorf("expire lease %s of run %q of session %q: %w", e.Lease.LeaseID, e.RunID, e.SessionID, err)
				}
			default:
				progress++
				res.Failed++
				if requeued {
					res.Requeued++
				}
			}
		}
		if firstErr != nil {
			return res, firstErr
		}
		if len(batch) < opt.Batch || progress == 0 {
			return res, nil
		}
	}
}

// expireLease fails the run of an expired lease and queues its next attempt when there is one.
func (s *Service) expireLease(ctx context.Context, e store.ExpiredLease, cutoff time.Time, maxAttempts int) (requeued bool, err error) {
	l := s.lock(e.SessionID)
	defer s.unlock(e.SessionID, l)
	run, err := s.st.Run(ctx, e.SessionID, e.RunID)
	if err != nil {
		return false, err
	}
	if contract.IsTerminal(run.Status) {
		return false, errAlive
	}
	// The run failed when its lease expired: every field below derives from the lease and the
	// run, not from the clock, so instances that race to expire the same lease append the same
	// events and the later one's is a duplicate, never an idempotency conflict.
	at := e.Lease.ExpiresAt
	ts := contract.FormatTime(at)
	var dur int64
	if started, err := store.ParseTime(run.StartedAt); err == nil && at.After(started) {
		dur = at.Sub(started).Milliseconds()
	}
	d := json.Number(fmt.Sprint(dur))
	subject := e.RunID + "\x00" + e.Lease.LeaseID
	statusID, errID := lifecycleKey(e.SessionID, "lease", subject, 0), lifecycleKey(e.SessionID, "lease", subject, 1)
	detail := fmt.Sprintf("lease %s expired", e.Lease.LeaseID)
	next := e.Attempt + 1
	// A run a person stopped (a stop command, or an interrupt) stays stopped: its expiry
	// confirms the stop the worker did not (stopping -> stopped), and no attempt follows.
	stopped := run.Status == contract.RunStatusStopping
	requeued = next <= maxAttempts && !stopped
	what := fmt.Sprintf("run %q was marked failed (attempt %d of %d); retry it with a retry command", e.RunID, e.Attempt, maxAttempts)
	newRun := lifecycleKey(e.SessionID, "attempt", subject, 0)
	if requeued {
		what = fmt.Sprintf("run %q was marked failed, and attempt %d of %d is queued as run %q for the next worker", e.RunID, next, maxAttempts, newRun)
	}
	status := &contract.StatusPayload{Status: contract.RunStatusFailed, Detail: &detail, FailedAt: ts, DurationMs: &d}
	if stopped {
		what = fmt.Sprintf("the stop asked of run %q was confirmed by the server: the run is stopped, and no new attempt is queued", e.RunID)
		status = &contract.StatusPayload{Status: contract.RunStatusStopped, Detail: &detail, StoppedAt: ts, DurationMs: &d}
	}
	events := []contract.Event{
		{Contract: "AgentSessionEvent", EventID: statusID, SessionID: e.SessionID, RunID: e.RunID, SourceMessageID: run.SourceMessageID,
			IdempotencyKey: statusID, OccurredAt: ts, EventType: "status", Payload: status},
		{Contract: "AgentSessionEvent", EventID: errID, SessionID: e.SessionID, RunID: e.RunID, SourceMessageID: run.SourceMessageID,
			IdempotencyKey: errID, OccurredAt: ts, EventType: "error",
			Payload: &contract.ErrorPayload{Code: LeaseExpired, Retryable: !stopped, SourceEventID: statusID,
				Message: fmt.Sprintf("lease %s (fencing token %d) of run %q expired at %s without a renewal, so %s", e.Lease.LeaseID, e.Lease.Token, e.RunID, contract.FormatTime(e.Lease.ExpiresAt), what)}},
	}
	opts := store.AppendOptions{Fence: &store.Fence{Lease: &store.LeaseRef{LeaseID: e.Lease.LeaseID, Token: e.Lease.Token}, ExpiredBy: cutoff}}
	if requeued {
		qID := lifecycleKey(e.SessionID, "lease", subject, 2)
		events = append(events, contract.Event{Contract: "AgentSessionEvent", EventID: qID, SessionID: e.SessionID, RunID: newRun, SourceMessageID: run.SourceMessageID,
			IdempotencyKey: qID, OccurredAt: ts, EventType: "status", Payload: &contract.StatusPayload{Status: contract.RunStatusQueued}})
		opts.Attempts = map[string]int{newRun: next}
		opts.Enqueue = true // behind the runs already enqueued in the session, if any
	}
	enc := make([]*contract.EncodedEvent, len(events))
	for i := range events {
		if enc[i], err = contract.EncodeEvent(&events[i]); err != nil {
			return false, fmt.Errorf("lease-expired event %d is invalid: %w", i, err)
		}
	}
	if _, err := s.append(ctx, OriginLeaseExpiry, e.SessionID, enc, opts); err != nil {
		return false, err
	}
	return requeued, nil
}

// heldLease returns the lease held on the run now, expired or not (nil: none).
func (s *Service) heldLease(ctx context.Context, sessionID, runID string) (*store.Lease, error) {
	leases, err := s.st.RunLeases(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	for _, rl := range leases {
		if rl.RunID == runID {
			return rl.Held, nil
		}
	}
	return nil, nil
}

// leased reports whether the run holds a lease, expired or not (an expired lease is the lease
// expirer's to handle).
func (s *Service) leased(ctx context.Context, sessionID, runID string) (bool, error) {
	held, err := s.heldLease(ctx, sessionID, runID)
	return held != nil, err
}

// leaseAlive reports whether someone holds the run's lease and it has not expired by now.
func (s *Service) leaseAlive(ctx context.Context, sessionID, runID string) (bool, error) {
	held, err := s.heldLease(ctx, sessionID, runID)
	return held != nil && held.ExpiresAt.After(s.now()), err
}
