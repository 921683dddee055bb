package bridge

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sessiond/sessiond/contract"
)

// OpKind says what an [Op] is.
type OpKind uint8

// The kinds of ops a [Fold] produces. Each names the fields of [Op] it sets.
const (
	// OpUserMessage is a message of the user or the system (ID, Name = the role, Parts): a
	// whole message, for history; the streams leave it out.
	OpUserMessage OpKind = iota + 1
	// OpTextStart opens the text of an assistant message (ID = its messageId).
	OpTextStart
	// OpTextDelta adds Text to the open text ID.
	OpTextDelta
	// OpTextEnd closes the text ID.
	OpTextEnd
	// OpReasoningStart opens the reasoning ID (its reasoningId).
	OpReasoningStart
	// OpReasoningDelta adds Text to the open reasoning ID.
	OpReasoningDelta
	// OpReasoningEnd closes the reasoning ID.
	OpReasoningEnd
	// OpToolStart is the first sight of the tool call ID, named Name.
	OpToolStart
	// OpToolInput gives the input Raw of the tool call ID (Name), once.
	OpToolInput
	// OpToolOutput gives the output Raw of the tool call ID (Raw is null without one).
	OpToolOutput
	// OpToolError says the tool call ID failed with the error Text.
	OpToolError
	// OpToolDenied says the tool call ID was denied.
	OpToolDenied
	// OpApprovalRequest is a requested approval (ID = approvalId, ToolCallID, Text = title,
	// Raw = the payload).
	OpApprovalRequest
	// OpApprovalDecision is the decision on an approval of an announced tool call (ID =
	// approvalId, ToolCallID, Text = "approved" or "rejected", Raw = the payload).
	OpApprovalDecision
	// OpStepStart is a plan step that started running (ID = the step id, Name = its title).
	OpStepStart
	// OpStepEnd is a started plan step that ended (ID, Name as for OpStepStart).
	OpStepEnd
	// OpState is the session's state after a plan or task event (Raw: {"plan":…,"tasks":[…]}).
	OpState
	// OpData is an event with no home of its own in the protocols, carried whole: Name = its
	// event type, ID = its subject (planId, path, artifactId, …; "" for events without one,
	// such as terminal output and usage), Raw = its payload, Event = the whole event as stored.
	OpData
	// OpRunWaiting is the run waiting for the approvals in Approvals.
	OpRunWaiting
	// OpRunCompleted is the run completed.
	OpRunCompleted
	// OpRunStopped is the run stopped (Text: the reason, when the stop gave one).
	OpRunStopped
	// OpRunFailed is the run failed (Text: the message, Code: the error code, when known).
	OpRunFailed
)

// Op is one step of the projection: what an event means, independent of any protocol.
type Op struct {
	Kind       OpKind
	ID         string
	Name       string
	Text       string
	Code       string
	ToolCallID string
	Raw        []byte
	Parts      []contract.RawJSON
	Event      []byte
	Approvals  []Approval
}

// Approval is a pending approval a run waits for.
type Approval struct {
	ApprovalID string
	ToolCallID string
	Title      string
}

// Fold turns the events of a log, in order, into [Op]s. With a run id it follows that run
// only (a run's stream); without, every run and every message (history). A fold keeps what
// the protocols need to stay well-formed: which texts, reasonings and steps are open, which
// tool calls were announced and which have their input; it closes what is open when a run
// waits or ends. The zero value is not ready: use [NewFold].
type Fold struct {
	run       string
	texts     []string // open texts, in the order they opened
	reasoning []string // open reasonings
	tools     map[string]*toolState
	toolOrder []string          // tool call ids in the order they were first seen
	steps     map[string]string // open steps: id -> title
	order     []string          // open steps in the order they started
	pending   []Approval        // approvals requested and not decided
	lastError *contract.ErrorPayload
	plan      json.RawMessage
	tasks     []json.RawMessage
	taskIndex map[string]int
	ops       []Op
}

type toolState struct {
	name     string
	started  bool // announced (OpToolStart)
	hasInput bool // OpToolInput sent
	ended    bool // an output, error or denial sent
}

// NewFold returns a fold of the run runID ("" for every run: history).
func NewFold(runID string) *Fold {
	return &Fold{run: runID, tools: map[string]*toolState{},
		steps: map[string]string{}, taskIndex: map[string]int{}}
}

