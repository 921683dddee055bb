package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// Timestamp is the occurredAt of every event the fixtures build.
const Timestamp = "2026-03-01T12:00:00Z"

// TerminalEvent returns a valid "terminal" event for sessionID with idempotency key key, eventId
// "ev-"+key and chunk as its content, checked with contract.CheckEvent. Two calls with the same
// arguments give the same content; a different chunk gives different content under the same
// key. It fails the test when the contract rejects the event.
func TerminalEvent(t testing.TB, sessionID, key, chunk string) *contract.EncodedEvent {
	t.Helper()
	return EventWithID(t, sessionID, "ev-"+key, key, chunk)
}

// EventWithID is TerminalEvent with an explicit eventId.
func EventWithID(t testing.TB, sessionID, eventID, key, chunk string) *contract.EncodedEvent {
	t.Helper()
	return check(t, &contract.Event{
		Contract: "AgentSessionEvent", EventID: eventID, SessionID: sessionID, Sequence: 7,
		IdempotencyKey: key, OccurredAt: Timestamp, EventType: "terminal",
		Payload: &contract.TerminalPayload{TerminalID: "term-1", Stream: "stdout", Chunk: chunk},
	}, contract.Limits{})
}

// BigEvent returns a valid terminal event whose canonical form is at least size bytes, checked
// with a parser limit large enough to accept it.
func BigEvent(t testing.TB, sessionID, key string, size int) *contract.EncodedEvent {
	t.Helper()
	return check(t, &contract.Event{
		Contract: "AgentSessionEvent", EventID: "ev-" + key, SessionID: sessionID,
		IdempotencyKey: key, OccurredAt: Timestamp, EventType: "terminal",
		Payload: &contract.TerminalPayload{TerminalID: "term-1", Stream: "stdout", Chunk: strings.Repeat("x", size)},
	}, contract.Limits{MaxBytes: size + 4096})
}

// RunStatusEvent returns a valid run status event (a "status" event with runId) moving run runID,
// started by message sourceMessageID, to status, with the timestamps and durationMs the
// contract requires for that status.
func RunStatusEvent(t testing.TB, sessionID, key, runID, sourceMessageID, status string) *contract.EncodedEvent {
	t.Helper()
	p := &contract.StatusPayload{Status: status}
	switch status {
	case "running":
		p.StartedAt = "2026-03-01T12:00:01Z"
	case "stopping":
		p.StoppingRequestedAt = "2026-03-01T12:00:02Z"
	case "stopped":
		p.StoppedAt = "2026-03-01T12:00:03Z"
	case "completed":
		p.CompletedAt = "2026-03-01T12:00:03Z"
	case "failed":
		p.FailedAt = "2026-03-01T12:00:03Z"
	}
	if contract.IsTerminal(status) {
		d := json.Number("2000")
		p.DurationMs = &d
	}
	return check(t, &contract.Event{
		Contract: "AgentSessionEvent", EventID: "ev-" + key, SessionID: sessionID, RunID: runID,
		SourceMessageID: sourceMessageID, IdempotencyKey: key, OccurredAt: Timestamp,
		EventType: "status", Payload: p,
	}, contract.Limits{})
}

func check(t testing.TB, e *contract.Event, lim contract.Limits) *contract.EncodedEvent {
	t.Helper()
	data, err := contract.Marshal(e)
	if err != nil {
		t.Fatalf("storetest: marshal event: %v", err)
	}
	ev, err := contract.CheckEvent(data, lim)
	if err != nil {
		t.Fatalf("storetest: the contract rejects the fixture event %s: %v", data, err)
	}
	return ev
}

// Batch returns n terminal events for sessionID with keys prefix-0 … prefix-(n-1).
func Batch(t testing.TB, sessionID, prefix string, n int) []*contract.EncodedEvent {
	t.Helper()
	out := make([]*contract.EncodedEvent, n)
	for i := range out {
		key := fmt.Sprintf("%s-%d", prefix, i)
		out[i] = TerminalEvent(t, sessionID, key, "chunk of "+key)
	}
	return out
}

// SessionSpec varies the fixture session of NewSession.
type SessionSpec struct {
	Status  string // default "running"
	AgentID string // default "agent-1"
	Project string // default: absent
	Role    string // default "implementer"
	MCP     bool   // the snapshot has the mcp capability (tools it always has)
}

// NewSession returns a valid session (record and snapshot) with id and the fields of spec.
func NewSession(id string, spec SessionSpec) *store.Session {
	if spec.Status == "" {
		spec.Status = "running"
	}
	if spec.AgentID == "" {
		spec.AgentID = "agent-1"
	}
	if spec.Role == "" {
		spec.Role = "implementer"
	}
	rec := contract.SessionRecord{
		SchemaVersion: 1, SessionID: id, AgentID: spec.AgentID, Role: spec.Role,
		Status: spec.Status, StartedAt: "2026-03-01T12:00:00Z",
		Phase: contract.Null[string](),
	}
	if spec.Project != "" {
		rec.Project = contract.Some(spec.Project)
	}
	yes := true
	caps := contract.Capabilities{Tools: &yes}
	if spec.MCP {
		caps.MCP = &yes
	}
	return &store.Session{
		Record:       rec,
		Snapshot:     contract.Snapshot{Mode: "work", ModelID: "model-1", Capabilities: caps},
		LastSequence: -1,
	}
}

// RunEvent returns a valid terminal event of run runID (an event with runId that is not a run
// status event), with eventId "ev-"+key.
func RunEvent(t testing.TB, sessionID, key, runID, chunk string) *contract.EncodedEvent {
	t.Helper()
	return check(t, &contract.Event{
		Contract: "AgentSessionEvent", EventID: "ev-" + key, SessionID: sessionID, RunID: runID,
		IdempotencyKey: key, OccurredAt: Timestamp, EventType: "terminal",
		Payload: &contract.TerminalPayload{TerminalID: "term-1", Stream: "stdout", Chunk: chunk},
	}, contract.Limits{})
}
