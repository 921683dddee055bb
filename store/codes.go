package store

import (
	"errors"

	"github.com/sessiond/sessiond/contract"
)

// The error codes of the store's errors (contract.CodedError): what a client is told when the
// store refuses its request. The HTTP API adds what to do about each (server/errors.go).

// codedError is a sentinel error with its code.
type codedError struct {
	code contract.ErrorCode
	msg  string
}

func (e *codedError) Error() string { return e.msg }

// ErrorCode is the code of the sentinel.
func (e *codedError) ErrorCode() contract.ErrorCode { return e.code }

// ErrorCode is SEQUENCE_CONFLICT.
func (e *SequenceConflictError) ErrorCode() contract.ErrorCode { return contract.CodeSequenceConflict }

// ErrorCode is EVENT_ID_CONFLICT for an event id used under another key, else
// IDEMPOTENCY_CONFLICT.
func (e *ConflictError) ErrorCode() contract.ErrorCode {
	if e.Reason == ConflictEventID {
		return contract.CodeEventIDConflict
	}
	return contract.CodeIdempotencyConflict
}

// ErrorCode is TOO_LARGE.
func (e *LimitError) ErrorCode() contract.ErrorCode { return contract.CodeTooLarge }

// ErrorCode is SESSION_MISMATCH.
func (e *SessionMismatchError) ErrorCode() contract.ErrorCode { return contract.CodeSessionMismatch }

// ErrorCode is INVALID_SESSION_STATE for a run refused because another run is active
// (*contract.ActiveRunError), else INVALID_RUN_TRANSITION.
func (e *RunError) ErrorCode() contract.ErrorCode {
	var active *contract.ActiveRunError
	if errors.As(e.Err, &active) {
		return contract.CodeInvalidState
	}
	return contract.CodeInvalidTransition
}

// ErrorCode is LEASE_REQUIRED or LEASE_LOST, after the reason.
func (e *LeaseError) ErrorCode() contract.ErrorCode {
	if e.Reason == LeaseRequired {
		return contract.CodeLeaseRequired
	}
	return contract.CodeLeaseLost
}

// ErrorCode is the availability code of why the store cannot serve the request: STORE_FULL,
// STORE_UNAVAILABLE, COMMIT_OUTCOME_UNKNOWN or STORE_UNWRITABLE.
func (e *UnavailableError) ErrorCode() contract.ErrorCode {
	switch e.Why {
	case Full:
		return contract.CodeStoreFull
	case Unreachable:
		return contract.CodeStoreUnavailable
	case CommitUnknown:
		return contract.CodeCommitUnknown
	}
	return contract.CodeStoreUnwritable
}
