package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sessiond/sessiond/contract"
)

// ccHead is what the importer reads of every line of a Claude Code session file.
type ccHead struct {
	Type        string  `json:"type"`
	UUID        string  `json:"uuid"`
	SessionID   string  `json:"sessionId"`
	Timestamp   string  `json:"timestamp"`
	IsSidechain bool    `json:"isSidechain"`
	IsMeta      *bool   `json:"isMeta"`
	AgentID     *string `json:"agentId"`
	Cwd         string  `json:"cwd"`
	Summary     string  `json:"summary"`
	LeafUUID    string  `json:"leafUuid"`
}

// ccLine is one line of a Claude Code session file (the fields the importer reads).
type ccLine struct {
	ccHead
	// Message is the line's message; nil when it has none, or none that is an object.
	Message *ccMessage
	// ToolAgent is the sub-agent a tool result names (toolUseResult.agentId).
	ToolAgent string
}

// ccToolUseResult is what the importer reads of a line's toolUseResult.
type ccToolUseResult struct {
	AgentID string `json:"agentId"`
}

// decodeCCLine decodes a line: in one pass by decodeCCScan, else (a line on which it could
// differ from encoding/json) by decodeCCRaw, so that a message or toolUseResult of another
// shape only loses that field. ok is false when the line is not a JSON object. A message whose
// content decodeCCScan decoded holds its blocks; any other keeps its content raw, decoded by
// blocks when it is read.
func decodeCCLine(raw []byte) (l ccLine, ok bool) {
	if l, ok := decodeCCScan(raw); ok {
		return l, true
	}
	return decodeCCRaw(raw)
}

// decodeCCRaw is decodeCCLine keeping the message's content raw.
func decodeCCRaw(raw []byte) (l ccLine, ok bool) {
	var fast struct {
		ccHead
		Message       *ccMessage       `json:"message"`
		ToolUseResult *ccToolUseResult `json:"toolUseResult"`
	}
	if json.Unmarshal(raw, &fast) == nil {
		l = ccLine{ccHead: fast.ccHead, Message: fast.Message}
		if fast.ToolUseResult != nil {
			l.ToolAgent = fast.ToolUseResult.AgentID
		}
		return l, true
	}
	var slow struct {
		ccHead
		Message       json.RawMessage `json:"message"`
		ToolUseResult json.RawMessage `json:"toolUseResult"`
	}
	if json.Unmarshal(raw, &slow) != nil {
		return ccLine{}, false
	}
	l.ccHead = slow.ccHead
	var m ccMessage
	if len(slow.Message) > 0 && string(slow.Message) != "null" && json.Unmarshal(slow.Message, &m) == nil {
		l.Message = &m
	}
	var tur ccToolUseResult
	if json.Unmarshal(slow.ToolUseResult, &tur) == nil {
		l.ToolAgent = tur.AgentID
	}
	return l, true
}

// ccMessage is a line's message.
type ccMessage struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Model   string          `json:"model"`
	Content json.RawMessage `json:"content"`
	Usage   *ccUsage        `json:"usage"`

	// decoded: the content was decoded with the line (decodeCCScan) into parts, and Content
	// is not set.
	decoded bool
	parts   []ccBlock
}

// contentBlocks returns the message's content as blocks (blocks): those decoded with the line,
// else Content decoded now.
func (m *ccMessage) contentBlocks() ([]ccBlock, bool) {
	if m.decoded {
		return m.parts, m.parts != nil
	}
	return blocks(m.Content)
}

// ccUsage is an assistant message's token usage.
type ccUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// ccBlock is one content block.
type ccBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   *bool           `json:"is_error"`
}

// ccStream is the state of one session being read from a file: the main conversation, or a
// sub-agent's sidechain.
type ccStream struct {
	b     builder
	agent string // the sub-agent's id ("" for the main conversation)
	// pending is the assistant message being merged (fragments share message.id).
	pending    *ccPending
	tools      map[string]*contract.ToolPayload
	toolRun    map[string]ForkPoint // tool_use id → the run it was called in
	results    map[string]bool
	leafRun    map[string]string // line uuid → run id (for summaries)
	model      string
	usageByMsg map[string]bool
}

// ccPending is an assistant message whose fragments are being merged.
type ccPending struct {
	id, ts string
	line   int
	parts  []contract.RawJSON // the parts not written yet
	usage  *ccUsage
	// The thinking blocks and tool calls are written as their lines come; the text between
	// them is written (an append to the message) before the next of them, so that the events
	// keep the content's order, and what is left when the message ends.
	partsLine int    // the line of parts' first part
	partsTS   string // its timestamp
	lastTS    string // the timestamp of the message's last line
	written   bool   // some of its parts were written already
	segments  int    // how many appends writeParts made (their ids are apart)
}

