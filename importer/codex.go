package importer

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sessiond/sessiond/contract"
)

// cxLine is one line of a Codex rollout: {timestamp, type, payload}.
type cxLine struct {
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
}

// cxPayload holds the payload fields the importer reads, of every line type.
type cxPayload struct {
	Type string `json:"type"`
	// session_meta
	ID         string `json:"id"`
	Cwd        string `json:"cwd"`
	Originator string `json:"originator"`
	// turn_context
	Model  string `json:"model"`
	TurnID string `json:"turn_id"`
	// response_item message
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// response_item reasoning
	Summary json.RawMessage `json:"summary"` // a list of {text} in reasoning; a string in turn_context
	// function_call, custom_tool_call, *_output
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"`
	CallID    string          `json:"call_id"`
	Output    json.RawMessage `json:"output"`
	// web_search_call (raw: other lines' status may be of another kind)
	Status json.RawMessage `json:"status"`
	Action json.RawMessage `json:"action"`
	// event_msg
	Message          string          `json:"message"`
	Text             string          `json:"text"`
	Info             *cxTokenInfo    `json:"info"`
	ExitCode         *int64          `json:"exit_code"`
	AggregatedOutput *string         `json:"aggregated_output"`
	Stdout           *string         `json:"stdout"`
	Stderr           *string         `json:"stderr"`
	Command          json.RawMessage `json:"command"`
	Reason           string          `json:"reason"`
}

type cxTokenInfo struct {
	Total              *cxTokens `json:"total_token_usage"`
	Last               *cxTokens `json:"last_token_usage"`
	ModelContextWindow *int64    `json:"model_context_window"`
}

type cxTokens struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}

// cxReader is the state of one rollout being read.
type cxReader struct {
	b   builder
	rep *Report
	// Codex writes most items twice: as a response_item (what the model saw) and as an
	// event_msg (what the UI showed). Each text seen once waits here for its twin.
	// twin[i] says record i has a twin (merged into it); merged[i] that record i is one.
	twin, merged []bool
	i            int
	// prompts says the file has event_msg user_message records: a user response_item
	// without such a twin is context Codex added (instructions, environment), not a prompt.
	prompts   bool
	tools     map[string]*contract.ToolPayload
	results   map[string]bool
	lastTotal *cxTokens
	msgs      int
}

