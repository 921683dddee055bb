package contract

import (
	"encoding/json"
	"fmt"
)

// RawJSON is a free JSON value (parts, input, output, requestedAction, state, details) kept
// verbatim: decoding and encoding never convert its numbers or reorder its keys.
type RawJSON = json.RawMessage

// Event is an AgentSessionEvent: one entry in a session's log. Payload holds one of the 17
// payload types below, selected by EventType.
type Event struct {
	Contract        string  `json:"contract"`
	EventID         string  `json:"eventId"`
	SessionID       string  `json:"sessionId"`
	RunID           string  `json:"runId,omitempty"`
	SourceMessageID string  `json:"sourceMessageId,omitempty"`
	Sequence        int64   `json:"sequence"`
	IdempotencyKey  string  `json:"idempotencyKey"`
	OccurredAt      string  `json:"occurredAt"`
	EventType       string  `json:"eventType"`
	Payload         Payload `json:"payload"`
}

// Payload is the payload of an [Event]; its EventType names the event type it belongs to.
type Payload interface {
	EventType() string
}

// MessagePayload is the payload of a "message" event.
type MessagePayload struct {
	MessageID string    `json:"messageId"`
	Role      string    `json:"role"`
	Operation string    `json:"operation"`
	Parts     []RawJSON `json:"parts"`
	Status    string    `json:"status,omitempty"`
}

// ReasoningPayload is the payload of a "reasoning" event.
type ReasoningPayload struct {
	ReasoningID string `json:"reasoningId"`
	Text        string `json:"text"`
	Status      string `json:"status"`
}

// PlanPayload is the payload of a "plan" event.
type PlanPayload struct {
	PlanID string     `json:"planId"`
	Title  *string    `json:"title,omitempty"`
	Status string     `json:"status"`
	Steps  []PlanStep `json:"steps"`
}

// PlanStep is one step of a plan.
type PlanStep struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Status string `json:"status"`
}

// TaskPayload is the payload of a "task" event.
type TaskPayload struct {
	TaskID string  `json:"taskId"`
	Title  string  `json:"title"`
	Status string  `json:"status"`
	Detail *string `json:"detail,omitempty"`
}

// ToolPayload is the payload of a "tool" event.
type ToolPayload struct {
	ToolCallID  string  `json:"toolCallId"`
	ToolName    string  `json:"toolName"`
	Status      string  `json:"status"`
	Input       RawJSON `json:"input,omitempty"`
	Output      RawJSON `json:"output,omitempty"`
	Error       *string `json:"error,omitempty"`
	StartedAt   string  `json:"startedAt,omitempty"`
	CompletedAt string  `json:"completedAt,omitempty"`
}

// ApprovalPayload is the payload of an "approval" event.
type ApprovalPayload struct {
	ApprovalID      string  `json:"approvalId"`
	ToolCallID      string  `json:"toolCallId,omitempty"`
	Status          string  `json:"status"`
	Title           string  `json:"title"`
	Description     *string `json:"description,omitempty"`
	RequestedAction RawJSON `json:"requestedAction,omitempty"`
}

// StatusPayload is the payload of a "status" event. With the event's runId it is a run
// status event (docs/reference.md#status-event).
type StatusPayload struct {
	Status              string       `json:"status"`
	Detail              *string      `json:"detail,omitempty"`
	StartedAt           string       `json:"startedAt,omitempty"`
	StoppingRequestedAt string       `json:"stoppingRequestedAt,omitempty"`
	StoppedAt           string       `json:"stoppedAt,omitempty"`
	CompletedAt         string       `json:"completedAt,omitempty"`
	FailedAt            string       `json:"failedAt,omitempty"`
	DurationMs          *json.Number `json:"durationMs,omitempty"`
}

// ArtifactPayload is the payload of an "artifact" event.
type ArtifactPayload struct {
	ArtifactID    string  `json:"artifactId"`
	Name          string  `json:"name"`
	Kind          string  `json:"kind"`
	Status        string  `json:"status"`
	MimeType      *string `json:"mimeType,omitempty"`
	URL           string  `json:"url,omitempty"`
	Size          *int64  `json:"size,omitempty"`
	SourceEventID string  `json:"sourceEventId,omitempty"`
}

// UsagePayload is the payload of a "usage" event.
type UsagePayload struct {
	InputTokens   *int64 `json:"inputTokens,omitempty"`
	OutputTokens  *int64 `json:"outputTokens,omitempty"`
	TotalTokens   *int64 `json:"totalTokens,omitempty"`
	ContextTokens *int64 `json:"contextTokens,omitempty"`
	ContextWindow *int64 `json:"contextWindow,omitempty"`
}