// writeParts writes the message's parts not written yet, before the block of the current
// line that follows them: an append of the message, still streaming.
func (s *ccStream) writeParts() {
	p := s.pending
	if p == nil || len(p.parts) == 0 {
		return
	}
	line, k := s.b.line, s.b.k
	s.b.at(p.partsLine)
	s.b.k = 200 + p.segments // apart from the events the line has (and the message's end, at 100)
	p.segments++
	s.b.add(p.partsTS, "message", &contract.MessagePayload{MessageID: p.id, Role: "assistant", Operation: "append", Parts: p.parts, Status: "streaming"}, true)
	s.b.line, s.b.k = line, k
	p.parts, p.written = nil, true
}

// ParseClaudeCode reads a Claude Code session file. name is the file's path (its base name
// names the sub-agent of an agent-*.jsonl file). Lines that are not JSON, or of a type the
// importer does not map, are skipped with a reason; nothing in the file aborts the parse but
// a read error.
func ParseClaudeCode(r io.Reader, name string) ([]*Transcript, *Report, error) {
	rep := &Report{Path: name, Format: "claude-code"}
	streams := map[string]*ccStream{}
	lastSidechain := map[string]string{} // session id → the agent of its last sidechain line
	var order []*ccStream
	var model, cwd string
	stream := func(l *ccLine) *ccStream {
		agent := ""
		if l.IsSidechain {
			agent = "sidechain"
			if l.AgentID != nil && *l.AgentID != "" {
				agent = *l.AgentID
			} else if base := filepath.Base(name); strings.HasPrefix(base, "agent-") {
				agent = strings.TrimSuffix(strings.TrimPrefix(base, "agent-"), ".jsonl")
			}
			agent = idPart(agent)
		}
		sid := idPart(l.SessionID)
		if sid == "" {
			sid = idPart(strings.TrimSuffix(filepath.Base(name), ".jsonl"))
		}
		key := sid + "/" + agent
		if l.IsSidechain && agent != "sidechain" && streams[key] == nil {
			// The sidechain's first lines may lack the agentId a later line names: the
			// unnamed sidechain of this session is that sub-agent's.
			if un := streams[sid+"/sidechain"]; un != nil {
				delete(streams, sid+"/sidechain")
				un.agent = agent
				un.b.t.SessionID = "S-claude-" + sid + "-agent-" + agent
				un.b.t.Parent.AgentID = agent
				for i := range un.b.t.Events {
					e := &un.b.t.Events[i]
					e.EventID = un.b.t.SessionID + strings.TrimPrefix(e.EventID, "S-claude-"+sid+"-agent-sidechain")
					e.IdempotencyKey, e.SessionID = e.EventID, un.b.t.SessionID
				}
				streams[key] = un
			}
		} else if l.IsSidechain && agent == "sidechain" {
			// A line without agentId belongs to the sidechain last seen in this session.
			if last := lastSidechain[sid]; last != "" {
				agent, key = last, sid+"/"+last
			}
		}
		if l.IsSidechain {
			lastSidechain[sid] = agent
		}
		s := streams[key]
		if s == nil {
			id := "S-claude-" + sid
			if agent != "" {
				id += "-agent-" + agent
			}
			id = ref(id)
			s = &ccStream{agent: agent, tools: map[string]*contract.ToolPayload{}, toolRun: map[string]ForkPoint{},
				results: map[string]bool{}, leafRun: map[string]string{}, usageByMsg: map[string]bool{}}
			s.b.t = &Transcript{SessionID: id, AgentID: "claude-code", Forks: map[string]ForkPoint{}}
			if agent != "" {
				s.b.t.Parent = &Parent{SessionID: "S-claude-" + sid, AgentID: agent}
			}
			streams[key] = s
			order = append(order, s)
		}
		return s
	}
	var summaries []ccLine
	var summaryLines []int
	sc := lineScanner(r)
	n := 0
	for sc.Scan() {
		n++
		raw := sc.Bytes()
		if len(bytes.TrimSpace(raw)) == 0 {
			rep.Lines++
			rep.skip("empty line")
			continue
		}
		rep.Lines++
		l, ok := decodeCCLine(raw)
		if !ok {
			rep.skip("not a JSON object")
			continue
		}
		switch l.Type {
		case "summary":
			// Summaries come first in a file but describe a leaf message later on: they are
			// placed once the runs are known.
			summaries = append(summaries, l)
			summaryLines = append(summaryLines, n)
			continue
		case "user", "assistant":
		case "file-history-snapshot":
			rep.skip("file-history-snapshot: file backups for undo, not part of the conversation")
			continue
		case "system":
			rep.skip("system: Claude Code's own notices (compaction boundaries, hook output)")
			continue
		case "queue-operation", "progress":
			rep.skip(l.Type + ": Claude Code's UI state")
			continue
		default:
			rep.skip("unknown line type " + strconv.Quote(l.Type))
			continue
		}
		m := l.Message
		if m == nil {
			rep.skip(l.Type + " line without a message object")
			continue
		}
		if l.Cwd != "" {
			cwd = l.Cwd
		}
		s := stream(&l)
		s.b.at(n)
		if l.Type == "assistant" {
			if m.Model != "" && m.Model != "<synthetic>" {
				model, s.model = m.Model, m.Model
			}
			s.assistant(rep, n, &l, m)
			continue
		}
		s.user(rep, n, &l, m)
	}
	if err := sc.Err(); err != nil {
		return nil, rep, fmt.Errorf("read %s: %w", name, err)
	}
	var out []*Transcript
	for _, s := range order {
		s.flush(rep)
		s.b.at(rep.Lines + 1) // the run's end is after the file's last line
		s.b.endRun("", contract.RunStatusCompleted)
		for id, t := range s.tools {
			if !s.results[id] {
				rep.note("tool call %s (%s) in %s has no result in the file: it stays %s", id, t.ToolName, s.b.t.SessionID, t.Status)
			}
		}
		s.b.t.ModelID = s.model
		if s.b.t.ModelID == "" {
			s.b.t.ModelID = model
		}
		if cwd != "" {
			s.b.t.Project = projectName(cwd)
		}
		out = append(out, s.b.t)
	}
	// Summaries: the main conversation's run that holds the leaf message, else its last run.
	for i, l := range summaries {
		var main *ccStream
		for _, s := range order {
			if s.agent == "" {
				main = s
				break
			}
		}
		if main == nil || main.b.runs == 0 || l.Summary == "" {
			rep.skip("summary without a conversation to summarise")
			continue
		}
		run := main.leafRun[l.LeafUUID]
		if run == "" {
			run = main.lastRunID()
		}
		main.b.at(summaryLines[i])
		main.b.add("", "summary", &contract.SummaryPayload{SummaryID: "summary-" + strconv.Itoa(summaryLines[i]), RunID: run, Text: l.Summary,
			Highlights: []string{}, PendingItems: []string{}, Status: "completed"}, false)
		rep.Mapped++
	}
	return out, rep, nil
}

