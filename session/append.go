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
	// Interrupted, with the multitask strategy interrupt, is the stop the append added for the
	// run that was active, before the request's events; nil when it stopped none.
	Interrupted *Interruption
}

// Append appends events from the session's runtime to its log, all or nothing. Every such
// append is also a heartbeat, recorded in the append's transaction. expected, when not nil,
// is the sequence the log must end at for the append to go ahead. lease is the lease the
// runtime holds (nil: none): a new event of a leased run is written only under the run's
// current lease (store.Fence). A run the batch queues while another is active is handled by
// the session's default multitask strategy (AppendWith). Errors are the store's
// (store.ErrSessionNotFound, *store.SequenceConflictError, *store.ConflictError,
// *store.LeaseError, …).
func (s *Service) Append(ctx context.Context, id string, events []*contract.EncodedEvent, expected *int64, lease *store.LeaseRef) (*Appended, error) {
	return s.AppendWith(ctx, id, events, AppendParams{Expected: expected, Lease: lease})
}

// appended is the outcome of an append that answered res.
func (s *Service) appended(ctx context.Context, id string, res []store.AppendResult) *Appended {
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
	return out
}