// ParseCodex reads a Codex rollout file (rollout-*.jsonl). Unknown line and item types are
// skipped with a reason; nothing in the file aborts the parse but a read error.
func ParseCodex(r io.Reader, name string) ([]*Transcript, *Report, error) {
	rep := &Report{Path: name, Format: "codex"}
	base := strings.TrimSuffix(filepath.Base(name), ".jsonl")
	x := &cxReader{rep: rep, tools: map[string]*contract.ToolPayload{}, results: map[string]bool{}}
	x.b.t = &Transcript{SessionID: "S-codex-" + idPart(base), AgentID: "codex"}
	type rec struct {
		n int
		l cxLine
		p cxPayload
	}
	var recs []rec
	sc := lineScanner(r)
	n := 0
	for sc.Scan() {
		n++
		rep.Lines++
		raw := sc.Bytes()
		if len(strings.TrimSpace(string(raw))) == 0 {
			rep.skip("empty line")
			continue
		}
		var l cxLine
		if err := json.Unmarshal(raw, &l); err != nil {
			rep.skip("not a JSON object")
			continue
		}
		var p cxPayload
		if len(l.Payload) > 0 && json.Unmarshal(l.Payload, &p) != nil {
			rep.skip(l.Type + " line whose payload is not an object")
			continue
		}
		recs = append(recs, rec{n, l, p})
	}
	if err := sc.Err(); err != nil {
		return nil, rep, fmt.Errorf("read %s: %w", name, err)
	}
	// Twins: Codex writes a message or a reasoning summary both as a response_item and as
	// an event_msg, one right after the other. A record is the twin of the record next to it
	// when they are of the two kinds and the same role, or, anywhere earlier, of the other
	// kind with the same text. The second of a pair is merged into the first.
	keys := make([]string, len(recs))
	texts := make([]string, len(recs))
	for i, r := range recs {
		keys[i], texts[i] = twinKey(&r.l, &r.p)
		if keys[i] == "event:user" {
			x.prompts = true
		}
	}
	x.twin = make([]bool, len(recs))
	x.merged = make([]bool, len(recs))
	waiting := map[string][]int{} // kind+role+text → unpaired records
	for i := range recs {
		if keys[i] == "" || x.merged[i] || x.twin[i] {
			continue
		}
		kind, role, _ := strings.Cut(keys[i], ":")
		other := map[string]string{"item": "event", "event": "item"}[kind] + ":" + role
		if w := waiting[other+"\x00"+texts[i]]; len(w) > 0 {
			j := w[0]
			waiting[other+"\x00"+texts[i]] = w[1:]
			x.twin[j], x.merged[i] = true, true
			continue
		}
		if i+1 < len(recs) && keys[i+1] == other && !x.merged[i+1] {
			x.twin[i], x.merged[i+1] = true, true
			continue
		}
		waiting[keys[i]+"\x00"+texts[i]] = append(waiting[keys[i]+"\x00"+texts[i]], i)
	}
	for i, r := range recs {
		x.b.at(r.n)
		x.i = i
		if x.merged[i] {
			rep.Merged++
			continue
		}
		x.line(r.n, &r.l, &r.p)
	}
	x.b.at(rep.Lines + 1)
	x.b.endRun("", contract.RunStatusCompleted)
	for id, t := range x.tools {
		if !x.results[id] {
			rep.note("tool call %s (%s) has no output in the file: it stays %s", id, t.ToolName, t.Status)
		}
	}
	return []*Transcript{x.b.t}, rep, nil
}

// twinKey is a record's kind and role when Codex writes it twice ("item:assistant",
// "event:user", "item:reasoning", …), with its text; "" for the others.
func twinKey(l *cxLine, p *cxPayload) (string, string) {
	switch {
	case l.Type == "response_item" && p.Type == "message" && (p.Role == "user" || p.Role == "assistant"):
		text, _ := contentText(p.Content)
		return "item:" + p.Role, text
	case l.Type == "response_item" && p.Type == "reasoning":
		return "item:reasoning", reasoningText(p)
	case l.Type == "event_msg" && p.Type == "user_message":
		return "event:user", p.Message
	case l.Type == "event_msg" && p.Type == "agent_message":
		return "event:assistant", p.Message
	case l.Type == "event_msg" && p.Type == "agent_reasoning":
		return "event:reasoning", p.Text
	}
	return "", ""
}

// reasoningText joins a reasoning item's summary texts.
func reasoningText(p *cxPayload) string {
	var summary []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(p.Summary, &summary)
	var texts []string
	for _, s := range summary {
		texts = append(texts, s.Text)
	}
	return strings.Join(texts, "\n")
}

func (x *cxReader) line(n int, l *cxLine, p *cxPayload) {
	rep, b := x.rep, &x.b
	switch l.Type {
	case "session_meta":
		if len(b.t.Events) > 0 {
			rep.skip("session_meta after the session began (a resumed session's header)")
			return
		}
		if p.ID != "" {
			b.t.SessionID = ref("S-codex-" + idPart(p.ID))
		}
		if p.Cwd != "" {
			b.t.Project = projectName(p.Cwd)
		}
		rep.skip("session_meta: read into the session record (id, project)")
	case "turn_context":
		if p.Model != "" {
			b.t.ModelID = p.Model
		}
		rep.skip("turn_context: the turn's settings; the model is read into the session's snapshot")
	case "compacted":
		if p.Message == "" || b.runs == 0 {
			rep.skip("compacted without a summary or a run")
			return
		}
		run := b.run
		if run == nil {
			rep.skip("compacted outside a turn")
			return
		}
		b.add(l.Timestamp, "summary", &contract.SummaryPayload{SummaryID: "compacted-" + strconv.Itoa(n), RunID: run.id, Text: p.Message,
			Highlights: []string{}, PendingItems: []string{}, Status: "completed"}, true)
		rep.Mapped++
	case "response_item":
		x.item(n, l, p)
	case "event_msg":
		x.event(n, l, p)
	default:
		rep.skip("unknown line type " + strconv.Quote(l.Type))
	}
}