// projectName is the last element of a working directory (of either kind of separator).
func projectName(cwd string) string {
	cwd = strings.TrimRight(strings.ReplaceAll(cwd, "\\", "/"), "/")
	if i := strings.LastIndex(cwd, "/"); i >= 0 {
		return cwd[i+1:]
	}
	return cwd
}

// lastRunID is the run of the stream's last event in a run ("" before the first).
func (s *ccStream) lastRunID() string { return s.b.lastRun }

// blocks decodes a message's content: a string is one text block.
func blocks(content json.RawMessage) ([]ccBlock, bool) {
	c := bytes.TrimLeft(content, " \t\r\n")
	if len(c) == 0 {
		return nil, false
	}
	switch c[0] {
	case '"':
		var s string
		if json.Unmarshal(content, &s) == nil {
			return []ccBlock{{Type: "text", Text: s}}, true
		}
	case '[':
		var bs []ccBlock
		if json.Unmarshal(content, &bs) == nil {
			return bs, true
		}
	}
	return nil, false
}

// user maps a user line: a prompt (a new run), tool results, or a meta message.
func (s *ccStream) user(rep *Report, n int, l *ccLine, m *ccMessage) {
	bs, ok := m.contentBlocks()
	if !ok {
		rep.skip("user line whose message has no content")
		return
	}
	s.flush(rep)
	var parts []contract.RawJSON
	var results []ccBlock
	for _, b := range bs {
		switch b.Type {
		case "tool_result":
			results = append(results, b)
		case "text":
			parts = append(parts, textPart(b.Text))
		default:
			raw, _ := json.Marshal(b)
			if b.Type == "image" {
				raw = imageBlock(m.Content, b)
			}
			parts = append(parts, raw)
		}
	}
	for _, r := range results {
		s.result(l, r)
	}
	if len(parts) == 0 {
		if len(results) == 0 {
			rep.skip("user line with empty content")
			return
		}
		s.leafRun[l.UUID] = s.lastRunID()
		rep.Mapped++
		return
	}
	id := "user-" + lineID(l, n)
	meta := l.IsMeta != nil && *l.IsMeta
	role := "user"
	if meta {
		role = "system" // Claude Code's own notes in the user's turn (caveats, command output)
	}
	interrupted := false
	for _, p := range parts {
		if strings.Contains(string(p), "[Request interrupted by user") {
			interrupted = true
		}
	}
	if interrupted && s.b.run != nil {
		s.b.add(l.Timestamp, "message", &contract.MessagePayload{MessageID: id, Role: role, Operation: "append", Parts: parts, Status: "completed"}, true)
		s.b.endRun(l.Timestamp, contract.RunStatusStopped)
		rep.Mapped++
		return
	}
	if meta || len(results) > 0 {
		s.b.add(l.Timestamp, "message", &contract.MessagePayload{MessageID: id, Role: role, Operation: "append", Parts: parts, Status: "completed"}, s.b.run != nil)
	} else {
		// A prompt: the message, then the run it starts.
		s.b.endRun(l.Timestamp, contract.RunStatusCompleted)
		s.b.add(l.Timestamp, "message", &contract.MessagePayload{MessageID: id, Role: role, Operation: "append", Parts: parts, Status: "completed"}, false)
		s.b.startRun(l.Timestamp, "run-"+lineID(l, n), id)
	}
	s.leafRun[l.UUID] = s.lastRunID()
	rep.Mapped++
}

