package bridge

import (
	"encoding/json"
	"strings"
)

// UIStreamHeader and UIStreamVersion are the header the AI SDK's UI message stream protocol
// sends with every stream, and its value (the protocol's version).
const (
	UIStreamHeader  = "x-vercel-ai-ui-message-stream"
	UIStreamVersion = "v1"
)

// AIMajorHeader is the request header that names the major version of the AI SDK (npm package
// ai) the client runs: "6" (the default, when absent) or "7". The stream's chunks are that
// major's: ai 7 has a chunk for an approval's decision (tool-approval-response) that ai 6's
// schema refuses. It is a header, not a query parameter, because DefaultChatTransport sends
// its headers with the resume request too, whose URL it builds from api by appending a path.
const AIMajorHeader = "X-Sessiond-AI-SDK"

// AIMajor reads the AIMajorHeader's value: 6 or 7 (6 when empty); ok is false for any other.
func AIMajor(v string) (major int, ok bool) {
	switch strings.TrimSpace(v) {
	case "", "6":
		return 6, true
	case "7":
		return 7, true
	}
	return 0, false
}

// UIEncoder returns the writer of the chunks of the AI SDK's major (6 or 7): [AppendUI], or
// [AppendUI7].
func UIEncoder(major int) func(b []byte, op *Op) []byte {
	if major == 7 {
		return AppendUI7
	}
	return AppendUI
}

// AppendUI7 is [AppendUI] for ai 7: the same chunks, and an approval's decision (and then its
// reason) as tool-approval-response.
func AppendUI7(b []byte, op *Op) []byte {
	if op.Kind != OpApprovalDecision && op.Kind != OpApprovalReason {
		return AppendUI(b, op)
	}
	decision, reason := op.Text, ""
	if op.Kind == OpApprovalReason {
		decision, reason = op.Name, op.Text
	}
	b = append(b, `data: {"type":"tool-approval-response"`...)
	b = appendField(b, "approvalId", op.ID)
	if decision == "approved" {
		b = append(b, `,"approved":true`...)
	} else {
		b = append(b, `,"approved":false`...)
	}
	if reason != "" {
		b = appendField(b, "reason", reason)
	}
	return append(b, "}\n\n"...)
}

// UIDone is the block that ends a UI message stream.
const UIDone = "data: [DONE]\n\n"

// UIStart appends the stream's start chunk: the assistant message's id is the run's id.
func UIStart(b []byte, runID string) []byte {
	b = append(b, `data: {"type":"start"`...)
	b = appendField(b, "messageId", runID)
	return append(b, "}\n\n"...)
}

// AppendUI appends the UI message stream chunks of op (protocol v1: each an SSE block
// "data: {json}") as ai 6 reads them, nothing for ops the protocol has no chunk for (in ai 6,
// an approval's decision and its reason).
func AppendUI(b []byte, op *Op) []byte {
	start := func(typ string) []byte {
		b = append(b, `data: {"type":"`...)
		b = append(b, typ...)
		return append(b, '"')
	}
	end := func() []byte { return append(b, "}\n\n"...) }
	switch op.Kind {
	case OpTextStart, OpTextEnd, OpReasoningStart, OpReasoningEnd:
		b = start(uiTypes[op.Kind])
		b = appendField(b, "id", op.ID)
		return end()
	case OpTextDelta, OpReasoningDelta:
		b = start(uiTypes[op.Kind])
		b = appendField(b, "id", op.ID)
		b = appendText(b, "delta", op)
		return end()
	case OpToolStart:
		b = start("tool-input-start")
		b = appendField(b, "toolCallId", op.ID)
		b = appendField(b, "toolName", op.Name)
		b = append(b, `,"dynamic":true`...)
		return end()
	case OpToolInput:
		b = start("tool-input-available")
		b = appendField(b, "toolCallId", op.ID)
		b = appendField(b, "toolName", op.Name)
		b = append(b, `,"input":`...)
		b = append(b, op.Raw...)
		b = append(b, `,"dynamic":true`...)
		return end()
	case OpToolOutput:
		b = start("tool-output-available")
		b = appendField(b, "toolCallId", op.ID)
		b = append(b, `,"output":`...)
		b = append(b, op.Raw...)
		b = append(b, `,"dynamic":true`...)
		return end()
	case OpToolError:
		b = start("tool-output-error")
		b = appendField(b, "toolCallId", op.ID)
		b = appendField(b, "errorText", op.Text)
		b = append(b, `,"dynamic":true`...)
		return end()
	case OpToolDenied:
		b = start("tool-output-denied")
		b = appendField(b, "toolCallId", op.ID)
		return end()
	case OpApprovalRequest:
		b = start("tool-approval-request")
		b = appendField(b, "approvalId", op.ID)
		b = appendField(b, "toolCallId", op.ToolCallID)
		return end()
	case OpData:
		b = start("data-" + op.Name)
		if op.ID != "" {
			b = appendField(b, "id", op.ID)
		}
		b = append(b, `,"data":`...)
		b = append(b, op.Raw...)
		return end()
	case OpRunWaiting:
		b = start("finish")
		b = append(b, `,"finishReason":"tool-calls"`...)
		return end()
	case OpRunCompleted:
		b = start("finish")
		b = append(b, `,"finishReason":"stop"`...)
		return end()
	case OpRunStopped:
		b = start("abort")
		if op.Text != "" {
			b = appendField(b, "reason", op.Text)
		}
		b = end()
		b = start("finish")
		b = append(b, `,"finishReason":"other"`...)
		return end()
	case OpRunFailed:
		b = start("error")
		b = appendField(b, "errorText", op.Text)
		b = end()
		b = start("finish")
		b = append(b, `,"finishReason":"error"`...)
		return end()
	}
	return b
}