// contentText joins a message's text items.
func contentText(c json.RawMessage) (string, []contract.RawJSON) {
	var items []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	var raws []json.RawMessage
	_ = json.Unmarshal(c, &raws)
	if json.Unmarshal(c, &items) != nil {
		return "", nil
	}
	var sb strings.Builder
	var parts []contract.RawJSON
	for i, it := range items {
		switch it.Type {
		case "input_text", "output_text", "text":
			sb.WriteString(it.Text)
			parts = append(parts, textPart(it.Text))
		default:
			parts = append(parts, contract.RawJSON(raws[i]))
		}
	}
	return sb.String(), parts
}

// message writes a message: a user message starts a turn (a run); developer and system
// messages, and the context Codex adds in the user's name, are instructions (role system).
func (x *cxReader) message(ts, role string, parts []contract.RawJSON) {
	b := &x.b
	x.msgs++
	id := "msg-" + strconv.Itoa(b.line)
	switch role {
	case "user":
		b.endRun(ts, contract.RunStatusCompleted)
		b.add(ts, "message", &contract.MessagePayload{MessageID: id, Role: "user", Operation: "append", Parts: parts, Status: "completed"}, false)
		b.startRun(ts, "run-"+strconv.Itoa(b.line), id)
	case "assistant":
		if b.run == nil {
			b.startRun(ts, "run-"+strconv.Itoa(b.line), id)
		}
		b.add(ts, "message", &contract.MessagePayload{MessageID: id, Role: "assistant", Operation: "append", Parts: parts, Status: "completed"}, true)
	default: // developer, system, context: instructions
		b.add(ts, "message", &contract.MessagePayload{MessageID: id, Role: "system", Operation: "append", Parts: parts, Status: "completed"}, b.run != nil)
	}
}

// isContext reports whether a user message is context Codex adds (the environment, the
// project's agent instructions) rather than the person's words.
func isContext(text string) bool {
	t := strings.TrimSpace(text)
	return strings.HasPrefix(t, "<environment_context>") || strings.HasPrefix(t, "<user_instructions>") ||
		strings.HasPrefix(t, "<permissions") || strings.HasPrefix(t, "<INSTRUCTIONS>")
}