// Cut forgets what the client of a new stream cannot know to be open: the texts, reasonings
// and steps opened before the cut, and the tool calls announced without their input. Events
// after the cut open them again. A stream that starts mid-run (after an approval, or after a
// snapshot of history) folds the events before its cut silently, then calls Cut.
func (f *Fold) Cut() {
	f.texts, f.reasoning = f.texts[:0], f.reasoning[:0]
	clear(f.steps)
	f.order = f.order[:0]
	for _, t := range f.tools {
		if !t.hasInput && !t.ended {
			t.started = false
		}
	}
}

// Pending returns the approvals the run waits for (requested, not yet decided).
func (f *Fold) Pending() []Approval { return f.pending }

// Apply folds one event (its decoded form e and the bytes stored, data) and returns its ops.
// The slice is reused by the next call.
func (f *Fold) Apply(e *contract.Event, data []byte) []Op {
	f.ops = f.ops[:0]
	if f.run != "" && e.RunID != f.run {
		return nil
	}
	switch p := e.Payload.(type) {
	case *contract.MessagePayload:
		f.message(e, p, data)
	case *contract.ReasoningPayload:
		if !has(f.reasoning, p.ReasoningID) {
			f.reasoning = append(f.reasoning, p.ReasoningID)
			f.emit(Op{Kind: OpReasoningStart, ID: p.ReasoningID})
		}
		if p.Text != "" {
			f.emit(Op{Kind: OpReasoningDelta, ID: p.ReasoningID, Text: p.Text})
		}
		if p.Status == "completed" {
			f.reasoning = remove(f.reasoning, p.ReasoningID)
			f.emit(Op{Kind: OpReasoningEnd, ID: p.ReasoningID})
		}
	case *contract.ToolPayload:
		f.tool(p)
	case *contract.ApprovalPayload:
		f.approval(e, p, data)
	case *contract.PlanPayload:
		f.planEvent(e, p, data)
	case *contract.TaskPayload:
		f.taskEvent(e, p, data)
	case *contract.StatusPayload:
		if e.RunID != "" {
			f.status(e, p, data)
		} else {
			f.data(e, data, "")
		}
	case *contract.ErrorPayload:
		f.lastError = p
		f.data(e, data, "")
	default:
		f.data(e, data, subject(e))
	}
	return f.ops
}

func (f *Fold) emit(op Op) { f.ops = append(f.ops, op) }

// data carries an event whole (OpData), with its subject's id ("" when the event has no
// subject: each such event is a part of its own).
func (f *Fold) data(e *contract.Event, data []byte, id string) {
	f.emit(Op{Kind: OpData, Name: e.EventType, ID: id, Raw: payloadOf(data), Event: data})
}

// subject is the id an event's kind is keyed by, so that a later event of the same subject
// replaces the earlier one in a client that keeps one part per subject ("" for none).
func subject(e *contract.Event) string {
	switch p := e.Payload.(type) {
	case *contract.ArtifactPayload:
		return p.ArtifactID
	case *contract.DiffPayload:
		return p.Path
	case *contract.WorkspaceFilePayload:
		return p.Path
	case *contract.TestResultPayload:
		return p.TestID
	case *contract.SteerPayload:
		return p.CommandID
	case *contract.SummaryPayload:
		return p.SummaryID
	}
	return ""
}

func (f *Fold) message(e *contract.Event, p *contract.MessagePayload, data []byte) {
	if p.Role != "assistant" {
		f.emit(Op{Kind: OpUserMessage, ID: p.MessageID, Name: p.Role, Parts: p.Parts, Event: data})
		return
	}
	if p.Operation == "replace" {
		// A replaced text cannot be taken back from a stream: the new parts go out whole.
		f.closeText(p.MessageID)
		f.data(e, data, p.MessageID)
		return
	}
	var text strings.Builder
	for _, part := range p.Parts {
		if t, ok := PartText(part); ok {
			text.WriteString(t)
		} else {
			f.emit(Op{Kind: OpData, Name: "message-part", Raw: part, Event: data})
		}
	}
	if !has(f.texts, p.MessageID) && (text.Len() > 0 || p.Status != "completed") {
		f.texts = append(f.texts, p.MessageID)
		f.emit(Op{Kind: OpTextStart, ID: p.MessageID})
	}
	if text.Len() > 0 {
		f.emit(Op{Kind: OpTextDelta, ID: p.MessageID, Text: text.String()})
	}
	if p.Status == "completed" || p.Status == "failed" {
		f.closeText(p.MessageID)
	}
}

