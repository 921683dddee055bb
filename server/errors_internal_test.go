package server

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
)

// TestAPIErrorKeepsTheCode: the one adapter answers every error that carries a code
// (contract.CodedError) with that code, wrapped with context or not, and an error without one
// as INTERNAL.
func TestAPIErrorKeepsTheCode(t *testing.T) {
	coded := []contract.CodedError{
		store.ErrSessionNotFound.(contract.CodedError), store.ErrSessionExists.(contract.CodedError),
		store.ErrRunNotFound.(contract.CodedError), store.ErrClosed.(contract.CodedError),
		&store.SequenceConflictError{SessionID: "S", Expected: 1, Actual: 2},
		&store.ConflictError{Reason: store.ConflictIdempotencyKey}, &store.ConflictError{Reason: store.ConflictEventID},
		&store.LimitError{What: "batch"}, &store.SessionMismatchError{EventSID: "T"},
		&store.RunError{Err: &contract.ActiveRunError{Status: contract.RunStatusQueued}}, &store.RunError{Err: errors.New("no such transition")},
		&store.LeaseError{Reason: store.LeaseRequired}, &store.LeaseError{Reason: store.LeaseLost, Given: &store.LeaseRef{}},
		&store.UnavailableError{Why: store.Full, Err: errors.New("disk")}, &store.UnavailableError{Why: store.Unreachable, Err: errors.New("net")},
		&store.UnavailableError{Why: store.CommitUnknown, Err: errors.New("lost")}, &store.UnavailableError{Why: store.Unwritable, Err: errors.New("sync")},
		&session.RejectError{Code: contract.CodeArchiveNotFound, Message: "no such archive"},
		&session.InvalidError{What: "patch", Problems: []contract.Problem{{Layer: contract.LayerRule}}},
		&session.InvalidError{What: "patch", Problems: []contract.Problem{{Layer: contract.LayerJSON}}},
		api.Errorf(contract.CodeOverloaded, "busy"),
	}
	for _, ce := range coded {
		for _, err := range []error{ce, fmt.Errorf("while testing: %w", ce)} {
			if got := apiError(err, "S"); got.Code != ce.ErrorCode() || got.Message == "" {
				t.Errorf("apiError(%T %v) = %s %q; want code %s", ce, err, got.Code, got.Message, ce.ErrorCode())
			}
		}
	}
	if got := apiError(errors.New("disk on fire"), "S"); got.Code != contract.CodeInternal {
		t.Errorf("an error without a code = %s; want INTERNAL", got.Code)
	}
}