func (x *cxReader) item(n int, l *cxLine, p *cxPayload) {
	rep, b := x.rep, &x.b
	switch p.Type {
	case "message":
		text, parts := contentText(p.Content)
		if len(parts) == 0 {
			rep.skip("response_item message without content")
			return
		}
		role := p.Role
		if role == "user" && ((x.prompts && !x.twin[x.i]) || (!x.prompts && isContext(text))) {
			role = "context"
		}
		x.message(l.Timestamp, role, parts)
		rep.Mapped++
	case "reasoning":
		text := reasoningText(p)
		if text == "" {
			rep.skip("reasoning with no summary text (encrypted content only)")
			return
		}
		x.reasoning(l.Timestamp, text)
		rep.Mapped++
	case "function_call", "custom_tool_call", "local_shell_call":
		input := jsonText(p.Arguments)
		if p.Type == "custom_tool_call" {
			input = jsonText(p.Input)
		}
		if p.Type == "local_shell_call" {
			raw, _ := json.Marshal(p)
			input = raw
		}
		name := p.Name
		if name == "" {
			name = p.Type
		}
		id := ref(p.CallID)
		if id == "" {
			id = "call-" + strconv.Itoa(n)
		}
		if b.run == nil {
			b.startRun(l.Timestamp, "run-"+strconv.Itoa(n), "call-"+id)
		}
		t := &contract.ToolPayload{ToolCallID: id, ToolName: name, Status: "running", Input: input, StartedAt: b.stamp(l.Timestamp)}
		x.tools[id] = t
		cp := *t
		b.add(l.Timestamp, "tool", &cp, true)
		for _, d := range patchDiffs(patchText(p)) {
			b.add(l.Timestamp, "diff", d, true)
		}
		rep.Mapped++
	case "web_search_call":
		// A search the model ran itself: a tool call named web_search whose input is the
		// action (the query, or the page opened); the file has no output for it.
		id := ref(p.ID)
		if id == "" {
			id = "web-search-" + strconv.Itoa(n)
		}
		if b.run == nil {
			b.startRun(l.Timestamp, "run-"+strconv.Itoa(n), "call-"+id)
		}
		input := contract.RawJSON(p.Action)
		if len(input) == 0 || string(input) == "null" {
			input = contract.RawJSON(`{}`)
		}
		ts := b.stamp(l.Timestamp)
		t := &contract.ToolPayload{ToolCallID: id, ToolName: "web_search", Status: "running", Input: input, StartedAt: ts}
		switch string(p.Status) {
		case `"completed"`:
			t.Status, t.CompletedAt = "completed", ts
			x.results[id] = true
		case `"failed"`:
			msg := "the web search failed"
			t.Status, t.CompletedAt, t.Error = "failed", ts, &msg
			x.results[id] = true
		}
		x.tools[id] = t
		cp := *t
		b.add(l.Timestamp, "tool", &cp, true)
		rep.Mapped++
	case "function_call_output", "custom_tool_call_output":
		p.CallID = ref(p.CallID)
		t := x.tools[p.CallID]
		if t == nil {
			t = &contract.ToolPayload{ToolCallID: p.CallID, ToolName: "unknown"}
			if p.CallID == "" {
				rep.skip(p.Type + " without a call_id")
				return
			}
			x.tools[p.CallID] = t
		}
		x.results[p.CallID] = true
		t.Status, t.Output, t.CompletedAt = "completed", outputJSON(p.Output), b.stamp(l.Timestamp)
		cp := *t
		b.add(l.Timestamp, "tool", &cp, b.run != nil)
		rep.Mapped++
	default:
		rep.skip("response_item of unknown type " + strconv.Quote(p.Type))
	}
}

// outputJSON is a tool output: a string holding JSON as that JSON, else as it is.
func outputJSON(o json.RawMessage) contract.RawJSON {
	var s string
	if json.Unmarshal(o, &s) == nil {
		return jsonText(s)
	}
	if len(o) == 0 {
		return contract.RawJSON(`""`)
	}
	return contract.RawJSON(o)
}

func (x *cxReader) reasoning(ts, text string) {
	b := &x.b
	if b.run == nil {
		b.startRun(ts, "run-"+strconv.Itoa(b.line), "reasoning-"+strconv.Itoa(b.line))
	}
	b.add(ts, "reasoning", &contract.ReasoningPayload{ReasoningID: "reasoning-" + strconv.Itoa(b.line), Text: text, Status: "completed"}, true)
}