func (f *Fold) closeText(id string) {
	if has(f.texts, id) {
		f.texts = remove(f.texts, id)
		f.emit(Op{Kind: OpTextEnd, ID: id})
	}
}

func (f *Fold) tool(p *contract.ToolPayload) {
	t := f.tools[p.ToolCallID]
	if t == nil {
		t = &toolState{name: p.ToolName}
		f.tools[p.ToolCallID] = t
		f.toolOrder = append(f.toolOrder, p.ToolCallID)
	}
	if !t.started {
		t.started = true
		f.emit(Op{Kind: OpToolStart, ID: p.ToolCallID, Name: t.name})
	}
	final := p.Status == "completed" || p.Status == "failed" || p.Status == "denied"
	if !t.hasInput && (len(p.Input) > 0 || final || p.Status == "running") {
		t.hasInput = true
		in := []byte(p.Input)
		if len(in) == 0 {
			in = []byte("{}")
		}
		f.emit(Op{Kind: OpToolInput, ID: p.ToolCallID, Name: t.name, Raw: in})
	}
	if !final || t.ended {
		return
	}
	t.ended = true
	switch p.Status {
	case "completed":
		out := []byte(p.Output)
		if len(out) == 0 {
			out = []byte("null")
		}
		f.emit(Op{Kind: OpToolOutput, ID: p.ToolCallID, Name: t.name, Raw: out})
	case "failed":
		msg := "the tool call failed"
		if p.Error != nil {
			msg = *p.Error
		}
		f.emit(Op{Kind: OpToolError, ID: p.ToolCallID, Name: t.name, Text: msg})
	case "denied":
		f.emit(Op{Kind: OpToolDenied, ID: p.ToolCallID, Name: t.name})
	}
}

func (f *Fold) approval(e *contract.Event, p *contract.ApprovalPayload, data []byte) {
	if p.Status == "requested" {
		f.pending = append(f.pending, Approval{ApprovalID: p.ApprovalID, ToolCallID: p.ToolCallID, Title: p.Title})
		if t := f.tools[p.ToolCallID]; p.ToolCallID != "" && t != nil && t.started {
			f.emit(Op{Kind: OpApprovalRequest, ID: p.ApprovalID, ToolCallID: p.ToolCallID, Text: p.Title, Raw: payloadOf(data), Event: data})
			return
		}
		f.data(e, data, p.ApprovalID)
		return
	}
	for i, a := range f.pending {
		if a.ApprovalID == p.ApprovalID {
			f.pending = append(f.pending[:i], f.pending[i+1:]...)
			break
		}
	}
	if t := f.tools[p.ToolCallID]; p.ToolCallID != "" && t != nil && (p.Status == "approved" || p.Status == "rejected") {
		f.emit(Op{Kind: OpApprovalDecision, ID: p.ApprovalID, ToolCallID: p.ToolCallID, Text: p.Status, Raw: payloadOf(data), Event: data})
		return
	}
	f.data(e, data, p.ApprovalID)
}

func (f *Fold) planEvent(e *contract.Event, p *contract.PlanPayload, data []byte) {
	for _, s := range p.Steps {
		_, open := f.steps[s.ID]
		switch {
		case s.Status == "running" && !open:
			f.steps[s.ID] = s.Title
			f.order = append(f.order, s.ID)
			f.emit(Op{Kind: OpStepStart, ID: s.ID, Name: s.Title})
		case open && s.Status != "running" && s.Status != "pending":
			f.endStep(s.ID)
		}
	}
	f.plan = payloadOf(data)
	f.data(e, data, p.PlanID)
	f.emit(Op{Kind: OpState, Raw: f.state()})
}

func (f *Fold) taskEvent(e *contract.Event, p *contract.TaskPayload, data []byte) {
	if i, ok := f.taskIndex[p.TaskID]; ok {
		f.tasks[i] = payloadOf(data)
	} else {
		f.taskIndex[p.TaskID] = len(f.tasks)
		f.tasks = append(f.tasks, payloadOf(data))
	}
	f.data(e, data, p.TaskID)
	f.emit(Op{Kind: OpState, Raw: f.state()})
}

