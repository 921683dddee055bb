package bridge

import (
	"bytes"
	"encoding/json"
	"slices"
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
	// OpTextDelta adds Text to the open text ID (TextJSON: the same text as a JSON string's
	// contents).
	OpTextDelta
	// OpTextEnd closes the text ID.
	OpTextEnd
	// OpReasoningStart opens the reasoning ID (its reasoningId).
	OpReasoningStart
	// OpReasoningDelta adds Text to the open reasoning ID (TextJSON as for OpTextDelta).
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
	// OpApprovalReason is the reason a person gave for the decision on the approval ID of the
	// tool call ToolCallID (Text = the reason, Name = the decision): the detail of the running
	// status the approval command appends with the decision (the approval event has no room
	// for it), so it follows OpApprovalDecision.
	OpApprovalReason
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
	Kind OpKind
	ID   string
	Name string
	Text string
	// TextJSON, when not nil, is Text as the contents of a JSON string (escaped, without the
	// quotes), as the event stores it: the encoders copy it instead of escaping Text again.
	TextJSON   []byte
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
// waits or ends. What it keeps across events it copies (an [Event]'s strings share the stored
// bytes, which a long stream must not keep alive). The zero value is not ready: use [NewFold].
type Fold struct {
	run       string
	texts     []string // open texts, in the order they opened
	reasoning []string // open reasonings
	tools     map[string]*toolState
	toolOrder []string               // tool call ids in the order they were first seen
	steps     map[string]string      // open steps: id -> title
	order     []string               // open steps in the order they started
	pending   []Approval             // approvals requested and not decided
	lastError *contract.ErrorPayload // the run's last error (code, message)
	decided   *Approval              // the decision of the event just folded, if it was one
	decision  string                 // its status
	stopping  map[string]string      // active run -> the reason its stop gave
	waiting   bool                   // the last status of the run followed is waiting_approval
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
		steps: map[string]string{}, taskIndex: map[string]int{}, stopping: map[string]string{}}
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

// Apply folds one event (see [Decode]) and returns its ops. The slice is reused by the next
// call.
func (f *Fold) Apply(e *Event) []Op {
	f.ops = f.ops[:0]
	if f.run != "" && e.RunID != f.run {
		return nil
	}
	decided := f.decided
	f.decided = nil
	if decided != nil && e.Type == "status" && e.Status == contract.RunStatusRunning && e.Detail != nil {
		f.emit(Op{Kind: OpApprovalReason, ID: decided.ApprovalID, ToolCallID: decided.ToolCallID, Name: f.decision, Text: *e.Detail})
	}
	switch e.Type {
	case "message":
		f.message(e)
	case "reasoning":
		if !slices.Contains(f.reasoning, e.ID) {
			f.reasoning = append(f.reasoning, strings.Clone(e.ID))
			f.emit(Op{Kind: OpReasoningStart, ID: e.ID})
		}
		if e.Text != "" {
			f.emit(Op{Kind: OpReasoningDelta, ID: e.ID, Text: e.Text, TextJSON: e.TextJSON})
		}
		if e.Status == "completed" {
			if i := slices.Index(f.reasoning, e.ID); i >= 0 {
				f.reasoning = slices.Delete(f.reasoning, i, i+1)
			}
			f.emit(Op{Kind: OpReasoningEnd, ID: e.ID})
		}
	case "tool":
		f.tool(e)
	case "approval":
		f.approval(e)
	case "plan":
		f.planEvent(e)
	case "task":
		f.taskEvent(e)
	case "status":
		if e.RunID != "" {
			f.status(e)
		} else {
			f.data(e, "")
		}
	case "error":
		f.lastError = &contract.ErrorPayload{Code: strings.Clone(e.Code), Message: strings.Clone(e.Message)}
		f.data(e, "")
	default:
		f.data(e, e.ID)
	}
	return f.ops
}

func (f *Fold) emit(op Op) { f.ops = append(f.ops, op) }

// data carries an event whole (OpData), with its subject's id ("" when the event has no
// subject: each such event is a part of its own). The subject (Event.ID) is the id an
// event's kind is keyed by, so that a later event of the same subject replaces the earlier
// one in a client that keeps one part per subject.
func (f *Fold) data(e *Event, id string) {
	f.emit(Op{Kind: OpData, Name: e.Type, ID: id, Raw: e.payloadOrData(), Event: e.Data})
}

// payloadOrData is the event's payload member; the whole event if it has none.
func (e *Event) payloadOrData() []byte {
	if len(e.Payload) == 0 {
		return e.Data
	}
	return e.Payload
}

func (f *Fold) message(e *Event) {
	if e.Role != "assistant" {
		f.emit(Op{Kind: OpUserMessage, ID: e.ID, Name: e.Role, Parts: e.Parts, Event: e.Data})
		return
	}
	if e.Operation == "replace" {
		// A replaced text cannot be taken back from a stream: the new parts go out whole.
		f.closeText(e.ID)
		f.data(e, e.ID)
		return
	}
	for _, part := range e.Other {
		f.emit(Op{Kind: OpData, Name: "message-part", Raw: part, Event: e.Data})
	}
	if !slices.Contains(f.texts, e.ID) && (e.Text != "" || e.Status != "completed") {
		f.texts = append(f.texts, strings.Clone(e.ID))
		f.emit(Op{Kind: OpTextStart, ID: e.ID})
	}
	if e.Text != "" {
		f.emit(Op{Kind: OpTextDelta, ID: e.ID, Text: e.Text, TextJSON: e.TextJSON})
	}
	if e.Status == "completed" || e.Status == "failed" {
		f.closeText(e.ID)
	}
}

func (f *Fold) closeText(id string) {
	if i := slices.Index(f.texts, id); i >= 0 {
		f.texts = slices.Delete(f.texts, i, i+1)
		f.emit(Op{Kind: OpTextEnd, ID: id})
	}
}

func (f *Fold) tool(p *Event) {
	t := f.tools[p.ID]
	if t == nil {
		id := strings.Clone(p.ID)
		t = &toolState{name: strings.Clone(p.ToolName)}
		f.tools[id] = t
		f.toolOrder = append(f.toolOrder, id)
	}
	if !t.started {
		t.started = true
		f.emit(Op{Kind: OpToolStart, ID: p.ID, Name: t.name})
	}
	final := p.Status == "completed" || p.Status == "failed" || p.Status == "denied"
	if !t.hasInput && (len(p.Input) > 0 || final || p.Status == "running") {
		t.hasInput = true
		in := p.Input
		if len(in) == 0 {
			in = []byte("{}")
		}
		f.emit(Op{Kind: OpToolInput, ID: p.ID, Name: t.name, Raw: in})
	}
	if !final || t.ended {
		return
	}
	t.ended = true
	switch p.Status {
	case "completed":
		out := p.Output
		if len(out) == 0 {
			out = []byte("null")
		}
		f.emit(Op{Kind: OpToolOutput, ID: p.ID, Name: t.name, Raw: out})
	case "failed":
		msg := "the tool call failed"
		if p.Detail != nil {
			msg = *p.Detail
		}
		f.emit(Op{Kind: OpToolError, ID: p.ID, Name: t.name, Text: msg})
	case "denied":
		f.emit(Op{Kind: OpToolDenied, ID: p.ID, Name: t.name})
	}
}

func (f *Fold) approval(p *Event) {
	if p.Status == "requested" {
		f.pending = append(f.pending, Approval{ApprovalID: strings.Clone(p.ID), ToolCallID: strings.Clone(p.ToolCallID), Title: strings.Clone(p.Title)})
		if t := f.tools[p.ToolCallID]; p.ToolCallID != "" && t != nil && t.started {
			f.emit(Op{Kind: OpApprovalRequest, ID: p.ID, ToolCallID: p.ToolCallID, Text: p.Title, Raw: p.payloadOrData(), Event: p.Data})
			return
		}
		f.data(p, p.ID)
		return
	}
	for i, a := range f.pending {
		if a.ApprovalID == p.ID {
			f.pending = append(f.pending[:i], f.pending[i+1:]...)
			break
		}
	}
	if p.Status == "approved" || p.Status == "rejected" {
		f.decided = &Approval{ApprovalID: strings.Clone(p.ID), ToolCallID: strings.Clone(p.ToolCallID)}
		f.decision = p.Status
	}
	if t := f.tools[p.ToolCallID]; p.ToolCallID != "" && t != nil && (p.Status == "approved" || p.Status == "rejected") {
		f.emit(Op{Kind: OpApprovalDecision, ID: p.ID, ToolCallID: p.ToolCallID, Text: p.Status, Raw: p.payloadOrData(), Event: p.Data})
		return
	}
	f.data(p, p.ID)
}

func (f *Fold) planEvent(p *Event) {
	for _, s := range p.Steps {
		_, open := f.steps[s.ID]
		switch {
		case s.Status == "running" && !open:
			id := strings.Clone(s.ID)
			f.steps[id] = strings.Clone(s.Title)
			f.order = append(f.order, id)
			f.emit(Op{Kind: OpStepStart, ID: s.ID, Name: s.Title})
		case open && s.Status != "running" && s.Status != "pending":
			f.endStep(s.ID)
		}
	}
	f.plan = bytes.Clone(p.payloadOrData())
	f.data(p, p.ID)
	f.emit(Op{Kind: OpState, Raw: f.state()})
}

func (f *Fold) taskEvent(p *Event) {
	if i, ok := f.taskIndex[p.ID]; ok {
		f.tasks[i] = bytes.Clone(p.payloadOrData())
	} else {
		f.taskIndex[strings.Clone(p.ID)] = len(f.tasks)
		f.tasks = append(f.tasks, bytes.Clone(p.payloadOrData()))
	}
	f.data(p, p.ID)
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

func (f *Fold) status(p *Event) {
	f.waiting = p.Status == contract.RunStatusWaitingApproval
	switch p.Status {
	case "stopping":
		if p.Detail != nil {
			f.stopping[strings.Clone(p.RunID)] = strings.Clone(*p.Detail)
		}
	case "waiting_approval":
		f.closeAll()
		f.emit(Op{Kind: OpRunWaiting, Approvals: append([]Approval(nil), f.pending...)})
	case "completed":
		f.closeAll()
		f.emit(Op{Kind: OpRunCompleted})
	case "stopped":
		f.closeAll()
		// The reason is the stop's (the stopping status's detail), unless the runtime
		// that confirmed the stop gave one of its own.
		op := Op{Kind: OpRunStopped, Text: f.stopping[p.RunID]}
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
	if contract.IsTerminal(p.Status) {
		f.pending = nil
		delete(f.stopping, p.RunID)
	}
}

// Waiting returns the approvals the run waits for when the last status the fold read of it
// is waiting_approval (a stream that starts while the run waits offers them: [OpRunWaiting]),
// else nil.
func (f *Fold) Waiting() []Approval {
	if !f.waiting || len(f.pending) == 0 {
		return nil
	}
	return append([]Approval(nil), f.pending...)
}

// Ends reports whether op ends a run's stream: the run finished, or waits for a person.
func (op *Op) Ends() bool {
	return op.Kind >= OpRunWaiting
}