// ResumePayload is the payload of a "resume" event.
type ResumePayload struct {
	Resumable bool    `json:"resumable"`
	State     RawJSON `json:"state,omitempty"`
	Reason    *string `json:"reason,omitempty"`
}

// ErrorPayload is the payload of an "error" event.
type ErrorPayload struct {
	Code          string  `json:"code"`
	Message       string  `json:"message"`
	Retryable     bool    `json:"retryable"`
	SourceEventID string  `json:"sourceEventId,omitempty"`
	Details       RawJSON `json:"details,omitempty"`
}

// DiffPayload is the payload of a "diff" event.
type DiffPayload struct {
	Path   string  `json:"path"`
	Status string  `json:"status"`
	Patch  *string `json:"patch,omitempty"`
}

// WorkspaceFilePayload is the payload of a "workspace-file" event.
type WorkspaceFilePayload struct {
	Path      string  `json:"path"`
	Operation string  `json:"operation"`
	MimeType  *string `json:"mimeType,omitempty"`
	Size      *int64  `json:"size,omitempty"`
}

// TerminalPayload is the payload of a "terminal" event.
type TerminalPayload struct {
	TerminalID string `json:"terminalId"`
	Stream     string `json:"stream"`
	Chunk      string `json:"chunk"`
	ExitCode   *int64 `json:"exitCode,omitempty"`
}

// TestResultPayload is the payload of a "test-result" event.
type TestResultPayload struct {
	TestID     string       `json:"testId"`
	Name       string       `json:"name"`
	Status     string       `json:"status"`
	DurationMs *json.Number `json:"durationMs,omitempty"`
	Output     *string      `json:"output,omitempty"`
}

// SteerPayload is the payload of a "steer" event.
type SteerPayload struct {
	CommandID   string        `json:"commandId"`
	TargetRunID string        `json:"targetRunId"`
	Text        string        `json:"text"`
	Status      string        `json:"status"`
	Error       *CommandError `json:"error,omitempty"`
}

// SummaryPayload is the payload of a "summary" event.
type SummaryPayload struct {
	SummaryID    string   `json:"summaryId"`
	RunID        string   `json:"runId"`
	Text         string   `json:"text"`
	Highlights   []string `json:"highlights"`
	PendingItems []string `json:"pendingItems"`
	Status       string   `json:"status"`
}

// EventType returns "message".
func (*MessagePayload) EventType() string { return "message" }

// EventType returns "reasoning".
func (*ReasoningPayload) EventType() string { return "reasoning" }

// EventType returns "plan".
func (*PlanPayload) EventType() string { return "plan" }

// EventType returns "task".
func (*TaskPayload) EventType() string { return "task" }

// EventType returns "tool".
func (*ToolPayload) EventType() string { return "tool" }

// EventType returns "approval".
func (*ApprovalPayload) EventType() string { return "approval" }

// EventType returns "status".
func (*StatusPayload) EventType() string { return "status" }

// EventType returns "artifact".
func (*ArtifactPayload) EventType() string { return "artifact" }

// EventType returns "usage".
func (*UsagePayload) EventType() string { return "usage" }

// EventType returns "resume".
func (*ResumePayload) EventType() string { return "resume" }

// EventType returns "error".
func (*ErrorPayload) EventType() string { return "error" }

// EventType returns "diff".
func (*DiffPayload) EventType() string { return "diff" }

// EventType returns "workspace-file".
func (*WorkspaceFilePayload) EventType() string { return "workspace-file" }

// EventType returns "terminal".
func (*TerminalPayload) EventType() string { return "terminal" }

// EventType returns "test-result".
func (*TestResultPayload) EventType() string { return "test-result" }

// EventType returns "steer".
func (*SteerPayload) EventType() string { return "steer" }

// EventType returns "summary".
func (*SummaryPayload) EventType() string { return "summary" }

