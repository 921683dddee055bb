// Package api holds the wire types of sessiond's HTTP API (v1) that the server and the Go
// client share: request and response bodies, the error envelope, and the one table that maps
// error codes to HTTP statuses.
package api

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/wire"
)

// statusByCode is the one table from error code to HTTP status.
var statusByCode = map[contract.ErrorCode]int{
	contract.CodeMalformed:           http.StatusBadRequest,
	contract.CodeContractViolation:   http.StatusUnprocessableEntity,
	contract.CodeTooLarge:            http.StatusRequestEntityTooLarge,
	contract.CodeSessionNotFound:     http.StatusNotFound,
	contract.CodeSessionExists:       http.StatusConflict,
	contract.CodeRunNotFound:         http.StatusNotFound,
	contract.CodeSequenceConflict:    http.StatusConflict,
	contract.CodeIdempotencyConflict: http.StatusConflict,
	contract.CodeEventIDConflict:     http.StatusConflict,
	contract.CodeSessionMismatch:     http.StatusUnprocessableEntity,
	contract.CodeInvalidTransition:   http.StatusUnprocessableEntity,
	contract.CodeInvalidState:        http.StatusConflict,
	contract.CodeUnsupportedMedia:    http.StatusUnsupportedMediaType,
	contract.CodeMethodNotAllowed:    http.StatusMethodNotAllowed,
	contract.CodeNotFound:            http.StatusNotFound,
	contract.CodeUnavailable:         http.StatusServiceUnavailable,
	contract.CodeInternal:            http.StatusInternalServerError,
	contract.CodeArchiveInvalid:      http.StatusUnprocessableEntity,
	contract.CodeArchiveNotFound:     http.StatusNotFound,
	contract.CodeRestoreConflict:     http.StatusConflict,
	contract.CodeSessionMoved:        http.StatusConflict,
	contract.CodeNotConfigured:       http.StatusNotImplemented,
	contract.CodeLeaseLost:           http.StatusConflict,
	contract.CodeLeaseRequired:       http.StatusConflict,
	contract.CodeStoreUnwritable:     http.StatusServiceUnavailable,
	contract.CodeOverloaded:          http.StatusServiceUnavailable,
	contract.CodeRequestTimeout:      http.StatusRequestTimeout,
	contract.CodeHeadersTooLarge:     http.StatusRequestHeaderFieldsTooLarge,
	contract.CodeUnauthenticated:     http.StatusUnauthorized,
	contract.CodeForbidden:           http.StatusForbidden,
	contract.CodeRateLimited:         http.StatusTooManyRequests,
	contract.CodeKeyNotFound:         http.StatusNotFound,

	// Availability codes (contract.RetryFor says each is retryable and after how long).
	contract.CodeStoreFull:        http.StatusInsufficientStorage,
	contract.CodeStoreUnavailable: http.StatusServiceUnavailable,
	contract.CodeCommitUnknown:    http.StatusServiceUnavailable,

	// Command error codes of the contract (docs/reference.md#error-codes), for rejected and
	// failed command results.
	contract.CodeActiveRunNotFound:       http.StatusConflict,
	contract.CodeRunAlreadyFinished:      http.StatusConflict,
	contract.CodeStopTimeout:             http.StatusAccepted, // the stop was requested, not yet confirmed
	contract.CodeCommandNotSupported:     http.StatusUnprocessableEntity,
	contract.CodeCapabilityUnavailable:   http.StatusUnprocessableEntity,
	contract.CodeTargetEventNotFound:     http.StatusNotFound,
	contract.CodeTargetEventNotRetryable: http.StatusConflict,
	contract.CodeApprovalNotFound:        http.StatusNotFound,
	contract.CodeApprovalAlreadyResolved: http.StatusConflict,
	contract.CodeSourceThreadNotFound:    http.StatusNotFound,
	contract.CodeSourceMessageNotFound:   http.StatusNotFound,
	contract.CodeSourceRunNotFound:       http.StatusNotFound,
	contract.CodeSourceLineageInvalid:    http.StatusUnprocessableEntity,
	contract.CodeActiveBranchNotFound:    http.StatusNotFound,
	contract.CodeCommandExecutionFailed:  http.StatusServiceUnavailable,
}

