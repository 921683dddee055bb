package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// SweepOptions configure [Service.Sweep].
type SweepOptions struct {
	// StaleAfter is the heartbeat TTL (default the service's Options.StaleAfter).
	StaleAfter time.Duration
	// Batch is how many expired sessions are fetched per store query (default 500).
	Batch int
	// Workers is how many sessions are handled at once (default 8).
	Workers int
}

var errAlive = errors.New("the session is alive again")

// Sweep marks stale every running or paused session whose last heartbeat (started_at when it
// never had one) is older than opt.StaleAfter, unless its current run holds a lease (a worker
// renews it: the run is alive, whatever its status, waiting_approval included; a lease that
// expired is the lease expirer's, ExpireLeases, which fails the run or queues its next attempt:
// the sweeper never takes a leased run from it). When such a session's current run is active
// and was started (a queued run nobody holds waits for a worker, however long: a queue does
// not fail work because it waited; it is left queued and only the session is marked stale),
// Sweep first appends, through the store, the run's "failed" status (failedAt now, durationMs
// since the run started) and an "error" event (code HEARTBEAT_LOST, retryable, sourceEventId
// the failed status), with ids derived from the session and the run: several sweepers (other
// instances) racing on one session append them once. The append is conditional on the log the
// sweeper read, and the stale mark on the heartbeat still being old, so a session that speaks
// up meanwhile is left alone. Only expired sessions are read: the cost is in proportion to
// them, not to the sessions in the store.
func (s *Service) Sweep(ctx context.Context, opt SweepOptions) (res SweepResult, err error) {
	start := s.now()
	defer func() {
		if err == nil || ctx.Err() == nil {
			s.report(Pass{Kind: PassSweep, Sweep: res, Err: err, Took: s.now().Sub(start)})
		}
	}()
	if opt.StaleAfter <= 0 {
		opt.StaleAfter = s.opt.StaleAfter
	}
	if opt.Batch <= 0 {
		opt.Batch = 500
	}
	if opt.Workers <= 0 {
		opt.Workers = 8
	}
	cutoff := s.now().Add(-opt.StaleAfter)
	for {
		batch, err := s.st.ExpiredSessions(ctx, cutoff, opt.Batch)
		if err != nil {
			return res, fmt.Errorf("sweep: %w", err)
		}
		// Sessions are handled by several workers: the store commits their changes together
		// (group commit in SQLite, one connection each in PostgreSQL).
		var (
			mu       sync.Mutex
			wg       sync.WaitGroup
			firstErr error
			progress int
		)
		next := make(chan store.ExpiredSession)
		for range min(opt.Workers, len(batch)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for e := range next {
					failed, err := s.expire(ctx, e.SessionID, cutoff, opt.StaleAfter)
					mu.Lock()
					res.Expired++
					switch {
					case errors.Is(err, errAlive):
						res.Skipped++
						progress++
						if failed {
							res.RunsFailed++ // failed before a heartbeat kept the session alive
						}
					case errors.Is(err, store.ErrSessionNotFound):
						res.Skipped++
					case err != nil:
						if firstErr == nil {
							firstErr = fmt.Errorf("sweep: session %q: %w", e.SessionID, err)
						}
					default:
						res.Stale++
						progress++
						if failed {
							res.RunsFailed++
						}
					}
					mu.Unlock()
				}
			}()
		}
		for _, e := range batch {
			next <- e
		}
		close(next)
		wg.Wait()
		if firstErr != nil {
			return res, firstErr
		}
		if len(batch) < opt.Batch || progress == 0 {
			return res, nil
		}
	}
}

// expired reports whether a record's heartbeat is before cutoff and its status can go stale.
func expired(r *contract.SessionRecord, cutoff time.Time) bool {
	hb, ok := store.HeartbeatOf(r)
	return ok && (r.Status == contract.SessionStatusRunning || r.Status == contract.SessionStatusPaused) && hb.Before(cutoff)
}

