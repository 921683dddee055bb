package acp

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sessiond/sessiond/contract"
)

// This file is the one place where ACP messages become contract events (docs/agents.md has
// the table). A [Mapper] holds the state of one prompt turn (one run): the message and
// reasoning being streamed, the tool calls seen so far (an update carries only what changed;
// the contract's tool event carries the whole state), the plan.

// Out is one contract event the mapping produces: its type and payload. The recorder adds the
// header (ids, session, run, time).
type Out struct {
	Type    string
	Payload contract.Payload
}

// Mapper maps the messages of one prompt turn to contract events. Root, when set, makes the
// paths of diffs relative to it. Terminal, when set, returns the output so far and the exit
// code of a terminal this client hosts, for the tool content that embeds it.
type Mapper struct {
	RunID    string
	Root     string
	Terminal func(id string) (output string, exitCode *int64, ok bool)

	segment   int    // bumped when a tool call interrupts the streamed text
	message   string // the assistant message being streamed ("" when none)
	reasoning string
	tools     map[string]*contract.ToolPayload
	approvals int
	Skipped   map[string]int // update kinds recorded as nothing, with their count
}

func (m *Mapper) id(kind string) string {
	return m.RunID + "-" + kind + "-" + strconv.Itoa(m.segment)
}

func (m *Mapper) skip(kind string) []Out {
	if m.Skipped == nil {
		m.Skipped = map[string]int{}
	}
	m.Skipped[kind]++
	return nil
}

// Update maps one session/update notification's update.
func (m *Mapper) Update(raw json.RawMessage) ([]Out, error) {
	var u SessionUpdate
	if err := json.Unmarshal(raw, &u); err != nil {
		return nil, fmt.Errorf("session/update: %w", err)
	}
	switch u.SessionUpdate {
	case "agent_message_chunk":
		id := m.id("msg")
		if u.MessageID != nil && *u.MessageID != "" {
			id = *u.MessageID
		}
		m.message = id
		return []Out{{"message", &contract.MessagePayload{MessageID: id, Role: "assistant", Operation: "append",
			Parts: []contract.RawJSON{contract.CleanJSON(contract.RawJSON(u.Content))}, Status: "streaming"}}}, nil
	case "user_message_chunk":
		// An agent echoes the prompt (or replays history on session/load): the user's message
		// is in the log already when sessiond sent the prompt.
		return m.skip("user_message_chunk"), nil
	case "agent_thought_chunk":
		id := m.id("thought")
		if u.MessageID != nil && *u.MessageID != "" {
			id = *u.MessageID
		}
		m.reasoning = id
		return []Out{{"reasoning", &contract.ReasoningPayload{ReasoningID: id, Text: blockText(u.Content), Status: "streaming"}}}, nil
	case "tool_call", "tool_call_update":
		return m.tool(u.ToolCall, u.Content, u.SessionUpdate == "tool_call")
	case "plan":
		return []Out{{"plan", planPayload(m.RunID+"-plan", u.Entries)}}, nil
	case "usage_update":
		return []Out{{"usage", &contract.UsagePayload{ContextTokens: contract.Count(u.Used, 0), ContextWindow: contract.Count(u.Size, 1)}}}, nil
	default:
		// available_commands_update, current_mode_update, config_option_update,
		// session_info_update, and kinds newer than this client: not part of the log.
		return m.skip(u.SessionUpdate), nil
	}
}

// closeStreams ends the streamed message and reasoning of the current segment.
func (m *Mapper) closeStreams() []Out {
	var out []Out
	if m.message != "" {
		out = append(out, Out{"message", &contract.MessagePayload{MessageID: m.message, Role: "assistant", Operation: "append", Parts: []contract.RawJSON{}, Status: "completed"}})
		m.message = ""
	}
	if m.reasoning != "" {
		out = append(out, Out{"reasoning", &contract.ReasoningPayload{ReasoningID: m.reasoning, Text: "", Status: "completed"}})
		m.reasoning = ""
	}
	return out
}

// toolStatus maps ACP's tool call status to the contract's.
func toolStatus(s string) string {
	switch s {
	case "in_progress":
		return "running"
	case "completed", "failed", "pending":
		return s
	}
	return "pending"
}