// state is {"plan": the latest plan or null, "tasks": the latest state of each task}.
func (f *Fold) state() []byte {
	b := []byte(`{"plan":`)
	if f.plan != nil {
		b = append(b, f.plan...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"tasks":[`...)
	for i, t := range f.tasks {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, t...)
	}
	return append(b, "]}"...)
}

func (f *Fold) endStep(id string) {
	title, ok := f.steps[id]
	if !ok {
		return
	}
	delete(f.steps, id)
	for i, s := range f.order {
		if s == id {
			f.order = append(f.order[:i], f.order[i+1:]...)
			break
		}
	}
	f.emit(Op{Kind: OpStepEnd, ID: id, Name: title})
}

// closeAll closes every open text, reasoning and step, and ends the announced tool calls
// that never got their input (their input is then {}).
func (f *Fold) closeAll() {
	for _, id := range f.texts {
		f.emit(Op{Kind: OpTextEnd, ID: id})
	}
	f.texts = f.texts[:0]
	for _, id := range f.reasoning {
		f.emit(Op{Kind: OpReasoningEnd, ID: id})
	}
	f.reasoning = f.reasoning[:0]
	for len(f.order) > 0 {
		f.endStep(f.order[len(f.order)-1])
	}
	for _, id := range f.toolOrder {
		if t := f.tools[id]; t.started && !t.hasInput {
			t.hasInput = true
			f.emit(Op{Kind: OpToolInput, ID: id, Name: t.name, Raw: []byte("{}")})
		}
	}
}

func (f *Fold) status(e *contract.Event, p *contract.StatusPayload, data []byte) {
	switch p.Status {
	case "waiting_approval":
		f.closeAll()
		f.emit(Op{Kind: OpRunWaiting, Approvals: append([]Approval(nil), f.pending...)})
	case "completed":
		f.closeAll()
		f.emit(Op{Kind: OpRunCompleted})
	case "stopped":
		f.closeAll()
		op := Op{Kind: OpRunStopped}
		if p.Detail != nil {
			op.Text = *p.Detail
		}
		f.emit(op)
	case "failed":
		f.closeAll()
		op := Op{Kind: OpRunFailed, Text: "the run failed"}
		if p.Detail != nil {
			op.Text = *p.Detail
		}
		if f.lastError != nil {
			op.Text, op.Code = f.lastError.Message, f.lastError.Code
		}
		f.emit(op)
	}
	if p.Status == "completed" || p.Status == "stopped" || p.Status == "failed" {
		f.pending = nil
	}
}

func has(list []string, id string) bool {
	for _, s := range list {
		if s == id {
			return true
		}
	}
	return false
}

func remove(list []string, id string) []string {
	for i, s := range list {
		if s == id {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

// Ends reports whether op ends a run's stream: the run finished, or waits for a person.
func (op *Op) Ends() bool {
	return op.Kind >= OpRunWaiting
}

// PartText is the text of a message part: a text part's text, or a part that is a plain
// string (the contract allows any JSON value as a part).
func PartText(part contract.RawJSON) (string, bool) {
	if len(part) > 0 && part[0] == '"' {
		var s string
		if json.Unmarshal(part, &s) == nil {
			return s, true
		}
		return "", false
	}
	var obj struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if len(part) == 0 || part[0] != '{' || json.Unmarshal(part, &obj) != nil || obj.Type != "text" || obj.Text == nil {
		return "", false
	}
	return *obj.Text, true
}

// payloadOf returns the payload member of a stored event (canonical JSON, so "payload" is a
// top-level key); the whole event if it has none.
func payloadOf(data []byte) []byte {
	var v struct {
		Payload json.RawMessage `json:"payload"`
	}
	if json.Unmarshal(data, &v) != nil || len(v.Payload) == 0 {
		return data
	}
	return v.Payload
}

// Decode decodes a stored event for [Fold.Apply].
func Decode(data []byte) (*contract.Event, error) {
	var e contract.Event
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("bridge: decode event: %w", err)
	}
	return &e, nil
}
