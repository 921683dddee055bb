package session

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// PatchRequest is a change to a session record and snapshot made by a client (PATCH
// /v1/sessions/{id}). Absent fields are left as they are; a present null clears a nullable
// field. It has the fields of the API's PATCH body, in the same order, so that one converts
// to the other.
type PatchRequest struct {
	// Snapshot, when not nil, replaces the whole snapshot (already checked against the
	// contract's snapshot schema by whoever decoded it).
	Snapshot *contract.Snapshot
	// Status, when not nil, is the record status to change to; the change must be one
	// PATCH may make ([contract.CanPatchStatus]).
	Status           *string
	Phase            contract.Nullable[string]
	Activity         contract.Nullable[string]
	CurrentRunID     contract.Nullable[string]
	CurrentTaskID    contract.Nullable[string]
	CurrentMissionID contract.Nullable[string]
	WorktreePath     contract.Nullable[string]
	// Multitask, when not nil, is the session's new default multitask strategy
	// (contract.MultitaskStrategies), kept in its lifecycle state.
	Multitask *string
	// UpdatedByGate says who makes the change: owner, handoff, user or mission.
	UpdatedByGate string
}

// gates are the values of updated_by_gate a client may give.
var gates = []string{"owner", "handoff", "user", "mission"}

// Patch applies a client's change to a session. It refuses with an *[InvalidError] an
// unknown updated_by_gate or a record the change would make invalid, with a *[RejectError]
// INVALID_SESSION_STATE a status change PATCH may not make (the message says what makes it
// instead, or the way on from a closed or archived session) and a snapshot change of an
// archived session; it returns store.ErrSessionNotFound for an unknown session. Changing to
// closed sets closed_at; every change sets updated_at and updated_by_gate.
func (s *Service) Patch(ctx context.Context, id string, req PatchRequest) (*Detail, error) {
	if !slices.Contains(gates, req.UpdatedByGate) {
		return nil, &InvalidError{What: "patch", Problems: []contract.Problem{{Path: "/updated_by_gate", Rule: "enum", Layer: contract.LayerSchema,
			Message: fmt.Sprintf("updated_by_gate %q must be one of owner, handoff, user, mission: say who makes the change", req.UpdatedByGate)}}}
	}
	if req.Multitask != nil && !contract.ValidMultitask(*req.Multitask) {
		return nil, &InvalidError{What: "patch", Problems: []contract.Problem{{Path: "/multitask", Rule: "enum", Layer: contract.LayerSchema,
			Message: fmt.Sprintf("multitask %q must be one of reject, enqueue, interrupt: what an append that queues a run does while another run is active", *req.Multitask)}}}
	}
	var refusal error
	sess, _, err := s.st.UpdateLifecycle(ctx, id, func(sess *store.Session, lc *store.Lifecycle) error {
		if req.Multitask != nil {
			lc.Multitask = *req.Multitask
		}
		err := s.applyPatch(id, sess, &req)
		var (
			inv *InvalidError
			rej *RejectError
		)
		if errors.As(err, &inv) || errors.As(err, &rej) {
			refusal = err
		}
		return err
	})
	if refusal != nil {
		return nil, refusal
	}
	if err != nil {
		return nil, err
	}
	return s.Detail(ctx, sess), nil
}

// applyPatch changes sess as req says, or returns why it may not.
func (s *Service) applyPatch(id string, sess *store.Session, req *PatchRequest) error {
	rec := &sess.Record
	if req.Snapshot != nil {
		if rec.Status == contract.SessionStatusArchived {
			return &RejectError{Code: contract.CodeInvalidState, Message: fmt.Sprintf("session %q is archived: its snapshot is kept in its archive %s and cannot change", id, rec.ArchivePath.Get()),
				Remedy: Remedy{Kind: NotLive, Status: rec.Status, Then: "then change the snapshot"}}
		}
		sess.Snapshot = *req.Snapshot
	}
	if req.Status != nil && *req.Status != rec.Status {
		if !contract.CanPatchStatus(rec.Status, *req.Status) {
			return &RejectError{Code: contract.CodeInvalidState, Message: fmt.Sprintf("session %q is %s and cannot become %s (allowed from %s: %v)", id, rec.Status, *req.Status, rec.Status, contract.PatchTargets(rec.Status)),
				Remedy: patchRemedy(rec.Status, *req.Status)}
		}
		rec.Status = *req.Status
		if rec.Status == contract.SessionStatusClosed {
			rec.ClosedAt = contract.Some(s.stamp())
		}
	}
	for _, f := range []struct {
		src contract.Nullable[string]
		dst *contract.Nullable[string]
	}{{req.Phase, &rec.Phase}, {req.Activity, &rec.Activity}, {req.CurrentRunID, &rec.CurrentRunID},
		{req.CurrentTaskID, &rec.CurrentTaskID}, {req.CurrentMissionID, &rec.CurrentMissionID}, {req.WorktreePath, &rec.WorktreePath}} {
		if f.src.Present {
			*f.dst = f.src
		}
	}
	rec.UpdatedAt = contract.Some(s.stamp())
	rec.UpdatedByGate = contract.Some(req.UpdatedByGate)
	b, err := contract.Marshal(rec)
	if err != nil {
		return err
	}
	if err := contract.Validate(contract.KindSession, b, contract.Limits{}); err != nil {
		var ve *contract.ValidationError
		errors.As(err, &ve)
		return &InvalidError{What: "session record", Problems: ve.Problems}
	}
	return nil
}

// patchRemedy is what to do instead of a status change PATCH refuses: the mechanism that
// makes it when the server makes it, else the way on from a closed or archived session.
func patchRemedy(from, to string) Remedy {
	if by, ok := contract.ServerTransition(from, to); ok {
		return Remedy{Kind: ServerTransition, From: from, To: to, By: by}
	}
	return notLive(from)
}