// tool folds a tool_call or tool_call_update into the tool's state and returns the tool
// event, and a diff or terminal event for each such content item.
func (m *Mapper) tool(tc ToolCall, content json.RawMessage, created bool) ([]Out, error) {
	if tc.ToolCallID == "" {
		return nil, fmt.Errorf("tool call without toolCallId")
	}
	out := m.closeStreams()
	m.segment++
	if m.tools == nil {
		m.tools = map[string]*contract.ToolPayload{}
	}
	t := m.tools[tc.ToolCallID]
	if t == nil {
		t = &contract.ToolPayload{ToolCallID: tc.ToolCallID, ToolName: "tool", Status: "pending"}
		m.tools[tc.ToolCallID] = t
	}
	switch {
	case tc.Name != nil && *tc.Name != "":
		t.ToolName = *tc.Name
	case tc.Title != nil && *tc.Title != "" && (created || t.ToolName == "tool"):
		t.ToolName = *tc.Title
	case tc.Kind != nil && t.ToolName == "tool":
		t.ToolName = *tc.Kind
	}
	if tc.Status != nil && !(t.Status == "denied" && *tc.Status == "failed") {
		// A denied call stays denied when the agent then reports it failed.
		t.Status = toolStatus(*tc.Status)
	}
	if len(tc.RawInput) > 0 && string(tc.RawInput) != "null" {
		t.Input = contract.CleanJSON(contract.RawJSON(tc.RawInput))
	}
	if len(tc.RawOutput) > 0 && string(tc.RawOutput) != "null" {
		t.Output = contract.CleanJSON(contract.RawJSON(tc.RawOutput))
	}
	var items []ToolCallContent
	if len(content) > 0 && string(content) != "null" {
		if err := json.Unmarshal(content, &items); err != nil {
			return nil, fmt.Errorf("tool call %s: content: %w", tc.ToolCallID, err)
		}
	}
	var blocks []json.RawMessage
	var extra []Out
	for _, c := range items {
		switch c.Type {
		case "content":
			blocks = append(blocks, c.Content)
		case "diff":
			extra = append(extra, Out{"diff", m.diff(c)})
		case "terminal":
			if m.Terminal != nil {
				if text, code, ok := m.Terminal(c.TerminalID); ok {
					extra = append(extra, Out{"terminal", &contract.TerminalPayload{TerminalID: c.TerminalID, Stream: "stdout", Chunk: text, ExitCode: code}})
				}
			}
		}
	}
	if len(blocks) > 0 && len(tc.RawOutput) == 0 {
		b, _ := json.Marshal(blocks)
		t.Output = contract.CleanJSON(b)
	}
	cp := *t
	out = append(out, Out{"tool", &cp})
	return append(out, extra...), nil
}

// diff maps a tool call's diff content: the path (relative to Root when inside it), added
// when there was no old text, and the change as a unified diff.
func (m *Mapper) diff(c ToolCallContent) *contract.DiffPayload {
	path := c.Path
	if m.Root != "" {
		if rel, err := filepath.Rel(m.Root, path); err == nil && !strings.HasPrefix(rel, "..") {
			path = filepath.ToSlash(rel)
		}
	}
	if path == "" {
		path = "."
	}
	old := ""
	status := "added"
	if c.OldText != nil {
		old = *c.OldText
		status = "modified"
	}
	patch := UnifiedDiff(path, old, c.NewText, c.OldText == nil)
	return &contract.DiffPayload{Path: path, Status: status, Patch: &patch}
}

// planPayload maps an ACP plan (the whole list, replacing the previous one) to a plan event.
func planPayload(id string, entries []PlanEntry) *contract.PlanPayload {
	p := &contract.PlanPayload{PlanID: id, Steps: []contract.PlanStep{}}
	done, running := 0, false
	for i, e := range entries {
		s := "pending"
		switch e.Status {
		case "in_progress":
			s, running = "running", true
		case "completed":
			s = "completed"
			done++
		}
		p.Steps = append(p.Steps, contract.PlanStep{ID: "step-" + strconv.Itoa(i+1), Title: e.Content, Status: s})
	}
	switch {
	case len(entries) > 0 && done == len(entries):
		p.Status = "completed"
	case running || done > 0:
		p.Status = "running"
	default:
		p.Status = "pending"
	}
	return p
}

