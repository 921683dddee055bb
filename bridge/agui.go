package bridge

import (
	"encoding/json"
	"strings"

	"github.com/sessiond/sessiond/contract"
)

// AGUIRun names the AG-UI run a stream answers: the thread (the session) and the run id the
// client sent in its RunAgentInput.
type AGUIRun struct {
	ThreadID, RunID string
}

func aguiStart(b []byte, typ string) []byte {
	b = append(b, `data: {"type":"`...)
	b = append(b, typ...)
	return append(b, '"')
}

func aguiEnd(b []byte) []byte { return append(b, "}\n\n"...) }

// AGUIRunStarted appends RUN_STARTED, the first event of every AG-UI stream.
func AGUIRunStarted(b []byte, r AGUIRun) []byte {
	b = aguiStart(b, "RUN_STARTED")
	b = appendField(b, "threadId", r.ThreadID)
	b = appendField(b, "runId", r.RunID)
	return aguiEnd(b)
}

// AGUISnapshot appends MESSAGES_SNAPSHOT with messages (the history the stream starts from).
func AGUISnapshot(b []byte, messages []AGUIMessage) []byte {
	b = aguiStart(b, "MESSAGES_SNAPSHOT")
	m, _ := json.Marshal(messages)
	b = append(b, `,"messages":`...)
	b = append(b, m...)
	return aguiEnd(b)
}

// AppendAGUI appends the AG-UI events of op (each an SSE block "data: {json}"), nothing for
// ops AG-UI has no event for.
func AppendAGUI(b []byte, op *Op, r AGUIRun) []byte {
	switch op.Kind {
	case OpTextStart:
		b = aguiStart(b, "TEXT_MESSAGE_START")
		b = appendField(b, "messageId", op.ID)
		b = append(b, `,"role":"assistant"`...)
		return aguiEnd(b)
	case OpTextDelta, OpReasoningDelta:
		typ := "TEXT_MESSAGE_CONTENT"
		if op.Kind == OpReasoningDelta {
			typ = "REASONING_MESSAGE_CONTENT"
		}
		b = aguiStart(b, typ)
		b = appendField(b, "messageId", op.ID)
		b = appendText(b, "delta", op)
		return aguiEnd(b)
	case OpTextEnd:
		b = aguiStart(b, "TEXT_MESSAGE_END")
		b = appendField(b, "messageId", op.ID)
		return aguiEnd(b)
	case OpReasoningStart:
		b = aguiStart(b, "REASONING_START")
		b = appendField(b, "messageId", op.ID)
		b = aguiEnd(b)
		b = aguiStart(b, "REASONING_MESSAGE_START")
		b = appendField(b, "messageId", op.ID)
		b = append(b, `,"role":"reasoning"`...)
		return aguiEnd(b)
	case OpReasoningEnd:
		b = aguiStart(b, "REASONING_MESSAGE_END")
		b = appendField(b, "messageId", op.ID)
		b = aguiEnd(b)
		b = aguiStart(b, "REASONING_END")
		b = appendField(b, "messageId", op.ID)
		return aguiEnd(b)
	case OpToolStart:
		b = aguiStart(b, "TOOL_CALL_START")
		b = appendField(b, "toolCallId", op.ID)
		b = appendField(b, "toolCallName", op.Name)
		return aguiEnd(b)
	case OpToolInput:
		b = aguiStart(b, "TOOL_CALL_ARGS")
		b = appendField(b, "toolCallId", op.ID)
		b = appendField(b, "delta", string(op.Raw))
		b = aguiEnd(b)
		b = aguiStart(b, "TOOL_CALL_END")
		b = appendField(b, "toolCallId", op.ID)
		return aguiEnd(b)
	case OpToolOutput, OpToolError, OpToolDenied:
		b = aguiStart(b, "TOOL_CALL_RESULT")
		b = appendField(b, "messageId", ToolResultID(op.ID))
		b = appendField(b, "toolCallId", op.ID)
		b = appendField(b, "content", toolContent(op))
		b = append(b, `,"role":"tool"`...)
		return aguiEnd(b)
	case OpStepStart, OpStepEnd:
		typ := "STEP_STARTED"
		if op.Kind == OpStepEnd {
			typ = "STEP_FINISHED"
		}
		b = aguiStart(b, typ)
		b = appendField(b, "stepName", stepName(op))
		return aguiEnd(b)
	case OpState:
		b = aguiStart(b, "STATE_SNAPSHOT")
		b = append(b, `,"snapshot":`...)
		b = append(b, op.Raw...)
		return aguiEnd(b)
	case OpApprovalRequest, OpApprovalDecision:
		return appendCustom(b, "approval", op)
	case OpApprovalReason:
		b = aguiStart(b, "CUSTOM")
		b = appendField(b, "name", "sessiond.approval-reason")
		b = append(b, `,"value":{"approvalId":`...)
		b = contract.AppendString(b, op.ID)
		if op.ToolCallID != "" {
			b = appendField(b, "toolCallId", op.ToolCallID)
		}
		b = appendField(b, "status", op.Name)
		b = appendField(b, "reason", op.Text)
		b = append(b, '}')
		return aguiEnd(b)
	case OpData:
		if op.Name == "plan" || op.Name == "task" {
			return b // in STATE_SNAPSHOT (and the plan's steps in STEP_*)
		}
		return appendCustom(b, op.Name, op)
	case OpRunWaiting:
		b = aguiStart(b, "RUN_FINISHED")
		b = appendField(b, "threadId", r.ThreadID)
		b = appendField(b, "runId", r.RunID)
		if len(op.Approvals) == 0 {
			return aguiEnd(b)
		}
		b = append(b, `,"outcome":{"type":"interrupt","interrupts":[`...)
		for i, a := range op.Approvals {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			b = append(b, `"id":`...)
			b = contract.AppendString(b, a.ApprovalID)
			b = appendField(b, "reason", "approval")
			b = appendField(b, "message", a.Title)
			if a.ToolCallID != "" {
				b = appendField(b, "toolCallId", a.ToolCallID)
			}
			b = append(b, '}')
		}
		b = append(b, "]}"...)
		return aguiEnd(b)
	case OpRunCompleted, OpRunStopped:
		b = aguiStart(b, "RUN_FINISHED")
		b = appendField(b, "threadId", r.ThreadID)
		b = appendField(b, "runId", r.RunID)
		if op.Kind == OpRunStopped {
			b = append(b, `,"outcome":{"type":"cancelled"}`...)
		} else {
			b = append(b, `,"outcome":{"type":"success"}`...)
		}
		return aguiEnd(b)
	case OpRunFailed:
		b = aguiStart(b, "RUN_ERROR")
		b = appendField(b, "message", op.Text)
		if op.Code != "" {
			b = appendField(b, "code", op.Code)
		}
		return aguiEnd(b)
	}
	return b
}

