package session

import (
	"context"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// Origin says who had events stored: the runtime or a client through the API, or the server
// itself on someone's behalf. It labels the count of stored events (the server's
// sessiond_events_appended_total); the set is closed, so the label stays bounded.
type Origin string

// The origins of stored events.
const (
	// OriginAPI is POST /v1/sessions/{id}/events (the runtime, a client, sessiond import).
	OriginAPI Origin = "api"
	// OriginCommand is a command's effect (steer, stop, approve, fork, …).
	OriginCommand Origin = "command"
	// OriginBridge is a protocol bridge's request (the AI SDK chat POST, AG-UI).
	OriginBridge Origin = "bridge"
	// OriginContinuation is the events a continuation copies into its new session.
	OriginContinuation Origin = "continuation"
	// OriginRestore is an archive's log imported by a restore.
	OriginRestore Origin = "restore"
	// OriginLeaseExpiry is the lease expirer's failed or requeued run, and the queue timeout's
	// failed run.
	OriginLeaseExpiry Origin = "lease-expiry"
	// OriginSweep is the sweep's failed run of a silent session (HEARTBEAT_LOST).
	OriginSweep Origin = "sweep"
)

// Origins lists every Origin, for a metric's zero series.
var Origins = []Origin{OriginAPI, OriginCommand, OriginBridge, OriginContinuation, OriginRestore, OriginLeaseExpiry, OriginSweep}

// StoredFunc is told of events the service had stored: n events of type kind, from origin.
// It is called once per run of events of one type in a batch, after the commit; it must be
// quick and must not call the service.
type StoredFunc func(origin Origin, kind string, n int)

// OnStored sets the function told of every event the service stores (appends and restores):
// the one place events are counted. Set it before the service is used.
func (s *Service) OnStored(fn StoredFunc) { s.stored = fn }

// append stores events with opts: every append of the service passes here, so that the
// events it adds are counted once, by origin.
func (s *Service) append(ctx context.Context, origin Origin, id string, events []*contract.EncodedEvent, opts store.AppendOptions) ([]store.AppendResult, error) {
	if opts.Now.IsZero() {
		opts.Now = s.now() // the store keeps it as the time a run becomes claimable
	}
	res, err := s.st.Append(ctx, id, events, opts)
	if err == nil {
		s.count(origin, len(res), func(i int) string {
			if res[i].Duplicate {
				return "" // already stored: not added again
			}
			return events[i].EventType
		})
	}
	return res, err
}

// importSession imports a whole log (a restore) and counts its events, as append does.
func (s *Service) importSession(ctx context.Context, origin Origin, imp *store.Import) error {
	if err := s.st.ImportSession(ctx, imp); err != nil {
		return err
	}
	s.count(origin, len(imp.Events), func(i int) string { return imp.Events[i].EventType })
	return nil
}

// count tells the StoredFunc of n events whose types kindOf gives ("" for one not stored),
// once per run of one type: a batch of 100 messages is one call, not 100.
func (s *Service) count(origin Origin, n int, kindOf func(i int) string) {
	if s.stored == nil {
		return
	}
	kind, run := "", 0
	for i := range n {
		k := kindOf(i)
		if k == "" {
			continue
		}
		if k != kind {
			if run > 0 {
				s.stored(origin, kind, run)
			}
			kind, run = k, 0
		}
		run++
	}
	if run > 0 {
		s.stored(origin, kind, run)
	}
}
