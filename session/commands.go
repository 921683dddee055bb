package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// ExecOptions tune [Service.Execute].
type ExecOptions struct {
	// Wait, for a stop command, is how long to wait for the runtime to append the run's
	// terminal status: the result then says termination "confirmed", or fails with
	// STOP_TIMEOUT (retryable: send the same command again to keep waiting).
	Wait time.Duration
	// AtHead judges the command at the log's end whatever its expectedSequence, which is set
	// to the sequence the log ends at when the command is judged (each time, if the log moves
	// meanwhile): for a client that acts on what a person saw, such as an approval answered in
	// a chat, rather than on a sequence it read. Fork and edit-and-rerun ignore it.
	AtHead bool
}

// Execute applies a command to a session and returns its result, which satisfies the rules of
// the contract (docs/reference.md#commands). Everything a command changes it changes by appending events, in one
// all-or-nothing append conditional on the log it was judged against; if the log moved in
// between, the command is judged again. The events a command appends have ids derived from the
// command's idempotency key, so a command can take effect at most once even across crashes and
// instances; an accepted command's result is stored, and the same key again answers that
// result as "duplicate". Rejections change nothing and are not stored: sending the same
// command again judges it again.
//
// The error is nil for every outcome the contract describes (accepted, duplicate, rejected,
// failed); it is non-nil for ErrSessionMismatch and for storage failures.
func (s *Service) Execute(ctx context.Context, sessionID string, c *contract.Command, opt ExecOptions) (*contract.CommandResult, error) {
	if c.SessionID != sessionID {
		return nil, ErrSessionMismatch
	}
	res, err := s.execute(ctx, sessionID, c, opt.AtHead)
	if err != nil || c.CommandType != "stop" || opt.Wait <= 0 || (res.Outcome != "accepted" && res.Outcome != "duplicate") {
		return res, err
	}
	return s.waitStopped(ctx, res, opt.Wait)
}

func (s *Service) execute(ctx context.Context, sid string, c *contract.Command, atHead bool) (*contract.CommandResult, error) {
	l := s.lock(sid)
	defer s.unlock(sid, l)

	if prev, err := s.storedResult(ctx, sid, c.IdempotencyKey); err != nil || prev != nil {
		return prev, err
	}
	if c.CommandType == "fork" || c.CommandType == "edit-and-rerun" {
		return s.executeFork(ctx, sid, c, l)
	}
	status := StatusIdle // the session's status as last seen, for a final failure
	for attempt := 0; attempt < 10; attempt++ {
		st, err := s.load(ctx, sid, l.fold)
		if errors.Is(err, store.ErrSessionNotFound) {
			return s.rejected(c, StatusIdle, reject(contract.CodeSessionNotFound, "session %q does not exist", sid)), nil
		}
		if err != nil {
			return nil, fmt.Errorf("command %s: %w", c.CommandID, err)
		}
		// The command's events may already be in the log (a crash before its result was
		// stored, or another instance racing on the same key): then it has taken effect.
		if res, err := s.resultFromLog(ctx, st, c); err != nil || res != nil {
			return res, err
		}
		status = st.status()
		if atHead {
			c.ExpectedSequence = st.last
		}
		events, runID, termination, rej := s.decide(ctx, st, c)
		if rej != nil {
			return s.rejected(c, st.status(), rej), nil
		}
		encoded := make([]*contract.EncodedEvent, len(events))
		for i := range events {
			if encoded[i], err = contract.EncodeEvent(&events[i]); err != nil {
				return nil, fmt.Errorf("command %s: event %d it builds is invalid: %w", c.CommandID, i, err)
			}
		}
		// The append is conditional on the log ending at st.last, so the events' sequences are
		// known now: the result is built first and committed with them, in one transaction.
		last := st.last
		planned := make([]store.AppendResult, len(encoded))
		after := st.status()
		for i, e := range encoded {
			planned[i] = store.AppendResult{EventID: e.EventID, Sequence: last + 1 + int64(i)}
			if e.RunStatus != nil {
				after = e.RunStatus.Status // a run status event makes its run the current one
			}
		}
		res := s.accepted(c, sid, runID, termination, planned, after)
		stored, err := contract.Marshal(res)
		if err != nil {
			return nil, fmt.Errorf("command %s: encode result: %w", c.CommandID, err)
		}
		_, err = s.append(ctx, OriginCommand, sid, encoded, store.AppendOptions{ExpectedSequence: &last, Fence: st.fence,
			CommandResult: &store.CommandResultWrite{Key: c.IdempotencyKey, Result: stored}})
		var seqErr *store.SequenceConflictError
		var confErr *store.ConflictError
		var leaseErr *store.LeaseError
		if errors.As(err, &seqErr) || errors.As(err, &confErr) || errors.As(err, &leaseErr) {
			continue // the log moved, a twin of this command won, or a worker claimed the run: judge again
		}
		var runErr *store.RunError
		if errors.As(err, &runErr) {
			return s.rejected(c, st.status(), &RejectError{Code: contract.CodeInvalidState, Message: runErr.Err.Error()}), nil
		}
		if err != nil {
			return nil, fmt.Errorf("command %s: append: %w", c.CommandID, err)
		}
		return res, nil
	}
	res := s.rejected(c, status, &RejectError{Code: contract.CodeCommandExecutionFailed, Retryable: true,
		Message: "the session kept changing while the command was applied; send it again"})
	res.Outcome = "failed" // it was accepted by the policy but could not be applied
	return res, nil
}