// HTTPStatus returns the HTTP status for an error code (500 for an unknown code).
func HTTPStatus(code contract.ErrorCode) int {
	if s, ok := statusByCode[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Error is the error body of every failed request:
// {"error":{"code":"...","message":"...","details":[...]}}. It implements error, so the Go
// client returns it as is.
type Error struct {
	Code    contract.ErrorCode `json:"code"`
	Message string             `json:"message"`
	// Details lists the contract problems of a rejected document (JSON Pointer, rule, layer,
	// message). For a batch, each path starts with the event's index in the batch ("/3/...").
	Details []contract.Problem `json:"details,omitempty"`
	// Status is the HTTP status the error came with (not sent; filled by the client).
	Status int `json:"-"`
	// Fields carries structured facts about some errors, such as the current last sequence
	// of a SEQUENCE_CONFLICT ({"expected":4,"actual":7}).
	Fields map[string]any `json:"fields,omitempty"`
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: %s", e.Code, e.Message)
	for i, d := range e.Details {
		if i == 5 {
			msg += fmt.Sprintf("; and %d more", len(e.Details)-5)
			break
		}
		p := d.Path
		if p == "" {
			p = "/"
		}
		msg += fmt.Sprintf("; %s: %s (%s)", p, d.Message, d.Rule)
	}
	return msg
}

// Errorf returns an *Error with a formatted message.
func Errorf(code contract.ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorBody is the envelope of an error response.
type ErrorBody struct {
	Error *Error `json:"error"`
}

// CreateSessionRequest is the body of POST /v1/sessions: the session record fields the caller
// may set (session_id is generated when absent; schema_version, status, started_at and
// updated_at are set by the server) and the snapshot.
type CreateSessionRequest struct {
	SessionID        string            `json:"session_id,omitempty"`
	Project          *string           `json:"project,omitempty"`
	AgentID          string            `json:"agent_id"`
	Role             string            `json:"role"`
	Mode             *string           `json:"mode,omitempty"`
	Phase            *string           `json:"phase,omitempty"`
	Activity         *string           `json:"activity,omitempty"`
	CurrentRunID     *string           `json:"current_run_id,omitempty"`
	CurrentTaskID    *string           `json:"current_task_id,omitempty"`
	CurrentMissionID *string           `json:"current_mission_id,omitempty"`
	WorktreePath     *string           `json:"worktree_path,omitempty"`
	UpdatedByGate    *string           `json:"updated_by_gate,omitempty"`
	Snapshot         contract.Snapshot `json:"snapshot"`
}

// PatchSessionRequest is the body of PATCH /v1/sessions/{id}. Absent fields are left as they
// are; null clears a nullable field. updated_by_gate is required. Snapshot, when present,
// replaces the whole snapshot (mode, modelId, capabilities, permissionProfile) and is checked
// against the contract's snapshot schema; commands are judged against it from then on.
type PatchSessionRequest struct {
	Snapshot         *contract.Snapshot        `json:"snapshot,omitempty"`
	Status           *string                   `json:"status,omitempty"`
	Phase            contract.Nullable[string] `json:"phase,omitzero"`
	Activity         contract.Nullable[string] `json:"activity,omitzero"`
	CurrentRunID     contract.Nullable[string] `json:"current_run_id,omitzero"`
	CurrentTaskID    contract.Nullable[string] `json:"current_task_id,omitzero"`
	CurrentMissionID contract.Nullable[string] `json:"current_mission_id,omitzero"`
	WorktreePath     contract.Nullable[string] `json:"worktree_path,omitzero"`
	// Multitask sets the session's default multitask strategy: reject, enqueue or interrupt
	// (the server's field, kept in the lifecycle state, not in the record).
	Multitask     *string `json:"multitask,omitempty"`
	UpdatedByGate string  `json:"updated_by_gate"`
}

// Session is the session resource: GET /v1/sessions/{id}.
type Session struct {
	Record       contract.SessionRecord `json:"record"`
	Snapshot     contract.Snapshot      `json:"snapshot"`
	LastSequence int64                  `json:"lastSequence"`
	// CurrentRun is the session's current run: the earliest one still active (runs enqueued
	// behind it wait their turn), else the most recent; null before the first one.
	CurrentRun   *contract.Run          `json:"currentRun"`
	Lineage      *contract.Lineage      `json:"lineage"`
	ActiveBranch *contract.ActiveBranch `json:"activeBranch"`
	// Lifecycle is the lifecycle state: the work window (warm), the latest archive,
	// compaction and restore. Omitted fields were never set.
	Lifecycle wire.Lifecycle `json:"lifecycle"`
	// Advice is the status mode's recommendation (GET /v1/sessions/{id}/status) at the time
	// of the answer: whether to archive now, why, and whether the session is stale.
	Advice wire.Advice `json:"advice"`
}

// SessionList is the body of GET /v1/sessions.
type SessionList struct {
	Sessions []Session `json:"sessions"`
	// Next is the cursor for the next page (pass it as ?after=); empty on the last page.
	Next string `json:"next,omitempty"`
}

// Append outcomes.
const (
	Accepted  = "accepted"
	Duplicate = "duplicate"
)

// LastSequenceHeader is the response header of GET /v1/sessions/{id}/events/export: the
// log's last sequence when the read began, the sequence of the body's last line once the whole
// body has arrived.
const LastSequenceHeader = "Sessiond-Last-Sequence"

// Names of the SSE blocks of GET /v1/sessions/{id}/events/stream. They never collide with
// each other, nor with the names EventSource itself dispatches ("message" for an unnamed
// block, "error" for a connection failure, "open"), so a browser tells them apart by name.
const (
	// SSEEventPrefix goes before a contract event's eventType to name its block:
	// "ev.message", "ev.error", … (one name per event kind).
	SSEEventPrefix = "ev."
	// SSEStreamError names the stream's final block, sent just before the server ends the
	// stream: an [Error] whose code says why (SUBSCRIBER_TOO_SLOW, SHUTTING_DOWN,
	// STREAM_FAILED, CREDENTIAL_REVOKED: the key that opened the stream, or the key its login or
	// stream token comes from, was revoked or expired) and whose message names the
	// Last-Event-ID to resume with.
	SSEStreamError = "stream.error"
)

// AppendResult is the outcome of one appended event.
type AppendResult struct {
	EventID  string `json:"eventId"`
	Sequence int64  `json:"sequence"`
	Status   string `json:"status"` // accepted or duplicate
}

// AppendResponse is the body of a successful POST /v1/sessions/{id}/events.
type AppendResponse struct {
	Results      []AppendResult `json:"results"`
	LastSequence int64          `json:"lastSequence"`
	// Interrupted, with ?multitask=interrupt, is the stop the server appended for the run that
	// was active, before the request's events; absent when it stopped none.
	Interrupted *Interruption `json:"interrupted,omitempty"`
}

// Interruption is the stop an interrupting append added: the run it stopped and the events
// (stopping, and stopped for a queued run nobody held).
type Interruption struct {
	RunID   string         `json:"runId"`
	Results []AppendResult `json:"results"`
}

// EventPage is the body of GET /v1/sessions/{id}/events.
type EventPage struct {
	Events       []json.RawMessage `json:"events"`
	LastSequence int64             `json:"lastSequence"`
}

// RunList is the body of GET /v1/sessions/{id}/runs.
type RunList struct {
	Runs []RunResource `json:"runs"`
}

// RunResource is a run as GET /v1/sessions/{id}/runs[/{runId}] shows it: the contract's run
// and, beside its fields, the run's attempt, last fencing token and the lease held on it.
type RunResource struct {
	contract.Run
	wire.RunLease
}

// ErrorCode is the error's code (contract.CodedError).
func (e *Error) ErrorCode() contract.ErrorCode { return e.Code }

// SearchResponse is the answer of GET /v1/search: one page of results.
type SearchResponse struct {
	Results []wire.SearchHit `json:"results"`
	// Order is the order of the results: "recent" (newest first) or "relevance" (best first
	// among the newest 1,000 matches).
	Order string `json:"order"`
	// Next is the cursor of the next page (pass it as ?cursor= with the same query); empty on
	// the last page.
	Next string `json:"next,omitempty"`
	// IndexLagSeconds is how long the oldest commit not yet indexed has waited, on this
	// instance (0 when the index is level with the logs): results may miss events this recent.
	IndexLagSeconds float64 `json:"indexLagSeconds"`
}