// appendCustom appends CUSTOM named "sessiond.<kind>" with the event's payload as value and
// the whole event as rawEvent.
func appendCustom(b []byte, kind string, op *Op) []byte {
	b = aguiStart(b, "CUSTOM")
	b = appendField(b, "name", "sessiond."+kind)
	b = append(b, `,"value":`...)
	b = append(b, op.Raw...)
	if len(op.Event) > 0 {
		b = append(b, `,"rawEvent":`...)
		b = append(b, op.Event...)
	}
	return aguiEnd(b)
}

func stepName(op *Op) string {
	if strings.TrimSpace(op.Name) != "" {
		return op.Name
	}
	return op.ID
}

// ToolResultID is the id of the tool message that carries a tool call's result in AG-UI.
func ToolResultID(toolCallID string) string { return "result-" + toolCallID }

// toolContent is a tool message's content: the output (a JSON string as its text, any other
// value as its JSON), the error, or "denied".
func toolContent(op *Op) string {
	switch op.Kind {
	case OpToolError:
		return op.Text
	case OpToolDenied:
		return "denied"
	}
	if s, ok := unquote(op.Raw); ok {
		return s
	}
	return string(op.Raw)
}

// AGUIMessage is an AG-UI message (user, system, assistant, reasoning or tool), as
// MESSAGES_SNAPSHOT carries it and HttpAgent keeps it in agent.messages.
type AGUIMessage struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Content    any             `json:"content,omitempty"`
	ToolCalls  []AGUIToolCall  `json:"toolCalls,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
}

// AGUIToolCall is a tool call of an assistant [AGUIMessage].
type AGUIToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// AGUIHistory folds a log into AG-UI messages, as HttpAgent builds them from the stream: the
// same ops, reduced the way the client reduces the events they become.
type AGUIHistory struct {
	fold     *Fold
	messages []AGUIMessage
	index    map[string]int // message id -> position
}

// NewAGUIHistory returns an empty history.
func NewAGUIHistory() *AGUIHistory {
	return &AGUIHistory{fold: NewFold(""), index: map[string]int{}}
}

// Apply folds the next event of the log.
func (h *AGUIHistory) Apply(e *Event) {
	for _, op := range h.fold.Apply(e) {
		h.op(&op)
	}
}

// Messages returns the messages folded so far.
func (h *AGUIHistory) Messages() []AGUIMessage {
	if h.messages == nil {
		return []AGUIMessage{}
	}
	return h.messages
}

func (h *AGUIHistory) push(m AGUIMessage) {
	h.index[m.ID] = len(h.messages)
	h.messages = append(h.messages, m)
}

func (h *AGUIHistory) appendContent(id, text string) {
	if i, ok := h.index[id]; ok {
		s, _ := h.messages[i].Content.(string)
		h.messages[i].Content = s + text
	}
}

func (h *AGUIHistory) call(id string) *AGUIToolCall {
	for i := len(h.messages) - 1; i >= 0; i-- {
		for j := range h.messages[i].ToolCalls {
			if h.messages[i].ToolCalls[j].ID == id {
				return &h.messages[i].ToolCalls[j]
			}
		}
	}
	return nil
}

func (h *AGUIHistory) op(op *Op) {
	switch op.Kind {
	case OpUserMessage:
		if _, ok := h.index[op.ID]; ok {
			h.addParts(op.ID, op.Parts)
			return
		}
		h.push(AGUIMessage{ID: op.ID, Role: op.Name, Content: ""})
		h.addParts(op.ID, op.Parts)
	case OpTextStart, OpReasoningStart:
		if _, ok := h.index[op.ID]; ok {
			return
		}
		role := "assistant"
		if op.Kind == OpReasoningStart {
			role = "reasoning"
		}
		h.push(AGUIMessage{ID: op.ID, Role: role, Content: ""})
	case OpTextDelta, OpReasoningDelta:
		h.appendContent(op.ID, op.Text)
	case OpToolStart:
		if h.call(op.ID) != nil {
			return
		}
		c := AGUIToolCall{ID: op.ID, Type: "function"}
		c.Function.Name = op.Name
		if i, ok := h.index[op.ID]; ok && h.messages[i].Role == "assistant" {
			h.messages[i].ToolCalls = append(h.messages[i].ToolCalls, c)
			return
		}
		h.push(AGUIMessage{ID: op.ID, Role: "assistant", ToolCalls: []AGUIToolCall{c}})
	case OpToolInput:
		if c := h.call(op.ID); c != nil {
			c.Function.Arguments += string(op.Raw)
		}
	case OpToolOutput, OpToolError, OpToolDenied:
		m := AGUIMessage{ID: ToolResultID(op.ID), Role: "tool", ToolCallID: op.ID, Content: toolContent(op)}
		at := -1
		for i := len(h.messages) - 1; i >= 0 && at < 0; i-- {
			for _, c := range h.messages[i].ToolCalls {
				if c.ID == op.ID {
					at = i + 1
					break
				}
			}
		}
		if at < 0 {
			h.push(m)
			return
		}
		for at < len(h.messages) && h.messages[at].Role == "tool" {
			at++
		}
		h.messages = append(h.messages, AGUIMessage{})
		copy(h.messages[at+1:], h.messages[at:])
		h.messages[at] = m
		for i := at; i < len(h.messages); i++ {
			h.index[h.messages[i].ID] = i
		}
	}
}

// addParts adds a user or system message's parts: text parts to its content (a string);
// other parts are kept under metadata.sessiondParts, AG-UI's content parts being a closed set.
func (h *AGUIHistory) addParts(id string, parts []contract.RawJSON) {
	i := h.index[id]
	m := &h.messages[i]
	var other []json.RawMessage
	if len(m.Metadata) > 0 {
		var md struct {
			Parts []json.RawMessage `json:"sessiondParts"`
		}
		_ = json.Unmarshal(m.Metadata, &md)
		other = md.Parts
	}
	for _, p := range parts {
		if t, ok := PartText(p); ok {
			s, _ := m.Content.(string)
			m.Content = s + t
			continue
		}
		other = append(other, json.RawMessage(p))
	}
	if len(other) > 0 {
		md, _ := json.Marshal(map[string]any{"sessiondParts": other})
		m.Metadata = md
	}
}