// storedResult returns the stored result for the key as a duplicate, or nil.
func (s *Service) storedResult(ctx context.Context, sid, key string) (*contract.CommandResult, error) {
	b, err := s.st.CommandResult(ctx, sid, key)
	if errors.Is(err, store.ErrCommandNotFound) || errors.Is(err, store.ErrSessionNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load command result: %w", err)
	}
	var res contract.CommandResult
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("decode stored command result: %w", err)
	}
	res.Outcome = "duplicate"
	return &res, nil
}

// store keeps an accepted result; if a twin stored one first, that one is the answer.
func (s *Service) store(ctx context.Context, sid string, c *contract.Command, res *contract.CommandResult) (*contract.CommandResult, error) {
	b, err := contract.Marshal(res)
	if err != nil {
		return nil, err
	}
	stored, existed, err := s.st.PutCommandResult(ctx, sid, c.IdempotencyKey, b)
	if err != nil {
		return nil, fmt.Errorf("store command result: %w", err)
	}
	if !existed {
		return res, nil
	}
	var prev contract.CommandResult
	if err := json.Unmarshal(stored, &prev); err != nil {
		return nil, err
	}
	prev.Outcome = "duplicate"
	return &prev, nil
}

// resultFromLog rebuilds the result of a command whose events are already in the log.
func (s *Service) resultFromLog(ctx context.Context, st *state, c *contract.Command) (*contract.CommandResult, error) {
	var appended []store.AppendResult
	runID := c.RunID
	termination := ""
	for n := 0; ; n++ {
		ev, err := s.st.EventByIdempotencyKey(ctx, st.sess.Record.SessionID, commandEventKey(st.sess.Record.SessionID, c.IdempotencyKey, n))
		if errors.Is(err, store.ErrEventNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		appended = append(appended, store.AppendResult{EventID: ev.EventID, Sequence: ev.Sequence})
		if ev.EventType == "status" && ev.RunID != "" {
			runID = ev.RunID
			if c.CommandType == "stop" {
				termination = "requested"
			}
		}
	}
	if len(appended) == 0 {
		return nil, nil
	}
	sid := st.sess.Record.SessionID
	res := s.accepted(c, sid, runID, termination, appended, s.currentStatus(ctx, sid))
	res, err := s.store(ctx, sid, c, res)
	if err != nil {
		return nil, err
	}
	res.Outcome = "duplicate"
	return res, nil
}

func (s *Service) timestamp() string {
	return contract.FormatTime(s.now())
}

// accepted builds the result of an accepted command that appended these events and left the
// session's current run in status.
func (s *Service) accepted(c *contract.Command, sid, runID, termination string, appended []store.AppendResult, status string) *contract.CommandResult {
	res := &contract.CommandResult{Contract: "AgentSessionCommandResult", CommandID: c.CommandID, SessionID: sid,
		RunID: runID, IdempotencyKey: c.IdempotencyKey, Outcome: "accepted", SessionStatus: status,
		ResultEventIDs: []string{}, OccurredAt: s.timestamp()}
	for _, a := range appended {
		res.ResultEventIDs = append(res.ResultEventIDs, a.EventID)
		seq := a.Sequence
		res.AcceptedSequence = &seq
	}
	if termination == "requested" && res.SessionStatus == contract.RunStatusStopping {
		res.Termination = termination
	}
	return res
}

// currentStatus is the status of the session's current run, StatusIdle before the first.
func (s *Service) currentStatus(ctx context.Context, sid string) string {
	if runs, err := s.st.Runs(ctx, sid); err == nil && len(runs) > 0 {
		return contract.CurrentRun(runs).Status
	}
	return StatusIdle
}

func (s *Service) rejected(c *contract.Command, status string, e *RejectError) *contract.CommandResult {
	return &contract.CommandResult{Contract: "AgentSessionCommandResult", CommandID: c.CommandID, SessionID: c.SessionID,
		RunID: c.RunID, IdempotencyKey: c.IdempotencyKey, Outcome: "rejected", SessionStatus: status,
		ResultEventIDs: []string{}, Error: &contract.CommandError{Code: e.Code, Message: e.Message, Retryable: e.Retryable},
		OccurredAt: s.timestamp()}
}

// decide judges a command against the session's state. It returns the events to append, the
// run the result is about, and the termination for a stop; or a rejection.
func (s *Service) decide(ctx context.Context, st *state, c *contract.Command) (events []contract.Event, runID, termination string, rej *RejectError) {
	p, _ := contract.PolicyOf(c.CommandType)
	if p.Capability != "" && !st.sess.Snapshot.Capabilities.Has(p.Capability) {
		return nil, "", "", &RejectError{Code: contract.CodeCapabilityUnavailable, Message: fmt.Sprintf("the session's snapshot lacks the %q capability that %s needs", p.Capability, c.CommandType),
			Remedy: Remedy{Kind: EnableCapability, Capability: p.Capability}}
	}
	target := st.run(c.RunID)
	if p.NeedsRunID && target == nil {
		if p.NeedsActiveRun && (st.current == nil || contract.IsTerminal(st.current.Status)) {
			return nil, "", "", reject(contract.CodeActiveRunNotFound, "%s needs an active run and the session has none", c.CommandType)
		}
		return nil, "", "", reject(contract.CodeRunNotFound, "run %q does not exist in session %q", c.RunID, c.SessionID)
	}
	if p.NeedsActiveRun && contract.IsTerminal(target.Status) {
		return nil, "", "", reject(contract.CodeRunAlreadyFinished, "run %q is already %s", target.RunID, target.Status)
	}

	now := s.timestamp()
	n := 0
	newEvent := func(eventType, runID, sourceMessageID string, payload contract.Payload) {
		key := commandEventKey(c.SessionID, c.IdempotencyKey, n)
		n++
		events = append(events, contract.Event{Contract: "AgentSessionEvent", EventID: key, SessionID: c.SessionID,
			RunID: runID, SourceMessageID: sourceMessageID, IdempotencyKey: key, OccurredAt: now,
			EventType: eventType, Payload: payload})
	}
	newRunID := "run-" + strings.TrimSuffix(strings.TrimPrefix(commandEventKey(c.SessionID, c.IdempotencyKey, 0), "cmd-"), "-0")

	// Checks on what the command points at, before the status and sequence rules, so that
	// the more specific answer wins (a resolved approval says so, not "wrong status").
	switch pl := c.Payload.(type) {
	case *contract.ApprovalCommand:
		a, ok := st.fold.approval(pl.ApprovalID)
		if !ok {
			return nil, "", "", reject(contract.CodeApprovalNotFound, "approval %q was never requested in this session", pl.ApprovalID)
		}
		if a.Status != "requested" {
			return nil, "", "", reject(contract.CodeApprovalAlreadyResolved, "approval %q is already %s", pl.ApprovalID, a.Status)
		}
		a.Status = pl.Decision
		newEvent("approval", target.RunID, target.SourceMessageID, &a)
		// The approval event has no member for the person's reason: it is the detail of
		// the status the decision moves the run to, so that the log keeps it.
		running := &contract.StatusPayload{Status: contract.RunStatusRunning, StartedAt: target.StartedAt}
		if strings.TrimSpace(pl.Reason) != "" {
			running.Detail = &pl.Reason
		}
		newEvent("status", target.RunID, target.SourceMessageID, running)
		runID = target.RunID
	case *contract.RetryCommand:
		ev, err := s.st.EventByID(ctx, c.SessionID, pl.SourceEventID)
		if err != nil {
			return nil, "", "", reject(contract.CodeTargetEventNotFound, "event %q does not exist in session %q", pl.SourceEventID, c.SessionID)
		}
		if !retryable(ev, target) {
			return nil, "", "", reject(contract.CodeTargetEventNotRetryable, "event %q is neither an error event with retryable true nor run %q's failed status", pl.SourceEventID, target.RunID)
		}
		newEvent("status", newRunID, target.SourceMessageID, &contract.StatusPayload{Status: contract.RunStatusQueued})
		runID = newRunID
	case *contract.ResumeCommand:
		if pl.ResumeEventID != "" {
			if _, err := s.st.EventByID(ctx, c.SessionID, pl.ResumeEventID); err != nil {
				return nil, "", "", reject(contract.CodeTargetEventNotFound, "resume event %q does not exist in session %q", pl.ResumeEventID, c.SessionID)
			}
		}
		newEvent("status", newRunID, target.SourceMessageID, &contract.StatusPayload{Status: contract.RunStatusQueued})
		runID = newRunID
	case *contract.RetrySummaryCommand:
		ev, err := s.st.EventByID(ctx, c.SessionID, pl.SourceEventID)
		if err != nil {
			return nil, "", "", reject(contract.CodeTargetEventNotFound, "event %q does not exist in session %q", pl.SourceEventID, c.SessionID)
		}
		sum, ok := failedSummary(ev, pl.SourceRunID, st.fold)
		if !ok {
			return nil, "", "", reject(contract.CodeTargetEventNotRetryable, "event %q is not a failed summary of run %q", pl.SourceEventID, pl.SourceRunID)
		}
		sum.Status = "generating"
		newEvent("summary", pl.SourceRunID, target.SourceMessageID, &sum)
		runID = pl.SourceRunID
	case *contract.SteerCommand:
		newEvent("steer", target.RunID, target.SourceMessageID, &contract.SteerPayload{CommandID: c.CommandID, TargetRunID: target.RunID, Text: pl.Text, Status: "accepted"})
		runID = target.RunID
	case *contract.StopCommand:
		sp := &contract.StatusPayload{Status: contract.RunStatusStopping, StoppingRequestedAt: now}
		if pl.Reason != "" {
			sp.Detail = &pl.Reason
		}
		newEvent("status", target.RunID, target.SourceMessageID, sp)
		runID, termination = target.RunID, "requested"
		if target.Status == contract.RunStatusQueued {
			// A queued run nobody holds alive has nobody to confirm the stop, and the runs
			// queued behind it would wait for good: the server stops it now, as an interrupt
			// does (docs/runtime.md, "Where features meet").
			held, err := s.heldLease(ctx, c.SessionID, target.RunID)
			if err != nil {
				return nil, "", "", reject(contract.CodeInternal, "read the lease of run %q: %v", target.RunID, err)
			}
			if held == nil || !held.ExpiresAt.After(s.now()) {
				// Written only if the run is still held by nobody (or by the same expired
				// lease): a claim between this read and the append makes the append refuse,
				// and the command is judged again, against the run now held.
				st.fence = &store.Fence{}
				if held != nil {
					st.fence = &store.Fence{Lease: &store.LeaseRef{LeaseID: held.LeaseID, Token: held.Token}, ExpiredBy: s.now()}
				}
				d := json.Number("0")
				stopped := &contract.StatusPayload{Status: contract.RunStatusStopped, StoppedAt: now, DurationMs: &d, Detail: sp.Detail}
				newEvent("status", target.RunID, target.SourceMessageID, stopped)
			}
		}
	}

	status := st.status()
	if p.NeedsActiveRun {
		status = target.Status
	}
	if p.AllowedStatuses != nil && !slices.Contains(p.AllowedStatuses, status) {
		return nil, "", "", reject(contract.CodeInvalidState, "%s is allowed when the run is %s; it is %s", c.CommandType, strings.Join(p.AllowedStatuses, " or "), status)
	}
	if p.Sequence != contract.SequenceTargetRun && c.ExpectedSequence != st.last {
		return nil, "", "", &RejectError{Code: contract.CodeSequenceConflict, Retryable: true,
			Message: fmt.Sprintf("expectedSequence is %d but the log ends at %d; read the new events and send a new command with expectedSequence %d", c.ExpectedSequence, st.last, st.last)}
	}
	return events, runID, termination, nil
}

// retryable reports whether ev can be retried: an error event with retryable true, or the
// terminal failed status event of the run.
func retryable(ev store.StoredEvent, run *contract.Run) bool {
	var e contract.Event
	if json.Unmarshal(ev.Data, &e) != nil {
		return false
	}
	switch p := e.Payload.(type) {
	case *contract.ErrorPayload:
		return p.Retryable
	case *contract.StatusPayload:
		return e.RunID == run.RunID && p.Status == contract.RunStatusFailed
	}
	return false
}

// failedSummary returns the summary behind ev if it is a summary of runID whose latest state is
// failed.
func failedSummary(ev store.StoredEvent, runID string, f *Fold) (contract.SummaryPayload, bool) {
	var e contract.Event
	if json.Unmarshal(ev.Data, &e) != nil {
		return contract.SummaryPayload{}, false
	}
	p, ok := e.Payload.(*contract.SummaryPayload)
	if !ok || p.RunID != runID {
		return contract.SummaryPayload{}, false
	}
	latest, ok := f.summary(p.SummaryID)
	return latest, ok && latest.Status == "failed"
}

// waitStopped waits for the stopped run to reach a terminal status.
func (s *Service) waitStopped(ctx context.Context, res *contract.CommandResult, wait time.Duration) (*contract.CommandResult, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		run, err := s.st.Run(ctx, res.SessionID, res.RunID)
		if err != nil {
			return nil, fmt.Errorf("wait for stop: %w", err)
		}
		if contract.IsTerminal(run.Status) {
			out := *res
			out.SessionStatus = run.Status
			out.Termination = "confirmed"
			if runs, err := s.st.Runs(ctx, res.SessionID); err == nil && len(runs) > 0 {
				out.SessionStatus = contract.CurrentRun(runs).Status
				if !contract.IsTerminal(out.SessionStatus) {
					out.Termination = "" // a newer run already started; say nothing about it
				}
			}
			return &out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			out := *res
			out.Outcome = "failed"
			out.SessionStatus = run.Status
			out.Termination = ""
			if run.Status == contract.RunStatusStopping {
				out.Termination = "requested"
			}
			out.Error = &contract.CommandError{Code: contract.CodeStopTimeout, Retryable: true,
				Message: fmt.Sprintf("run %q did not stop within %s; it is %s. Send the same command again to keep waiting", res.RunID, wait, run.Status)}
			return &out, nil
		case <-tick.C:
		}
	}
}
