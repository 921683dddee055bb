package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/auth"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/wire"
)

// apiError is the one adapter from an error of the layers below (the domain, the store, the
// keyring) to the API's answer, for a request about session sessionID ("" when none). The
// code is the error's own (contract.CodedError: a refusal of the domain, of the store, or an
// api.Error); this edge adds what the client can do about it in the API's terms (a route, a
// header, a sessiond command: the domain's remedies are worded in remedies.go) and the
// structured facts of a conflict (Fields). An error with no code is the server's failure,
// INTERNAL, unless the store says it cannot serve the request now (unavailableError).
func apiError(err error, sessionID string) *api.Error {
	var (
		ae  *api.Error
		inv *session.InvalidError
		rej *session.RejectError
	)
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &inv):
		return validationError(inv.What, inv.Problems)
	case errors.As(err, &rej):
		return &api.Error{Code: rej.Code, Message: rej.Message + remedyText(sessionID, rej.Remedy)}
	case errors.Is(err, auth.ErrExpiredKey):
		return api.Errorf(contract.CodeUnauthenticated, "the credential expires now; ask for a new key")
	case errors.Is(err, session.ErrInvalidMultitask):
		// The handler checks ?multitask itself; this is a session default the store holds.
		return api.Errorf(contract.CodeMalformed, "%v", err)
	case errors.Is(err, store.ErrClosed), errors.Is(err, context.Canceled):
		return api.Errorf(contract.CodeUnavailable, "the store is closing; retry the request (appends are idempotent by key)")
	}
	var ce contract.CodedError
	if !errors.As(err, &ce) {
		if e := unavailableError(store.ClassifyOS(err)); e != nil {
			return e
		}
		return api.Errorf(contract.CodeInternal, "store: %v", err)
	}
	e := &api.Error{Code: ce.ErrorCode(), Message: ce.Error()}
	switch c := ce.(type) {
	case *store.SequenceConflictError:
		e.Fields = map[string]any{"expected": c.Expected, "actual": c.Actual}
	case *store.ConflictError:
		e.Fields = map[string]any{"index": c.Index, "existingSequence": c.Existing}
	case *store.LimitError:
		e.Message += "; split the batch or shrink the event"
	case *store.SessionMismatchError:
		e.Message += "; send it to /v1/sessions/" + c.EventSID + "/events"
	case *store.RunError:
		var active *contract.ActiveRunError
		if errors.As(c, &active) && active.Status == contract.RunStatusQueued {
			e.Message += fmt.Sprintf("; or queue it behind: append again with ?multitask=enqueue (or ?multitask=interrupt to stop run %q first)", active.ActiveRunID)
		}
	case *store.LeaseError:
		if c.Reason == store.LeaseRequired {
			e.Message += "; send the " + wire.LeaseHeader + " header with the lease the claim answered (lease.header), or claim the run first"
		} else {
			e.Message += "; stop working on the run and claim again (POST /v1/runs/claim)"
		}
	case *store.UnavailableError:
		return unavailableError(err)
	default:
		switch {
		case errors.Is(err, store.ErrSessionNotFound):
			if probs := contract.SessionIDProblems(sessionID); len(probs) > 0 {
				return api.Errorf(e.Code, "session %q does not exist, and no new session can take this id (%s): %s", sessionID, probs[0].Rule, contract.SessionIDRule)
			}
			return api.Errorf(e.Code, "session %q does not exist; create it with POST /v1/sessions", sessionID)
		case errors.Is(err, store.ErrSessionExists):
			return api.Errorf(e.Code, "session %q already exists; pick another session_id or omit it to have one generated", sessionID)
		}
		e.Message = err.Error()
	}
	return e
}

// unavailableError maps a store error classified as unavailable (store.UnavailableError) to
// its availability code, with a message that says what to do; nil for any other error. It is
// the one place that decides these answers, for every route, readiness and the final block of
// a stream included.
func unavailableError(err error) *api.Error {
	var ue *store.UnavailableError
	if !errors.As(err, &ue) {
		return nil
	}
	code := ue.ErrorCode()
	switch code {
	case contract.CodeStoreFull:
		return api.Errorf(code, "the store's disk is full (%v); nothing was written: an operator must free space, then retry the request unchanged", err)
	case contract.CodeStoreUnavailable:
		return api.Errorf(code, "the database cannot be reached now (%v); retry the request unchanged (appends are idempotent by key)", err)
	case contract.CodeCommitUnknown:
		return api.Errorf(code, "the write may or may not have committed (%v); retry it unchanged, with the same idempotency keys: a committed event comes back as a duplicate", err)
	}
	return api.Errorf(code, "the store refuses writes (%v); retry on another instance, or after sessiond restarts", err)
}