// imageBlock keeps an image block as the file has it.
func imageBlock(content json.RawMessage, b ccBlock) contract.RawJSON {
	var raw []json.RawMessage
	if json.Unmarshal(content, &raw) == nil {
		for _, r := range raw {
			var probe ccBlock
			if json.Unmarshal(r, &probe) == nil && probe.Type == "image" {
				return contract.RawJSON(r)
			}
		}
	}
	out, _ := json.Marshal(b)
	return out
}

// lineID is a line's uuid, else its line number.
func lineID(l *ccLine, n int) string {
	if l.UUID != "" && len(l.UUID) <= 100 {
		return l.UUID
	}
	return "L" + strconv.Itoa(n)
}

// result folds a tool_result into its tool call.
func (s *ccStream) result(l *ccLine, r ccBlock) {
	r.ToolUseID = ref(r.ToolUseID)
	t := s.tools[r.ToolUseID]
	if t == nil {
		// The call is not in the file (a trimmed or resumed file): the result is kept alone.
		t = &contract.ToolPayload{ToolCallID: r.ToolUseID, ToolName: "unknown"}
		s.tools[r.ToolUseID] = t
	}
	if t.ToolCallID == "" {
		return
	}
	s.results[r.ToolUseID] = true
	t.Status = "completed"
	if r.IsError != nil && *r.IsError {
		t.Status = "failed"
		msg := resultText(r.Content)
		t.Error = &msg
	}
	t.Output = resultJSON(r.Content)
	t.CompletedAt = s.b.stamp(l.Timestamp)
	cp := *t
	s.b.add(l.Timestamp, "tool", &cp, s.b.run != nil)
	// A sub-agent's result names it: the sub-agent's sidechain continues from this run.
	agent := ""
	if l.AgentID != nil && *l.AgentID != "" {
		agent = *l.AgentID
	}
	if l.ToolAgent != "" {
		agent = l.ToolAgent
	}
	if agent != "" {
		if fp, ok := s.toolRun[r.ToolUseID]; ok {
			s.b.t.Forks[agent] = fp
		} else if s.b.run != nil {
			s.b.t.Forks[agent] = ForkPoint{RunID: s.b.run.id, SourceMessageID: s.b.run.source}
		}
	}
}

// resultJSON is a tool result's content as JSON: a string as a string, blocks as they are.
func resultJSON(c json.RawMessage) contract.RawJSON {
	if len(c) == 0 || string(c) == "null" {
		return contract.RawJSON(`""`)
	}
	return contract.RawJSON(c)
}

// resultText is a tool result's text.
func resultText(c json.RawMessage) string {
	bs, ok := blocks(c)
	if !ok {
		return string(c)
	}
	var sb strings.Builder
	for _, b := range bs {
		sb.WriteString(b.Text)
	}
	return sb.String()
}