// expire handles one expired session; failed says whether it failed an active run (also when
// the session then turned out alive: errAlive).
//
// It fails the active run first and marks the session stale second, so that a crash in
// between leaves a failed run on a session the next sweep still finds (never a stale session
// whose dead run shows as running). The append is conditional on the log, so a runtime that
// appended since keeps its run; a bare heartbeat in between does not stop it. Like an expired
// lease, the session was silent past the TTL when the sweeper decided: the heartbeat then keeps
// the session running (the stale mark is skipped) while the run stays failed, and the runtime
// sees the retryable HEARTBEAT_LOST error on its stream and retries.
func (s *Service) expire(ctx context.Context, id string, cutoff time.Time, ttl time.Duration) (failed bool, err error) {
	l := s.lock(id)
	defer s.unlock(id, l)
	sess, err := s.st.GetSession(ctx, id)
	if err != nil {
		return false, err
	}
	if !expired(&sess.Record, cutoff) {
		return false, errAlive
	}
	runs, err := s.st.Runs(ctx, id)
	if err != nil {
		return false, err
	}
	// The current run: the one working (runs enqueued behind it wait, and become claimable
	// once it has failed).
	active := contract.CurrentRun(runs)
	if active != nil && contract.IsTerminal(active.Status) {
		active = nil
	}
	if active != nil {
		// A run that holds a lease is its worker's while the lease is renewed, whatever its
		// status (waiting_approval included), and the lease expirer's once it expired (which
		// fails it with LEASE_EXPIRED and queues the next attempt): never the sweeper's.
		held, err := s.leased(ctx, id, active.RunID)
		if err != nil {
			return false, err
		}
		if held {
			return false, errAlive
		}
	}
	if active != nil && active.Status == contract.RunStatusQueued {
		// Queued and held by nobody: it waits for a worker, and waiting is not dying. The
		// session is marked stale below; the run stays claimable.
		active = nil
	}
	if active != nil {
		events, err := s.heartbeatLost(id, active, &sess.Record, ttl)
		if err != nil {
			return false, err
		}
		last := sess.LastSequence
		_, err = s.append(ctx, OriginSweep, id, events, store.AppendOptions{ExpectedSequence: &last})
		var seqErr *store.SequenceConflictError
		var runErr *store.RunError
		switch {
		case errors.As(err, &seqErr), errors.As(err, &runErr):
			return false, errAlive // the log moved: the runtime spoke, or the run changed; look again next sweep
		case err != nil:
			return false, fmt.Errorf("append the failed run: %w", err)
		}
		failed = true
	}
	_, err = s.st.UpdateSession(ctx, id, func(sess *store.Session) error {
		if !expired(&sess.Record, cutoff) {
			return errAlive
		}
		sess.Record.Status = contract.SessionStatusStale
		sess.Record.UpdatedAt = contract.Some(s.stamp())
		sess.Record.UpdatedByGate = contract.Null[string]()
		return nil
	})
	if err != nil {
		return failed, err
	}
	return failed, nil
}

// lifecycleKey is the deterministic eventId and idempotencyKey of the n-th event the server
// appends for a lifecycle reason about subject (e.g. the run whose heartbeat was lost).
func lifecycleKey(sessionID, reason, subject string, n int) string {
	h := sha256.Sum256([]byte(sessionID + "\x00" + reason + "\x00" + subject))
	return fmt.Sprintf("lc-%s-%s-%d", reason, hex.EncodeToString(h[:12]), n)
}

// heartbeatLost builds the failed status and HEARTBEAT_LOST error events of an active run.
func (s *Service) heartbeatLost(id string, run *contract.Run, rec *contract.SessionRecord, ttl time.Duration) ([]*contract.EncodedEvent, error) {
	now := s.now()
	ts := contract.FormatTime(now)
	var dur int64
	if started, err := store.ParseTime(run.StartedAt); err == nil && now.After(started) {
		dur = now.Sub(started).Milliseconds()
	}
	d := json.Number(fmt.Sprint(dur))
	statusID := lifecycleKey(id, "hb", run.RunID, 0)
	errID := lifecycleKey(id, "hb", run.RunID, 1)
	last := rec.LastHeartbeatAt.Get()
	if last == "" {
		last = "its start (" + rec.StartedAt + ")"
	}
	detail := fmt.Sprintf("no heartbeat from the session for over %s", ttl)
	status := &contract.StatusPayload{Status: contract.RunStatusFailed, Detail: &detail, FailedAt: ts, DurationMs: &d}
	what := fmt.Sprintf("run %q was marked failed; retry it with a retry command once the runtime is back", run.RunID)
	// A run a person stopped stays stopped: the sweeper confirms the stop the runtime did not
	// (stopping -> stopped), and nothing should start the run again (not retryable), as the
	// lease expirer does for a leased run.
	stopped := run.Status == contract.RunStatusStopping
	if stopped {
		status = &contract.StatusPayload{Status: contract.RunStatusStopped, Detail: &detail, StoppedAt: ts, DurationMs: &d}
		what = fmt.Sprintf("the stop asked of run %q was confirmed by the server: the run is stopped", run.RunID)
	}
	events := []contract.Event{
		{Contract: "AgentSessionEvent", EventID: statusID, SessionID: id, RunID: run.RunID, SourceMessageID: run.SourceMessageID,
			IdempotencyKey: statusID, OccurredAt: ts, EventType: "status", Payload: status},
		{Contract: "AgentSessionEvent", EventID: errID, SessionID: id, RunID: run.RunID, SourceMessageID: run.SourceMessageID,
			IdempotencyKey: errID, OccurredAt: ts, EventType: "error",
			Payload: &contract.ErrorPayload{Code: HeartbeatLost, Retryable: !stopped, SourceEventID: statusID,
				Message: fmt.Sprintf("the session sent no heartbeat since %s (TTL %s), so %s", last, ttl, what)}},
	}
	out := make([]*contract.EncodedEvent, len(events))
	for i := range events {
		var err error
		if out[i], err = contract.EncodeEvent(&events[i]); err != nil {
			return nil, fmt.Errorf("heartbeat-lost event %d is invalid: %w", i, err)
		}
	}
	return out, nil
}
