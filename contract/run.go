package contract

import (
	"encoding/json"
	"fmt"
)

// RunStatusFields are the fields of a run status event (a status event with runId) that the
// run projection needs.
type RunStatusFields struct {
	RunID               string
	SourceMessageID     string
	Status              string
	OccurredAt          string
	StartedAt           string
	StoppingRequestedAt string
	StoppedAt           string
	CompletedAt         string
	FailedAt            string
	DurationMs          string // the JSON number as sent; "" when absent
}

// runTransitions is the run status table (docs/reference.md#runs); a status may always be
// re-applied to itself.
var runTransitions = map[string][]string{
	RunStatusQueued:          {RunStatusRunning, RunStatusStopping, RunStatusFailed},
	RunStatusRunning:         {RunStatusWaitingApproval, RunStatusStopping, RunStatusCompleted, RunStatusFailed},
	RunStatusWaitingApproval: {RunStatusRunning, RunStatusStopping, RunStatusFailed},
	RunStatusStopping:        {RunStatusStopped, RunStatusCompleted, RunStatusFailed},
}

// CanTransition reports whether a run may go from one status to another.
func CanTransition(from, to string) bool {
	if from == to {
		return true
	}
	for _, s := range runTransitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// TransitionError is returned by [ApplyRunStatus] for a status change the table does not allow.
type TransitionError struct {
	RunID, From, To string
}

// Error says which change was refused and which are allowed.
func (e *TransitionError) Error() string {
	allowed := runTransitions[e.From]
	if len(allowed) == 0 {
		return fmt.Sprintf("run %q is %s, which is final; it cannot become %s", e.RunID, e.From, e.To)
	}
	return fmt.Sprintf("run %q cannot go from %s to %s (allowed: %v)", e.RunID, e.From, e.To, allowed)
}

// ApplyRunStatus folds one run status event into the run it belongs to. prev is the run as it
// stands, or nil when this event creates it. The result satisfies the run invariants:
// startedAt is the payload's startedAt when given, else the first event's occurredAt; entering
// stopping records stoppingRequestedAt; a terminal status records its timestamp and durationMs.
// It returns a *[TransitionError] when the change is not allowed, and an error when the event
// names another source message than the run's.
func ApplyRunStatus(prev *Run, sessionID string, f RunStatusFields) (*Run, error) {
	var r Run
	if prev == nil {
		r = Run{RunID: f.RunID, SessionID: sessionID, SourceMessageID: f.SourceMessageID, Status: f.Status, StartedAt: f.OccurredAt}
	} else {
		if !CanTransition(prev.Status, f.Status) {
			return nil, &TransitionError{RunID: f.RunID, From: prev.Status, To: f.Status}
		}
		if f.SourceMessageID != prev.SourceMessageID {
			return nil, fmt.Errorf("run %q was started by message %q; this event names %q", f.RunID, prev.SourceMessageID, f.SourceMessageID)
		}
		r = *prev
		r.Status = f.Status
	}
	if f.StartedAt != "" {
		r.StartedAt = f.StartedAt
	}
	switch f.Status {
	case RunStatusStopping:
		if r.StoppingRequestedAt == "" || f.StoppingRequestedAt != "" {
			r.StoppingRequestedAt = firstNonEmpty(f.StoppingRequestedAt, f.OccurredAt)
		}
	case RunStatusStopped:
		r.StoppedAt = f.StoppedAt
		if r.StoppingRequestedAt == "" {
			r.StoppingRequestedAt = firstNonEmpty(f.StoppingRequestedAt, f.StoppedAt)
		}
	case RunStatusCompleted:
		r.CompletedAt = f.CompletedAt
	case RunStatusFailed:
		r.FailedAt = f.FailedAt
	}
	if IsTerminal(f.Status) {
		d := json.Number(f.DurationMs)
		r.DurationMs = &d
	}
	return &r, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// The multitask strategies: what an append that queues a new run does while another run of
// the session is still active (a person's message arriving while the agent works).
const (
	// MultitaskReject refuses the new run (ActiveRunError): the default.
	MultitaskReject = "reject"
	// MultitaskEnqueue queues the new run behind the active one: it is claimable once every
	// run created before it has ended.
	MultitaskEnqueue = "enqueue"
	// MultitaskInterrupt asks the active run to stop (its status becomes stopping, as the stop
	// command does) in the same append, and queues the new run behind it.
	MultitaskInterrupt = "interrupt"
)

// MultitaskStrategies lists the strategies, the default first.
var MultitaskStrategies = []string{MultitaskReject, MultitaskEnqueue, MultitaskInterrupt}

// ValidMultitask reports whether s is one of MultitaskStrategies ("" is not: a caller that
// lets it take a default checks for it first).
func ValidMultitask(s string) bool {
	return s == MultitaskReject || s == MultitaskEnqueue || s == MultitaskInterrupt
}

// ActiveRunError is returned when a run status event would create a new run while another run
// of the same session is still active: a session has one active run at a time, except that a
// run created queued may wait behind it when the append says so (CheckNewRun's enqueue).
type ActiveRunError struct {
	RunID        string // the run the event would create
	Status       string // the status the event would create it with
	ActiveRunID  string // the run that is still active
	ActiveStatus string
}

func (e *ActiveRunError) Error() string {
	return fmt.Sprintf("run %q cannot start: run %q is still %s; a session has one active run at a time, so stop it or let it finish first", e.RunID, e.ActiveRunID, e.ActiveStatus)
}

// CheckNewRun applies the one-active-run rule to a run status event that creates a run:
// active is the session's earliest created active run (status not terminal), or nil when
// there is none. With enqueue (the strategies enqueue and interrupt) a run created queued may
// wait behind it; any other new run while one is active is refused.
func CheckNewRun(active *Run, f RunStatusFields, enqueue bool) error {
	if active != nil && active.RunID != f.RunID && !(enqueue && f.Status == RunStatusQueued) {
		return &ActiveRunError{RunID: f.RunID, Status: f.Status, ActiveRunID: active.RunID, ActiveStatus: active.Status}
	}
	return nil
}

// CurrentRun returns the run a session's status, views and commands are about, among its runs
// in creation order: the earliest created run that is still active (runs queued behind it
// wait their turn), else the most recent run; nil when there is none.
func CurrentRun(runs []Run) *Run {
	for i := range runs {
		if !IsTerminal(runs[i].Status) {
			return &runs[i]
		}
	}
	if len(runs) == 0 {
		return nil
	}
	return &runs[len(runs)-1]
}