// Permission maps a session/request_permission request: the tool call as it now stands
// (pending), the approval requested with the options kept in requestedAction, and the run
// waiting for it. It returns the approval's id.
func (m *Mapper) Permission(req RequestPermissionRequest) ([]Out, string, error) {
	var tc ToolCall
	if err := json.Unmarshal(req.ToolCall, &tc); err != nil {
		return nil, "", fmt.Errorf("session/request_permission: toolCall: %w", err)
	}
	var content struct {
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(req.ToolCall, &content)
	out, err := m.tool(tc, content.Content, false)
	if err != nil {
		return nil, "", err
	}
	m.approvals++
	id := m.RunID + "-permission-" + strconv.Itoa(m.approvals)
	title := "Allow " + m.tools[tc.ToolCallID].ToolName + "?"
	if tc.Title != nil && *tc.Title != "" {
		title = "Allow " + *tc.Title + "?"
	}
	names := make([]string, len(req.Options))
	for i, o := range req.Options {
		names[i] = o.Name + " (" + o.Kind + ")"
	}
	desc := "options: " + strings.Join(names, ", ")
	action, _ := json.Marshal(map[string]any{"toolCall": contract.CleanJSON(contract.RawJSON(req.ToolCall)), "options": req.Options})
	out = append(out,
		Out{"approval", &contract.ApprovalPayload{ApprovalID: id, ToolCallID: tc.ToolCallID, Status: "requested", Title: title, Description: &desc, RequestedAction: action}},
		Out{"status", &contract.StatusPayload{Status: "waiting_approval"}})
	return out, id, nil
}

// Choose answers a permission request from an approval decision ("approved", "rejected"):
// the first allow_once option (else allow_always) when approved, reject_once (else
// reject_always) when rejected; "cancelled" when there is no such option or no decision
// (the turn was cancelled).
func Choose(options []PermissionOption, decision string) RequestPermissionOutcome {
	var prefer []string
	switch decision {
	case "approved":
		prefer = []string{"allow_once", "allow_always"}
	case "rejected":
		prefer = []string{"reject_once", "reject_always"}
	}
	for _, kind := range prefer {
		for _, o := range options {
			if o.Kind == kind {
				return RequestPermissionOutcome{Outcome: "selected", OptionID: o.OptionID}
			}
		}
	}
	return RequestPermissionOutcome{Outcome: "cancelled"}
}

// Denied is the tool event after a rejected permission: the tool call denied (unless the agent
// reported another status since).
func (m *Mapper) Denied(toolCallID string) []Out {
	t := m.tools[toolCallID]
	if t == nil || t.Status != "pending" {
		return nil
	}
	t.Status = "denied"
	cp := *t
	return []Out{{"tool", &cp}}
}

// RunStatus is the run's terminal status for a prompt's stop reason: cancelled → stopped,
// refusal → failed, the others (end_turn, max_tokens, max_turn_requests) → completed.
func RunStatus(r StopReason) string {
	switch r {
	case StopCancelled:
		return contract.RunStatusStopped
	case StopRefusal:
		return contract.RunStatusFailed
	}
	return contract.RunStatusCompleted
}

// Finish ends the turn: the streamed message and reasoning completed, and tool calls still
// pending or running failed when the turn was cancelled or refused (the agent will not
// report them again).
func (m *Mapper) Finish(r StopReason) []Out {
	out := m.closeStreams()
	if r == StopCancelled || r == StopRefusal {
		ids := make([]string, 0, len(m.tools))
		for id := range m.tools {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			t := m.tools[id]
			if t.Status == "pending" || t.Status == "running" {
				t.Status = "failed"
				msg := "the prompt turn ended: " + string(r)
				t.Error = &msg
				cp := *t
				out = append(out, Out{"tool", &cp})
			}
		}
	}
	return out
}

// blockText is the text of a content block: a text block's text, else the block's JSON.
func blockText(b json.RawMessage) string {
	var t struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(b, &t) == nil && t.Type == "text" {
		return t.Text
	}
	return string(b)
}