func (x *cxReader) event(n int, l *cxLine, p *cxPayload) {
	rep, b := x.rep, &x.b
	switch p.Type {
	case "user_message", "agent_message":
		role := map[string]string{"user_message": "user", "agent_message": "assistant"}[p.Type]
		x.message(l.Timestamp, role, []contract.RawJSON{textPart(p.Message)})
		rep.Mapped++
	case "agent_reasoning":
		x.reasoning(l.Timestamp, p.Text)
		rep.Mapped++
	case "token_count":
		if p.Info == nil || p.Info.Last == nil {
			rep.skip("token_count without token info (rate limits only)")
			return
		}
		if p.Info.Total != nil && x.lastTotal != nil && *p.Info.Total == *x.lastTotal {
			rep.Merged++ // Codex reports the same count again: counted once
			return
		}
		x.lastTotal = p.Info.Total
		u := p.Info.Last
		b.add(l.Timestamp, "usage", &contract.UsagePayload{InputTokens: tokens(u.InputTokens, 0), OutputTokens: tokens(u.OutputTokens, 0),
			TotalTokens: tokens(u.TotalTokens, 0), ContextWindow: contract.Count(p.Info.ModelContextWindow, 1)}, b.run != nil)
		rep.Mapped++
	case "exec_command_end":
		out := ""
		switch {
		case p.AggregatedOutput != nil:
			out = *p.AggregatedOutput
		default:
			if p.Stdout != nil {
				out = *p.Stdout
			}
			if p.Stderr != nil {
				out += *p.Stderr
			}
		}
		id := ref(p.CallID)
		if id == "" {
			id = "exec-" + strconv.Itoa(n)
		}
		b.add(l.Timestamp, "terminal", &contract.TerminalPayload{TerminalID: id, Stream: "stdout", Chunk: out, ExitCode: p.ExitCode}, b.run != nil)
		rep.Mapped++
	case "task_started":
		// The turn starts with its user message (the run's source); nothing to write.
		rep.skip("task_started: the turn opens at its user message")
	case "task_complete":
		if b.run == nil {
			rep.skip("task_complete outside a turn")
			return
		}
		b.endRun(l.Timestamp, contract.RunStatusCompleted)
		rep.Mapped++
	case "turn_aborted":
		if b.run == nil {
			rep.skip("turn_aborted outside a turn")
			return
		}
		b.endRun(l.Timestamp, contract.RunStatusStopped)
		rep.Mapped++
	case "exec_command_begin", "patch_apply_begin", "patch_apply_end", "exec_command_output_delta":
		rep.skip(p.Type + ": the command or patch is recorded from its tool call")
	default:
		rep.skip("event_msg of type " + strconv.Quote(p.Type) + " (UI state, not mapped)")
	}
}

// patchText is the apply_patch text of a tool call: a custom apply_patch call's input, or an
// apply_patch given to a shell call.
func patchText(p *cxPayload) string {
	if p.Type == "custom_tool_call" && p.Name == "apply_patch" {
		return p.Input
	}
	s := p.Arguments
	if i := strings.Index(s, "*** Begin Patch"); i >= 0 {
		var args struct {
			Command []string `json:"command"`
			Input   string   `json:"input"`
		}
		if json.Unmarshal([]byte(s), &args) == nil {
			for _, c := range append(args.Command, args.Input) {
				if strings.Contains(c, "*** Begin Patch") {
					return c
				}
			}
		}
		return s[i:]
	}
	return ""
}

// patchDiffs maps an apply_patch patch to a diff per file: Add File → added, Delete File →
// deleted, Update File → modified (renamed with Move to); each with the patch's hunk for
// that file.
func patchDiffs(patch string) []*contract.DiffPayload {
	if patch == "" {
		return nil
	}
	var out []*contract.DiffPayload
	var cur *contract.DiffPayload
	var body strings.Builder
	flush := func() {
		if cur != nil {
			s := body.String()
			cur.Patch = &s
			out = append(out, cur)
		}
		cur = nil
		body.Reset()
	}
	for _, line := range strings.Split(patch, "\n") {
		switch {
		case strings.HasPrefix(line, "*** Add File: "):
			flush()
			cur = &contract.DiffPayload{Path: strings.TrimPrefix(line, "*** Add File: "), Status: "added"}
		case strings.HasPrefix(line, "*** Delete File: "):
			flush()
			cur = &contract.DiffPayload{Path: strings.TrimPrefix(line, "*** Delete File: "), Status: "deleted"}
		case strings.HasPrefix(line, "*** Update File: "):
			flush()
			cur = &contract.DiffPayload{Path: strings.TrimPrefix(line, "*** Update File: "), Status: "modified"}
		case strings.HasPrefix(line, "*** Move to: ") && cur != nil:
			cur.Status = "renamed"
			cur.Path = strings.TrimPrefix(line, "*** Move to: ")
		case strings.HasPrefix(line, "*** End Patch"), strings.HasPrefix(line, "*** Begin Patch"):
		default:
			if cur != nil {
				body.WriteString(line + "\n")
			}
		}
		if cur != nil && cur.Path == "" {
			cur.Path = "."
		}
	}
	flush()
	return out
}
