package session

import (
	"encoding/json"
	"fmt"
	"github.com/sessiond/sessiond/wire"
	"strings"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// addUsage adds the counts of a usage event to u.
func addUsage(u *wire.UsageTotals, p *contract.UsagePayload) {
	if p.InputTokens != nil {
		u.InputTokens += *p.InputTokens
	}
	if p.OutputTokens != nil {
		u.OutputTokens += *p.OutputTokens
	}
	if p.TotalTokens != nil {
		u.TotalTokens += *p.TotalTokens
	}
}

// Fold builds a Transcript incrementally. The zero value is not ready; use [NewFold].
//
// Applying one event costs time independent of how many came before (amortised), so folding a
// log is linear in its size: items are found through a map from kind and id to their position,
// and text that grows by appending (terminal output, reasoning text) is kept in builders and
// turned into strings only by [Fold.Transcript], never copied whole per event.
type Fold struct {
	t     wire.Transcript
	index map[slotKey]int // position of each item in its slice of t
	// output[i] holds t.Terminals[i].Output and text[i] t.Reasoning[i].Text (the fields in t
	// stay empty).
	output []*strings.Builder
	text   []*strings.Builder
	// only, when set, lists the event types this fold applies; the others only advance
	// LastSequence, without being decoded (see newSummaryFold).
	only map[string]bool
	// approvalAt says where each approval stands in the log (see ApprovalRef).
	approvalAt map[string]ApprovalRef
}

// ApprovalRef is where an approval stands in a session's log.
type ApprovalRef struct {
	// Requested says the log has its request, RunID the run of that request.
	Requested bool
	RunID     string
	// Decided is the sequence of its latest event other than a request (its decision); -1
	// while it has none.
	Decided int64
}

// slotKey identifies an item of the transcript: its kind ("message", "tool", ...) and id.
type slotKey struct{ kind, id string }

// NewFold returns an empty fold for a session.
func NewFold(sessionID string) *Fold {
	return &Fold{t: wire.Transcript{SessionID: sessionID, LastSequence: -1, Usage: wire.Usage{ByRun: map[string]*wire.UsageTotals{}}}, index: map[slotKey]int{}}
}

// summaryTypes are the event types the archive summary (summarize) reads: plan, tasks,
// approvals, summaries and usage.
var summaryTypes = map[string]bool{"plan": true, "task": true, "approval": true, "summary": true, "usage": true}

// newSummaryFold returns a fold that applies only the event types of the archive summary and
// skips the others (by the store's event type) without decoding them: its transcript is
// complete for summarize and nothing else. A log of terminal output folds for its summary at
// the cost of reading it.
func newSummaryFold(sessionID string) *Fold {
	f := NewFold(sessionID)
	f.only = summaryTypes
	return f
}

// LastSequence is the sequence of the last event applied (-1 before any).
func (f *Fold) LastSequence() int64 { return f.t.LastSequence }

// slot returns the position of id in a slice of length n, and whether it is new (then the
// caller appends at position n).
func (f *Fold) slot(kind, id string, n int) (int, bool) {
	k := slotKey{kind, id}
	if i, ok := f.index[k]; ok {
		return i, false
	}
	f.index[k] = n
	return n, true
}

// Apply folds one stored event. Events must come in sequence order; an event at or below the
// last applied sequence is ignored, so catching up twice is harmless.
func (f *Fold) Apply(se store.StoredEvent) error {
	if se.Sequence <= f.t.LastSequence {
		return nil
	}
	if f.only != nil && se.EventType != "" && !f.only[se.EventType] {
		f.t.LastSequence = se.Sequence
		return nil
	}
	e, err := decodeFoldEvent(se)
	if err != nil {
		return fmt.Errorf("fold event %d: %w", se.Sequence, err)
	}
	f.t.LastSequence = se.Sequence
	t := &f.t
	switch p := e.Payload.(type) {
	case *contract.MessagePayload:
		f.applyMessage(e.RunID, se.Sequence, p)
	case *contract.ReasoningPayload:
		f.applyReasoning(p)
	case *contract.PlanPayload:
		t.Plan = p
	case *contract.TaskPayload:
		t.Tasks = upsert(f, "task", p.TaskID, t.Tasks, *p)
	case *contract.ToolPayload:
		f.applyTool(p)
	case *contract.ApprovalPayload:
		f.applyApproval(p)
		f.placeApproval(p.ApprovalID, p.Status, e.RunID, se.Sequence)
	case *contract.ArtifactPayload:
		t.Artifacts = upsert(f, "artifact", p.ArtifactID, t.Artifacts, *p)
	case *contract.UsagePayload:
		f.applyUsage(e.RunID, p)
	case *contract.ResumePayload:
		t.Resumable = p.Resumable
	case *contract.ErrorPayload:
		t.Errors = append(t.Errors, *p)
	case *contract.DiffPayload:
		t.Diffs = upsert(f, "diff", p.Path, t.Diffs, *p)
	case *contract.WorkspaceFilePayload:
		t.WorkspaceFiles = upsert(f, "workspace-file", p.Path, t.WorkspaceFiles, *p)
	case *contract.TerminalPayload:
		f.applyTerminal(p)
	case *contract.TestResultPayload:
		t.TestResults = upsert(f, "test", p.TestID, t.TestResults, *p)
	case *contract.SteerPayload:
		t.Steers = upsert(f, "steer", p.CommandID, t.Steers, *p)
	case *contract.SummaryPayload:
		t.Summaries = upsert(f, "summary", p.SummaryID, t.Summaries, *p)
	}
	return nil
}

// applyMessage folds a message event (of run runID, at sequence seq): an append adds its parts
// to the message, a replace replaces them; the role, the sequence and a given run and status
// are the latest.
func (f *Fold) applyMessage(runID string, seq int64, p *contract.MessagePayload) {
	t := &f.t
	i, isNew := f.slot("message", p.MessageID, len(t.Messages))
	if isNew {
		t.Messages = append(t.Messages, wire.Message{MessageID: p.MessageID})
	}
	m := &t.Messages[i]
	m.Role, m.Sequence = p.Role, seq
	if runID != "" {
		m.RunID = runID
	}
	if p.Operation == "replace" {
		m.Parts = append([]json.RawMessage(nil), p.Parts...)
	} else {
		m.Parts = append(m.Parts, p.Parts...)
	}
	if p.Status != "" {
		m.Status = p.Status
	}
}

// applyReasoning folds a reasoning event: its text is appended to the reasoning's text, its
// status is the latest.
func (f *Fold) applyReasoning(p *contract.ReasoningPayload) {
	t := &f.t
	i, isNew := f.slot("reasoning", p.ReasoningID, len(t.Reasoning))
	if isNew {
		t.Reasoning = append(t.Reasoning, wire.Reasoning{ReasoningID: p.ReasoningID})
		f.text = append(f.text, &strings.Builder{})
	}
	f.text[i].WriteString(p.Text)
	t.Reasoning[i].Status = p.Status
}

// applyTool folds a tool event: a later state of a tool call keeps the input, output and start
// time earlier ones gave unless it gives them again.
func (f *Fold) applyTool(p *contract.ToolPayload) {
	t := &f.t
	i, isNew := f.slot("tool", p.ToolCallID, len(t.Tools))
	if isNew {
		t.Tools = append(t.Tools, *p)
		return
	}
	old := t.Tools[i]
	merged := *p
	if merged.Input == nil {
		merged.Input = old.Input
	}
	if merged.Output == nil {
		merged.Output = old.Output
	}
	if merged.StartedAt == "" {
		merged.StartedAt = old.StartedAt
	}
	t.Tools[i] = merged
}

// applyApproval folds an approval event: a later state keeps the tool call, requested action
// and description earlier ones gave unless it gives them again.
func (f *Fold) applyApproval(p *contract.ApprovalPayload) {
	t := &f.t
	i, isNew := f.slot("approval", p.ApprovalID, len(t.Approvals))
	if isNew {
		t.Approvals = append(t.Approvals, *p)
		return
	}
	merged := *p
	if merged.ToolCallID == "" {
		merged.ToolCallID = t.Approvals[i].ToolCallID
	}
	if merged.RequestedAction == nil {
		merged.RequestedAction = t.Approvals[i].RequestedAction
	}
	if merged.Description == nil {
		merged.Description = t.Approvals[i].Description
	}
	t.Approvals[i] = merged
}

// placeApproval records where an approval's event (of run runID, at sequence seq) leaves it.
func (f *Fold) placeApproval(id, status, runID string, seq int64) {
	if f.approvalAt == nil {
		f.approvalAt = map[string]ApprovalRef{}
	}
	ref, ok := f.approvalAt[id]
	if !ok {
		ref.Decided = -1
	}
	if status == "requested" {
		ref.Requested, ref.RunID = true, runID
	} else {
		ref.Decided = seq
	}
	f.approvalAt[id] = ref
}

// applyUsage folds a usage event (of run runID): it is the latest, and adds to the total and
// to its run's total.
func (f *Fold) applyUsage(runID string, p *contract.UsagePayload) {
	t := &f.t
	t.Usage.Latest = p
	addUsage(&t.Usage.Total, p)
	if runID != "" {
		u := t.Usage.ByRun[runID]
		if u == nil {
			u = &wire.UsageTotals{}
			t.Usage.ByRun[runID] = u
		}
		addUsage(u, p)
	}
}

// applyTerminal folds a terminal event: a chunk of output (any stream but "status") is appended
// to the terminal's output; a given exit code is the latest.
func (f *Fold) applyTerminal(p *contract.TerminalPayload) {
	t := &f.t
	i, isNew := f.slot("terminal", p.TerminalID, len(t.Terminals))
	if isNew {
		t.Terminals = append(t.Terminals, wire.Terminal{TerminalID: p.TerminalID})
		f.output = append(f.output, &strings.Builder{})
	}
	if p.Stream != "status" {
		f.output[i].WriteString(p.Chunk)
	}
	if p.ExitCode != nil {
		t.Terminals[i].ExitCode = p.ExitCode
	}
}

func upsert[T any](f *Fold, kind, id string, list []T, v T) []T {
	i, isNew := f.slot(kind, id, len(list))
	if isNew {
		return append(list, v)
	}
	list[i] = v
	return list
}

// Transcript returns the folded state; approvals are ordered pending first. The result shares
// nothing mutable with the fold. It costs time linear in the size of the transcript.
func (f *Fold) Transcript() wire.Transcript {
	t := f.t
	t.Terminals = make([]wire.Terminal, len(f.t.Terminals))
	for i, term := range f.t.Terminals {
		term.Output = f.output[i].String()
		t.Terminals[i] = term
	}
	t.Reasoning = make([]wire.Reasoning, len(f.t.Reasoning))
	for i, r := range f.t.Reasoning {
		r.Text = f.text[i].String()
		t.Reasoning[i] = r
	}
	if f.t.Terminals == nil {
		t.Terminals = nil
	}
	if f.t.Reasoning == nil {
		t.Reasoning = nil
	}
	b, _ := json.Marshal(t)
	var out wire.Transcript
	json.Unmarshal(b, &out)
	out.Approvals = pendingFirst(out.Approvals)
	return out
}

// pendingFirst orders approvals requested first, then the others, each group keeping its
// order (a stable partition, in linear time).
func pendingFirst(list []contract.ApprovalPayload) []contract.ApprovalPayload {
	if len(list) == 0 {
		return list
	}
	out := make([]contract.ApprovalPayload, 0, len(list))
	for _, a := range list {
		if a.Status == "requested" {
			out = append(out, a)
		}
	}
	for _, a := range list {
		if a.Status != "requested" {
			out = append(out, a)
		}
	}
	return out
}

// approval returns the latest state of an approval, if the log has it.
func (f *Fold) approval(id string) (contract.ApprovalPayload, bool) {
	if i, ok := f.index[slotKey{"approval", id}]; ok {
		return f.t.Approvals[i], true
	}
	return contract.ApprovalPayload{}, false
}

// summary returns the latest state of a summary, if the log has it.
func (f *Fold) summary(id string) (contract.SummaryPayload, bool) {
	if i, ok := f.index[slotKey{"summary", id}]; ok {
		return f.t.Summaries[i], true
	}
	return contract.SummaryPayload{}, false
}
