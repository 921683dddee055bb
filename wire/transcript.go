package wire

import (
	"encoding/json"

	"github.com/sessiond/sessiond/contract"
)

// Transcript is the folded state of a session's log that a UI draws. It is a pure function of
// the log: session.Fold.Apply over every event in order gives the same Transcript however the
// events are split into batches.
type Transcript struct {
	SessionID    string `json:"sessionId"`
	LastSequence int64  `json:"lastSequence"`
	// Messages in order of first appearance: "append" adds parts, "replace" replaces them; the
	// status is the latest one sent (streaming → completed or failed).
	Messages []Message `json:"messages"`
	// Reasoning blocks in order of first appearance; each event's text is appended to the block.
	Reasoning []Reasoning `json:"reasoning"`
	// Plan is the latest plan event's payload, or null.
	Plan *contract.PlanPayload `json:"plan"`
	// Tasks, tool calls, artifacts, test results and summaries by id, each its latest state, in
	// order of first appearance.
	Tasks       []contract.TaskPayload       `json:"tasks"`
	Tools       []contract.ToolPayload       `json:"tools"`
	Artifacts   []contract.ArtifactPayload   `json:"artifacts"`
	TestResults []contract.TestResultPayload `json:"testResults"`
	Summaries   []contract.SummaryPayload    `json:"summaries"`
	// Approvals, pending (requested) first, then resolved, each in order of first appearance.
	Approvals []contract.ApprovalPayload `json:"approvals"`
	// Diffs by path, latest state, in order of first appearance.
	Diffs []contract.DiffPayload `json:"diffs"`
	// WorkspaceFiles by path, latest state (upsert or delete), in order of first appearance.
	WorkspaceFiles []contract.WorkspaceFilePayload `json:"workspaceFiles"`
	// Terminals by terminalId: output chunks concatenated in order, and the last exit code.
	Terminals []Terminal `json:"terminals"`
	// Usage: the latest usage event, and totals per session and per run.
	Usage Usage `json:"usage"`
	// Errors are every error event, in order.
	Errors []contract.ErrorPayload `json:"errors"`
	// Steers are every steer's latest state, by commandId.
	Steers []contract.SteerPayload `json:"steers"`
	// Resumable is the latest resume event's flag (false when there is none).
	Resumable bool `json:"resumable"`
}

// Message is a message with its parts folded.
type Message struct {
	MessageID string            `json:"messageId"`
	Role      string            `json:"role"`
	Parts     []json.RawMessage `json:"parts"`
	Status    string            `json:"status,omitempty"`
	RunID     string            `json:"runId,omitempty"`
	// Sequence is the sequence of the event that last changed the message.
	Sequence int64 `json:"sequence"`
}

// Reasoning is a reasoning block with its text accumulated.
type Reasoning struct {
	ReasoningID string `json:"reasoningId"`
	Text        string `json:"text"`
	Status      string `json:"status"`
}

// Terminal is one terminal's output.
type Terminal struct {
	TerminalID string `json:"terminalId"`
	Output     string `json:"output"`
	ExitCode   *int64 `json:"exitCode,omitempty"`
}

// Usage folds usage events. Each usage event is taken as the usage of one step (not a running
// total), so totals are sums.
type Usage struct {
	Latest *contract.UsagePayload  `json:"latest"`
	Total  UsageTotals             `json:"total"`
	ByRun  map[string]*UsageTotals `json:"byRun"`
}

// UsageTotals are summed token counts.
type UsageTotals struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
	TotalTokens  int64 `json:"totalTokens"`
}