// NewPayload returns a new zero payload for eventType, or nil when the type is unknown.
func NewPayload(eventType string) Payload {
	switch eventType {
	case "message":
		return new(MessagePayload)
	case "reasoning":
		return new(ReasoningPayload)
	case "plan":
		return new(PlanPayload)
	case "task":
		return new(TaskPayload)
	case "tool":
		return new(ToolPayload)
	case "approval":
		return new(ApprovalPayload)
	case "status":
		return new(StatusPayload)
	case "artifact":
		return new(ArtifactPayload)
	case "usage":
		return new(UsagePayload)
	case "resume":
		return new(ResumePayload)
	case "error":
		return new(ErrorPayload)
	case "diff":
		return new(DiffPayload)
	case "workspace-file":
		return new(WorkspaceFilePayload)
	case "terminal":
		return new(TerminalPayload)
	case "test-result":
		return new(TestResultPayload)
	case "steer":
		return new(SteerPayload)
	case "summary":
		return new(SummaryPayload)
	}
	return nil
}

// UnmarshalJSON decodes an event, choosing the payload type by eventType. It does not validate:
// use [DecodeEvent] for input from outside.
func (e *Event) UnmarshalJSON(data []byte) error {
	type plain Event
	var raw struct {
		plain
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*e = Event(raw.plain)
	p := NewPayload(e.EventType)
	if p == nil {
		return fmt.Errorf("unknown eventType %q", e.EventType)
	}
	if err := json.Unmarshal(raw.Payload, p); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	e.Payload = p
	return nil
}

// CommandError is the error of a command result or a failed steer.
type CommandError struct {
	Code      ErrorCode `json:"code"`
	Message   string    `json:"message"`
	Retryable bool      `json:"retryable"`
}

// Command is an AgentSessionCommand (docs/reference.md#commands). Payload holds one of the 8 command
// payload types, selected by CommandType.
type Command struct {
	Contract         string         `json:"contract"`
	CommandID        string         `json:"commandId"`
	SessionID        string         `json:"sessionId"`
	RunID            string         `json:"runId,omitempty"`
	IdempotencyKey   string         `json:"idempotencyKey"`
	ExpectedSequence int64          `json:"expectedSequence"`
	IssuedAt         string         `json:"issuedAt"`
	CommandType      string         `json:"commandType"`
	Payload          CommandPayload `json:"payload"`
}

// CommandPayload is the payload of a [Command]; CommandType names its command type.
type CommandPayload interface {
	CommandType() string
}

// StopCommand asks the target run to stop.
type StopCommand struct {
	Reason string `json:"reason,omitempty"`
}

// ResumeCommand asks for a new run after a stopped, completed or failed one.
type ResumeCommand struct {
	ResumeEventID string `json:"resumeEventId,omitempty"`
}

// RetryCommand asks for a new run after a failure.
type RetryCommand struct {
	SourceEventID string `json:"sourceEventId"`
}

// RetrySummaryCommand asks the runtime to generate a failed summary again.
type RetrySummaryCommand struct {
	SourceEventID string `json:"sourceEventId"`
	SourceRunID   string `json:"sourceRunId"`
}

// ApprovalCommand resolves a requested approval.
type ApprovalCommand struct {
	ApprovalID string `json:"approvalId"`
	Decision   string `json:"decision"`
	Reason     string `json:"reason,omitempty"`
}

// ForkCommand branches a new thread from a message of a source thread.
type ForkCommand struct {
	SourceThreadID  string      `json:"sourceThreadId"`
	SourceMessageID string      `json:"sourceMessageId"`
	SourceRunID     string      `json:"sourceRunId"`
	Inheritance     Inheritance `json:"inheritance"`
}

// EditAndRerunCommand forks with the source message's parts replaced, and runs again.
type EditAndRerunCommand struct {
	SourceThreadID   string      `json:"sourceThreadId"`
	SourceMessageID  string      `json:"sourceMessageId"`
	SourceRunID      string      `json:"sourceRunId"`
	ReplacementParts []RawJSON   `json:"replacementParts"`
	Inheritance      Inheritance `json:"inheritance"`
}

// SteerCommand sends guidance to a running run.
type SteerCommand struct {
	TargetRunID string `json:"targetRunId"`
	Text        string `json:"text"`
}

// CommandType returns "stop".
func (*StopCommand) CommandType() string { return "stop" }

// CommandType returns "resume".
func (*ResumeCommand) CommandType() string { return "resume" }

// CommandType returns "retry".
func (*RetryCommand) CommandType() string { return "retry" }

// CommandType returns "retry-summary".
func (*RetrySummaryCommand) CommandType() string { return "retry-summary" }

// CommandType returns "approval".
func (*ApprovalCommand) CommandType() string { return "approval" }

// CommandType returns "fork".
func (*ForkCommand) CommandType() string { return "fork" }

// CommandType returns "edit-and-rerun".
func (*EditAndRerunCommand) CommandType() string { return "edit-and-rerun" }

// CommandType returns "steer".
func (*SteerCommand) CommandType() string { return "steer" }

// NewCommandPayload returns a new zero payload for commandType, or nil when unknown.
func NewCommandPayload(commandType string) CommandPayload {
	switch commandType {
	case "stop":
		return new(StopCommand)
	case "resume":
		return new(ResumeCommand)
	case "retry":
		return new(RetryCommand)
	case "retry-summary":
		return new(RetrySummaryCommand)
	case "approval":
		return new(ApprovalCommand)
	case "fork":
		return new(ForkCommand)
	case "edit-and-rerun":
		return new(EditAndRerunCommand)
	case "steer":
		return new(SteerCommand)
	}
	return nil
}

// UnmarshalJSON decodes a command, choosing the payload type by commandType. It does not
// validate: use [DecodeCommand] for input from outside.
func (c *Command) UnmarshalJSON(data []byte) error {
	type plain Command
	var raw struct {
		plain
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*c = Command(raw.plain)
	p := NewCommandPayload(c.CommandType)
	if p == nil {
		return fmt.Errorf("unknown commandType %q", c.CommandType)
	}
	if err := json.Unmarshal(raw.Payload, p); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	c.Payload = p
	return nil
}

// CommandResult is an AgentSessionCommandResult (docs/reference.md#command-result).
type CommandResult struct {
	Contract         string        `json:"contract"`
	CommandID        string        `json:"commandId"`
	SessionID        string        `json:"sessionId"`
	RunID            string        `json:"runId,omitempty"`
	IdempotencyKey   string        `json:"idempotencyKey"`
	Outcome          string        `json:"outcome"`
	SessionStatus    string        `json:"sessionStatus"`
	AcceptedSequence *int64        `json:"acceptedSequence,omitempty"`
	ResultEventIDs   []string      `json:"resultEventIds,omitzero"` // nil: absent (default []); empty: []
	Operation        *Operation    `json:"operation,omitempty"`
	Termination      string        `json:"termination,omitempty"`
	Error            *CommandError `json:"error,omitempty"`
	OccurredAt       string        `json:"occurredAt"`
}

// Operation is what a fork or edit-and-rerun created.
type Operation struct {
	Lineage      Lineage      `json:"lineage"`
	ActiveBranch ActiveBranch `json:"activeBranch"`
}

// Run is an AgentSessionRun (docs/reference.md#runs).
type Run struct {
	RunID               string       `json:"runId"`
	SessionID           string       `json:"sessionId"`
	SourceMessageID     string       `json:"sourceMessageId"`
	Status              string       `json:"status"`
	StartedAt           string       `json:"startedAt"`
	StoppingRequestedAt string       `json:"stoppingRequestedAt,omitempty"`
	StoppedAt           string       `json:"stoppedAt,omitempty"`
	CompletedAt         string       `json:"completedAt,omitempty"`
	FailedAt            string       `json:"failedAt,omitempty"`
	DurationMs          *json.Number `json:"durationMs,omitempty"`
}

// Snapshot is a session snapshot (docs/reference.md#snapshot-object).
type Snapshot struct {
	Mode              string       `json:"mode"`
	ModelID           string       `json:"modelId"`
	Capabilities      Capabilities `json:"capabilities"`
	PermissionProfile string       `json:"permissionProfile,omitempty"`
}

// Capabilities are a session's capability flags. A flag that is absent takes its default:
// text is true, all others false. Pointers keep "absent" apart from "false" so that a decoded
// snapshot encodes back to the same JSON; use [Capabilities.Has] to read a flag.
type Capabilities struct {
	Text           *bool `json:"text,omitempty"`
	Reasoning      *bool `json:"reasoning,omitempty"`
	Plan           *bool `json:"plan,omitempty"`
	Tasks          *bool `json:"tasks,omitempty"`
	Tools          *bool `json:"tools,omitempty"`
	MCP            *bool `json:"mcp,omitempty"`
	Shell          *bool `json:"shell,omitempty"`
	FileChange     *bool `json:"fileChange,omitempty"`
	Skills         *bool `json:"skills,omitempty"`
	Approval       *bool `json:"approval,omitempty"`
	Artifacts      *bool `json:"artifacts,omitempty"`
	Usage          *bool `json:"usage,omitempty"`
	Resume         *bool `json:"resume,omitempty"`
	Diff           *bool `json:"diff,omitempty"`
	WorkspaceFiles *bool `json:"workspaceFiles,omitempty"`
	Terminal       *bool `json:"terminal,omitempty"`
	TestResults    *bool `json:"testResults,omitempty"`
	ThreadForking  *bool `json:"threadForking,omitempty"`
	EditAndRerun   *bool `json:"editAndRerun,omitempty"`
	Steering       *bool `json:"steering,omitempty"`
	Summary        *bool `json:"summary,omitempty"`
}

// Has reports whether the named capability (one of [CapabilityNames]) is on, applying the
// defaults. An unknown name reports false.
func (c Capabilities) Has(name string) bool {
	var p *bool
	switch name {
	case "text":
		p = c.Text
	case "reasoning":
		p = c.Reasoning
	case "plan":
		p = c.Plan
	case "tasks":
		p = c.Tasks
	case "tools":
		p = c.Tools
	case "mcp":
		p = c.MCP
	case "shell":
		p = c.Shell
	case "fileChange":
		p = c.FileChange
	case "skills":
		p = c.Skills
	case "approval":
		p = c.Approval
	case "artifacts":
		p = c.Artifacts
	case "usage":
		p = c.Usage
	case "resume":
		p = c.Resume
	case "diff":
		p = c.Diff
	case "workspaceFiles":
		p = c.WorkspaceFiles
	case "terminal":
		p = c.Terminal
	case "testResults":
		p = c.TestResults
	case "threadForking":
		p = c.ThreadForking
	case "editAndRerun":
		p = c.EditAndRerun
	case "steering":
		p = c.Steering
	case "summary":
		p = c.Summary
	default:
		return false
	}
	if p == nil {
		return name == "text"
	}
	return *p
}

// Lineage says where a forked thread came from (docs/forks.md).
type Lineage struct {
	ForkedFromThreadID  string `json:"forkedFromThreadId"`
	ForkedFromMessageID string `json:"forkedFromMessageId"`
	SourceRunID         string `json:"sourceRunId"`
}

// Inheritance says what a new thread takes from its source.
type Inheritance struct {
	Messages    string `json:"messages"`
	Attachments string `json:"attachments"`
	Summaries   string `json:"summaries"`
	ToolResults string `json:"toolResults"`
	CodeChanges string `json:"codeChanges"`
}

// InheritedMessage is one message carried into a new thread.
type InheritedMessage struct {
	MessageID string    `json:"messageId"`
	Role      string    `json:"role"`
	Parts     []RawJSON `json:"parts"`
}

// UnavailableResource is a resource of the source that the new thread does not get, and why.
type UnavailableResource struct {
	MessageID string `json:"messageId"`
	Kind      string `json:"kind"`
	Reason    string `json:"reason"`
}

// InheritedContext is what a new thread inherits from its source.
type InheritedContext struct {
	SourceThreadID       string                `json:"sourceThreadId"`
	SourceMessageID      string                `json:"sourceMessageId"`
	SourceRunID          string                `json:"sourceRunId"`
	Messages             []InheritedMessage    `json:"messages"`
	Summary              string                `json:"summary,omitempty"`
	UnavailableResources []UnavailableResource `json:"unavailableResources"`
	CapturedAt           string                `json:"capturedAt"`
}

// ContinuationRequest is an AgentSessionContinuationRequest.
type ContinuationRequest struct {
	IdempotencyKey  string      `json:"idempotencyKey"`
	SourceMessageID string      `json:"sourceMessageId"`
	SourceRunID     string      `json:"sourceRunId"`
	Inheritance     Inheritance `json:"inheritance"`
}

// ContinuationResult is an AgentSessionContinuationResult.
type ContinuationResult struct {
	IdempotencyKey       string                `json:"idempotencyKey"`
	ThreadID             string                `json:"threadId"`
	Lineage              Lineage               `json:"lineage"`
	Inheritance          Inheritance           `json:"inheritance"`
	UnavailableResources []UnavailableResource `json:"unavailableResources"`
	Duplicate            bool                  `json:"duplicate"`
	CreatedAt            string                `json:"createdAt"`
}

// ActiveBranch is the branch a session currently works on.
type ActiveBranch struct {
	BranchID        string   `json:"branchId"`
	ThreadID        string   `json:"threadId"`
	SourceMessageID string   `json:"sourceMessageId"`
	RunID           string   `json:"runId"`
	Lineage         *Lineage `json:"lineage,omitempty"`
	CreatedAt       string   `json:"createdAt"`
}

// ViewModel is an AgentSessionViewModel (docs/reference.md#session-record-status-and-run-status).
type ViewModel struct {
	SessionID    string        `json:"sessionId"`
	Snapshot     Snapshot      `json:"snapshot"`
	Status       string        `json:"status"`
	Events       []Event       `json:"events"`
	LastSequence int64         `json:"lastSequence"`
	Resumable    bool          `json:"resumable"`
	Lineage      *Lineage      `json:"lineage,omitempty"`
	ActiveBranch *ActiveBranch `json:"activeBranch,omitempty"`

	// resumableSent records that a decoded view carried "resumable" (possibly false), so that
	// encoding it gives back the same JSON. A view built in Go writes "resumable" when true.
	resumableSent bool
}

type viewPlain ViewModel

type viewJSON struct {
	viewPlain
	Resumable *bool `json:"resumable,omitempty"`
}

// MarshalJSON encodes the view; "resumable" (default false) is written when true or when the
// decoded view had it.
func (v ViewModel) MarshalJSON() ([]byte, error) {
	out := viewJSON{viewPlain: viewPlain(v)}
	if v.Resumable || v.resumableSent {
		out.Resumable = &v.Resumable
	}
	return json.Marshal(out)
}

// UnmarshalJSON decodes a view and remembers whether "resumable" was present. It does not
// validate: use [Decode] with [KindView] for input from outside.
func (v *ViewModel) UnmarshalJSON(data []byte) error {
	var in viewJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	*v = ViewModel(in.viewPlain)
	v.Resumable = in.Resumable != nil && *in.Resumable
	v.resumableSent = in.Resumable != nil
	return nil
}

// SessionRecord is the session record of cortex-session.schema.json. Nullable fields use
// [Nullable] so that absent, null and a value stay apart and a decoded record encodes back to
// the same JSON.
type SessionRecord struct {
	SchemaVersion    int              `json:"schema_version"`
	SessionID        string           `json:"session_id"`
	Project          Nullable[string] `json:"project,omitzero"`
	AgentID          string           `json:"agent_id"`
	Role             string           `json:"role"`
	Mode             Nullable[string] `json:"mode,omitzero"`
	Status           string           `json:"status"`
	Phase            Nullable[string] `json:"phase,omitzero"`
	Activity         Nullable[string] `json:"activity,omitzero"`
	CurrentRunID     Nullable[string] `json:"current_run_id,omitzero"`
	CurrentTaskID    Nullable[string] `json:"current_task_id,omitzero"`
	CurrentMissionID Nullable[string] `json:"current_mission_id,omitzero"`
	WorktreePath     Nullable[string] `json:"worktree_path,omitzero"`
	StartedAt        string           `json:"started_at"`
	LastHeartbeatAt  Nullable[string] `json:"last_heartbeat_at,omitzero"`
	UpdatedAt        Nullable[string] `json:"updated_at,omitzero"`
	UpdatedByGate    Nullable[string] `json:"updated_by_gate,omitzero"`
	ClosedAt         Nullable[string] `json:"closed_at,omitzero"`
	ArchivePath      Nullable[string] `json:"archive_path,omitzero"`
}

// Nullable is an optional JSON field that may also be null: absent (the zero value, omitted
// with the omitzero tag), null (Present and Value nil), or a value.
type Nullable[T any] struct {
	Present bool
	Value   *T
}

// Some returns a present, non-null Nullable holding v.
func Some[T any](v T) Nullable[T] { return Nullable[T]{Present: true, Value: &v} }

// Null returns a present Nullable that encodes as JSON null.
func Null[T any]() Nullable[T] { return Nullable[T]{Present: true} }

// IsZero reports whether the field is absent (used by the omitzero tag).
func (n Nullable[T]) IsZero() bool { return !n.Present }

// Get returns the value, or the zero T when absent or null.
func (n Nullable[T]) Get() T {
	if n.Value == nil {
		var zero T
		return zero
	}
	return *n.Value
}

// MarshalJSON encodes null or the value.
func (n Nullable[T]) MarshalJSON() ([]byte, error) {
	if n.Value == nil {
		return []byte("null"), nil
	}
	return json.Marshal(*n.Value)
}

// UnmarshalJSON records presence and decodes null or the value.
func (n *Nullable[T]) UnmarshalJSON(b []byte) error {
	n.Present = true
	if string(b) == "null" {
		n.Value = nil
		return nil
	}
	n.Value = new(T)
	return json.Unmarshal(b, n.Value)
}
