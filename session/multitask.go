package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// AppendParams are what an append carries besides its events.
type AppendParams struct {
	// Expected, when not nil, is the sequence the log must end at for the append to go ahead.
	Expected *int64
	// Lease is the lease the runtime holds (nil: none).
	Lease *store.LeaseRef
	// Multitask is the strategy for a run the batch queues while another run of the session
	// is active (contract.MultitaskStrategies); "" takes the session's default
	// (Lifecycle.Multitask), and a session without one rejects.
	Multitask string
	// Origin is who had the events stored, for the count of stored events (default
	// OriginAPI).
	Origin Origin
}

// origin is p.Origin, OriginAPI when not set.
func (p AppendParams) origin() Origin {
	if p.Origin == "" {
		return OriginAPI
	}
	return p.Origin
}

// Interruption is the stop an append with the interrupt strategy added for the run that was
// active: the events it appended before the request's own.
type Interruption struct {
	RunID   string
	Results []store.AppendResult
}

// AppendWith appends events as Append does, with the multitask strategy p.Multitask: reject (a
// new run while another is active is refused, *store.RunError wrapping
// *contract.ActiveRunError), enqueue (a run created queued waits behind the active one and is
// claimable once it has ended) or interrupt (as enqueue, and the current run is asked to stop
// in the same append, before the request's events: its status becomes stopping, as a stop
// command's does; a queued run that no worker holds is stopped at once, stopping then
// stopped, since no runtime is there to confirm). The strategy matters only for a batch that
// creates a run while another is active. It returns ErrInvalidMultitask for an unknown
// strategy.
func (s *Service) AppendWith(ctx context.Context, id string, events []*contract.EncodedEvent, p AppendParams) (*Appended, error) {
	opts := store.AppendOptions{Heartbeat: s.now(), ExpectedSequence: p.Expected, Fence: &store.Fence{Lease: p.Lease}}
	strategy := p.Multitask
	if strategy == "" && queuesRun(events) {
		lc, err := s.st.Lifecycle(ctx, id)
		if err != nil {
			return nil, err
		}
		strategy = lc.Multitask
	}
	if strategy != "" && !contract.ValidMultitask(strategy) {
		return nil, fmt.Errorf("%w: %q", ErrInvalidMultitask, strategy)
	}
	switch strategy {
	case contract.MultitaskEnqueue:
		opts.Enqueue = true
	case contract.MultitaskInterrupt:
		opts.Enqueue = true
		if queuesRun(events) {
			return s.interrupt(ctx, p.origin(), id, events, opts)
		}
	}
	res, err := s.append(ctx, p.origin(), id, events, opts)
	if err != nil {
		return nil, err
	}
	return s.appended(ctx, id, res), nil
}

// ErrInvalidMultitask is returned for a multitask strategy that is not one of
// contract.MultitaskStrategies.
var ErrInvalidMultitask = errors.New("multitask must be reject, enqueue or interrupt")

// queuesRun reports whether the batch has a run status event with status queued.
func queuesRun(events []*contract.EncodedEvent) bool {
	for _, ev := range events {
		if ev.RunStatus != nil && ev.RunStatus.Status == contract.RunStatusQueued {
			return true
		}
	}
	return false
}

// interrupt appends events after the stop of the session's current run, when it is active and
// not already stopping. The store decides inside the appending transaction
// (store.AppendOptions.Interrupt), from the runs as they stand there: racing interrupts each
// see the stops of those that committed before them (a run gets one stopping, and a later
// interrupt finds it stopping or stops the run the earlier one queued), and a retried request
// whose every event is already stored is answered from the log and stops nothing, whatever run
// is current by then.
func (s *Service) interrupt(ctx context.Context, origin Origin, id string, events []*contract.EncodedEvent, opts store.AppendOptions) (*Appended, error) {
	var (
		stopped string                   // the run the last call stopped (the store may plan more than once)
		stopEvs []*contract.EncodedEvent // the stop events of the last call
	)
	opts.Interrupt = func(cur *contract.Run, held *store.Lease) ([]*contract.EncodedEvent, error) {
		stops, err := s.interruptEvents(id, cur, held, events)
		stopped, stopEvs = "", stops
		if len(stops) > 0 {
			stopped = cur.RunID
		}
		return stops, err
	}
	if opts.Now.IsZero() {
		opts.Now = s.now()
	}
	res, err := s.st.Append(ctx, id, events, opts)
	if err != nil {
		return nil, err
	}
	n := len(res) - len(events) // the stops the store put before the request's events
	s.count(origin, len(res), func(i int) string {
		switch {
		case res[i].Duplicate:
			return "" // already stored: not added again
		case i < n:
			return stopEvs[i].EventType
		}
		return events[i-n].EventType
	})
	out := s.appended(ctx, id, res[n:])
	if n > 0 {
		out.Interrupted = &Interruption{RunID: stopped, Results: res[:n]}
		out.Added = true
		out.LastSequence = max(out.LastSequence, res[n-1].Sequence)
	}
	return out, nil
}

// interruptEvents builds the stop of run (the session's current run, held the lease on it)
// for an interrupting append of events: none when there is no run, it is not active or already
// stopping, or the batch itself names it. A queued run whose lease is not alive is also
// stopped (nobody works on it to confirm). Their ids and keys derive from the run and the
// batch's first key.
func (s *Service) interruptEvents(id string, run *contract.Run, held *store.Lease, events []*contract.EncodedEvent) ([]*contract.EncodedEvent, error) {
	if run == nil || contract.IsTerminal(run.Status) || run.Status == contract.RunStatusStopping {
		return nil, nil
	}
	for _, ev := range events {
		if ev.RunID == run.RunID {
			return nil, nil
		}
	}
	ts := s.stamp()
	detail := "interrupted: a new run was queued with the multitask strategy interrupt"
	subject := run.RunID + "\x00" + events[0].IdempotencyKey
	stoppingID := lifecycleKey(id, "interrupt", subject, 0)
	evs := []contract.Event{{Contract: "AgentSessionEvent", EventID: stoppingID, SessionID: id, RunID: run.RunID, SourceMessageID: run.SourceMessageID,
		IdempotencyKey: stoppingID, OccurredAt: ts, EventType: "status",
		Payload: &contract.StatusPayload{Status: contract.RunStatusStopping, StoppingRequestedAt: ts, Detail: &detail}}}
	if run.Status == contract.RunStatusQueued && (held == nil || !held.ExpiresAt.After(s.now())) {
		// Nobody works on it to confirm the stop: the server does, now.
		stoppedID := lifecycleKey(id, "interrupt", subject, 1)
		d := json.Number("0")
		evs = append(evs, contract.Event{Contract: "AgentSessionEvent", EventID: stoppedID, SessionID: id, RunID: run.RunID, SourceMessageID: run.SourceMessageID,
			IdempotencyKey: stoppedID, OccurredAt: ts, EventType: "status",
			Payload: &contract.StatusPayload{Status: contract.RunStatusStopped, StoppedAt: ts, DurationMs: &d, Detail: &detail}})
	}
	out := make([]*contract.EncodedEvent, len(evs))
	for i := range evs {
		enc, err := contract.EncodeEvent(&evs[i])
		if err != nil {
			return nil, fmt.Errorf("interrupt event %d is invalid: %w", i, err)
		}
		out[i] = enc
	}
	return out, nil
}