// assistant maps an assistant line: a fragment of the message its message.id names.
func (s *ccStream) assistant(rep *Report, n int, l *ccLine, m *ccMessage) {
	bs, ok := m.contentBlocks()
	if !ok {
		rep.skip("assistant line whose message has no content")
		return
	}
	id := ref(m.ID)
	if id == "" {
		id = "assistant-" + lineID(l, n)
	}
	merged := s.pending != nil && s.pending.id == id
	if !merged {
		s.flush(rep)
		s.pending = &ccPending{id: id, ts: l.Timestamp, line: n}
	}
	if s.b.run == nil {
		// A conversation that starts with the assistant (a sub-agent whose prompt is not in
		// the file): its run is started by this message.
		s.b.startRun(l.Timestamp, "run-"+lineID(l, n), id)
	}
	p := s.pending
	if m.Usage != nil {
		p.usage = m.Usage // every fragment repeats the message's usage: counted once
	}
	if _, err := time.Parse(time.RFC3339Nano, l.Timestamp); err == nil {
		p.lastTS = l.Timestamp
	}
	keep := func(part contract.RawJSON) {
		if len(p.parts) == 0 {
			p.partsLine, p.partsTS = n, l.Timestamp
		}
		p.parts = append(p.parts, part)
	}
	thought := 0
	for _, b := range bs {
		switch b.Type {
		case "text":
			keep(textPart(b.Text))
		case "thinking", "redacted_thinking":
			s.writeParts()
			thought++
			text := b.Thinking
			if b.Type == "redacted_thinking" {
				text = "[redacted thinking]"
			}
			s.b.add(l.Timestamp, "reasoning", &contract.ReasoningPayload{ReasoningID: id + "-thinking-" + strconv.Itoa(n) + "-" + strconv.Itoa(thought), Text: text, Status: "completed"}, true)
		case "tool_use":
			s.writeParts()
			b.ID = ref(b.ID)
			t := &contract.ToolPayload{ToolCallID: b.ID, ToolName: b.Name, Status: "running", Input: contract.RawJSON(b.Input), StartedAt: s.b.stamp(l.Timestamp)}
			if len(t.Input) == 0 {
				t.Input = contract.RawJSON(`{}`)
			}
			if t.ToolName == "" {
				t.ToolName = "unknown"
			}
			if b.ID == "" {
				continue
			}
			s.tools[b.ID] = t
			s.toolRun[b.ID] = ForkPoint{RunID: s.b.run.id, SourceMessageID: s.b.run.source}
			cp := *t
			s.b.add(l.Timestamp, "tool", &cp, true)
		default:
			raw, _ := json.Marshal(b)
			keep(raw)
		}
	}
	s.leafRun[l.UUID] = s.b.run.id
	if merged {
		rep.Merged++
	} else {
		rep.Mapped++
	}
}

// flush writes the assistant message being merged: its text parts as one message, and its
// usage once.
func (s *ccStream) flush(rep *Report) {
	p := s.pending
	if p == nil {
		return
	}
	s.pending = nil
	line := s.b.line
	s.b.at(p.line)
	s.b.k = 100 // after the events this line already has
	// The message's end: what is left of its parts, when it has parts left, or when some were
	// written (they are completed), or when it started its run (the run names it). It comes
	// after the message's last block, at the time of the last of its parts, or of its last line.
	ts := p.ts
	if p.written {
		ts = p.lastTS
	}
	if len(p.parts) > 0 {
		s.b.at(p.partsLine)
		s.b.k = 100
		ts = p.partsTS
	}
	if len(p.parts) > 0 || p.written || (s.b.run != nil && s.b.run.source == p.id) {
		parts := p.parts
		if parts == nil {
			parts = []contract.RawJSON{}
		}
		s.b.add(ts, "message", &contract.MessagePayload{MessageID: p.id, Role: "assistant", Operation: "append", Parts: parts, Status: "completed"}, true)
	}
	if p.lastTS != "" {
		ts = p.lastTS
	}
	if u := p.usage; u != nil && !s.usageByMsg[p.id] {
		s.usageByMsg[p.id] = true
		in := u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
		s.b.add(ts, "usage", &contract.UsagePayload{InputTokens: tokens(in, 0), OutputTokens: tokens(u.OutputTokens, 0), TotalTokens: tokens(in+u.OutputTokens, 0)}, true)
	}
	s.b.at(line)
}
