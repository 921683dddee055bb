package session

import (
	"context"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// Appended is the outcome of an append: one result per event, in batch order, and the log's
// last sequence for the caller: where the append ended the log when it added events, else
// (only duplicates) wherever the log ends now (-1 for an empty log; -1 too when the log's end
// could not be read after a duplicate-only append).
type Appended struct {
	Results      []store.AppendResult
	LastSequence int64
	// Added is true when at least one event was new (not a duplicate).
	Added bool
}

// Append appends events from the session's runtime to its log, all or nothing. Every such
// append is also a heartbeat, recorded in the append's transaction. expected, when not nil,
// is the sequence the log must end at for the append to go ahead. lease is the lease the
// runtime holds (nil: none): a new event of a leased run is written only under the run's
// current lease (store.Fence). Errors are the store's (store.ErrSessionNotFound,
// *store.SequenceConflictError, *store.ConflictError, *store.LeaseError, …).
func (s *Service) Append(ctx context.Context, id string, events []*contract.EncodedEvent, expected *int64, lease *store.LeaseRef) (*Appended, error) {
	res, err := s.st.Append(ctx, id, events, store.AppendOptions{Heartbeat: s.now(), ExpectedSequence: expected, Fence: &store.Fence{Lease: lease}})
	if err != nil {
		return nil, err
	}
	out := &Appended{Results: res, LastSequence: -1}
	for _, a := range res {
		if !a.Duplicate {
			out.Added = true
			out.LastSequence = max(out.LastSequence, a.Sequence) // the log's end when this append committed
		}
	}
	if !out.Added {
		if last, err := s.st.LastSequence(ctx, id); err == nil {
			out.LastSequence = last
		}
	}
	return out, nil
}