var uiTypes = [...]string{
	OpTextStart: "text-start", OpTextDelta: "text-delta", OpTextEnd: "text-end",
	OpReasoningStart: "reasoning-start", OpReasoningDelta: "reasoning-delta", OpReasoningEnd: "reasoning-end",
}

// UIMessage is the AI SDK's UIMessage: what useChat holds and what the chat's history answers.
type UIMessage struct {
	ID    string   `json:"id"`
	Role  string   `json:"role"`
	Parts []UIPart `json:"parts"`
}

// UIPart is one part of a [UIMessage]: a text, a reasoning, a dynamic tool call, a data part
// (data-<kind>, the escape hatch), or a part of a user message kept as it was sent (Raw).
type UIPart struct {
	Type       string          `json:"type"`
	ID         string          `json:"id,omitempty"`
	Text       *string         `json:"text,omitempty"`
	State      string          `json:"state,omitempty"`
	ToolName   string          `json:"toolName,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	ErrorText  string          `json:"errorText,omitempty"`
	Approval   *UIApproval     `json:"approval,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
	// Raw, when set, is the part as the user sent it; it is encoded instead of the fields.
	Raw json.RawMessage `json:"-"`
}

// UIApproval is a tool call's approval in a [UIPart].
type UIApproval struct {
	ID       string `json:"id"`
	Approved *bool  `json:"approved,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// MarshalJSON encodes the part, or Raw as it was sent.
func (p UIPart) MarshalJSON() ([]byte, error) {
	if p.Raw != nil {
		return p.Raw, nil
	}
	type plain UIPart
	return json.Marshal(plain(p))
}

// UIHistory folds a log into the chat's UIMessages, as a client that had followed every run's
// stream holds them: the user's (and system) messages as sent, and one assistant message per
// run (its id is the run's id) built from the same chunks the run's stream carries.
type UIHistory struct {
	fold     *Fold
	messages []UIMessage
	runs     map[string]*uiRun // run id -> its assistant message
	cur      *uiRun            // the run of the last op
}

// uiRun is a run's assistant message in a [UIHistory]: where it is, and its open parts.
type uiRun struct {
	at      int            // index in messages
	texts   map[string]int // open text id -> part index
	reasons map[string]int
}

// NewUIHistory returns an empty history.
func NewUIHistory() *UIHistory {
	return &UIHistory{fold: NewFold(""), runs: map[string]*uiRun{}}
}

// Apply folds the next event of the log.
func (h *UIHistory) Apply(e *Event) {
	for _, op := range h.fold.Apply(e) {
		h.op(e.RunID, &op)
	}
}

// Messages returns the messages folded so far.
func (h *UIHistory) Messages() []UIMessage {
	if h.messages == nil {
		return []UIMessage{}
	}
	return h.messages
}

// assistant returns the run's assistant message, added when the run has none yet. A message
// that comes while the run goes on (an imported "[Request interrupted…]", a message queued
// behind the run) is listed after it, and the run's message goes on: one run, one message.
func (h *UIHistory) assistant(runID string) *UIMessage {
	r := h.runs[runID]
	if runID == "" && r != nil && r.at != len(h.messages)-1 {
		r = nil // events outside a run: a message of their own where they come
	}
	if r == nil {
		h.messages = append(h.messages, UIMessage{ID: runID, Role: "assistant", Parts: []UIPart{}})
		r = &uiRun{at: len(h.messages) - 1, texts: map[string]int{}, reasons: map[string]int{}}
		h.runs[strings.Clone(runID)] = r
	}
	h.cur = r
	return &h.messages[r.at]
}

func (h *UIHistory) tool(id string) *UIPart {
	if h.cur == nil {
		return nil
	}
	m := &h.messages[h.cur.at]
	for i := len(m.Parts) - 1; i >= 0; i-- {
		if p := &m.Parts[i]; p.Type == "dynamic-tool" && p.ToolCallID == id {
			return p
		}
	}
	return nil
}

func (h *UIHistory) op(runID string, op *Op) {
	if op.Kind == OpUserMessage {
		m := UIMessage{ID: op.ID, Role: op.Name, Parts: make([]UIPart, 0, len(op.Parts))}
		for _, p := range op.Parts {
			if t, ok := PartText(p); ok && p[0] == '"' {
				m.Parts = append(m.Parts, UIPart{Type: "text", Text: &t})
				continue
			}
			m.Parts = append(m.Parts, UIPart{Raw: json.RawMessage(p)})
		}
		// A message appended in several events is one message.
		if n := len(h.messages); n > 0 && h.messages[n-1].ID == op.ID {
			h.messages[n-1].Parts = append(h.messages[n-1].Parts, m.Parts...)
			return
		}
		h.messages = append(h.messages, m)
		return
	}
	if op.Kind == OpStepStart || op.Kind == OpStepEnd || op.Kind == OpState {
		return
	}
	m := h.assistant(runID)
	switch op.Kind {
	case OpTextStart, OpReasoningStart:
		typ, open := "text", h.cur.texts
		p := UIPart{Type: "text", Text: new(string), State: "streaming"}
		if op.Kind == OpReasoningStart {
			typ, open = "reasoning", h.cur.reasons
			p = UIPart{Type: typ, ID: op.ID, Text: new(string), State: "streaming"}
		}
		open[op.ID] = len(m.Parts)
		m.Parts = append(m.Parts, p)
	case OpTextDelta, OpReasoningDelta:
		open := h.cur.texts
		if op.Kind == OpReasoningDelta {
			open = h.cur.reasons
		}
		if i, ok := open[op.ID]; ok {
			*m.Parts[i].Text += op.Text
		}
	case OpTextEnd, OpReasoningEnd:
		open := h.cur.texts
		if op.Kind == OpReasoningEnd {
			open = h.cur.reasons
		}
		if i, ok := open[op.ID]; ok {
			m.Parts[i].State = "done"
			delete(open, op.ID)
		}
	case OpToolStart:
		if p := h.tool(op.ID); p != nil {
			p.State, p.Input, p.Output, p.ErrorText = "input-streaming", nil, nil, ""
			return
		}
		m.Parts = append(m.Parts, UIPart{Type: "dynamic-tool", ToolName: op.Name, ToolCallID: op.ID, State: "input-streaming"})
	case OpToolInput:
		if p := h.tool(op.ID); p != nil {
			p.State, p.Input = "input-available", json.RawMessage(op.Raw)
		}
	case OpToolOutput:
		if p := h.tool(op.ID); p != nil {
			p.State, p.Output = "output-available", json.RawMessage(op.Raw)
		}
	case OpToolError:
		if p := h.tool(op.ID); p != nil {
			p.State, p.ErrorText = "output-error", op.Text
		}
	case OpToolDenied:
		if p := h.tool(op.ID); p != nil {
			p.State = "output-denied"
		}
	case OpApprovalRequest:
		if p := h.tool(op.ToolCallID); p != nil {
			p.State, p.Approval = "approval-requested", &UIApproval{ID: op.ID}
		}
	case OpApprovalDecision:
		if p := h.tool(op.ToolCallID); p != nil && p.Approval != nil && p.Approval.ID == op.ID {
			ok := op.Text == "approved"
			p.Approval.Approved = &ok
			if p.State == "approval-requested" {
				p.State = "approval-responded"
			}
		}
	case OpApprovalReason:
		if p := h.tool(op.ToolCallID); p != nil && p.Approval != nil && p.Approval.ID == op.ID {
			p.Approval.Reason = op.Text
		}
	case OpData:
		typ := "data-" + op.Name
		if op.ID != "" {
			for i := range m.Parts {
				if m.Parts[i].Type == typ && m.Parts[i].ID == op.ID {
					m.Parts[i].Data = json.RawMessage(op.Raw)
					return
				}
			}
		}
		p := UIPart{Type: typ, ID: op.ID, Data: json.RawMessage(op.Raw)}
		m.Parts = append(m.Parts, p)
	}
}
