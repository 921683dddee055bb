package importer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sessiond/sessiond/contract"
)

// Formats are the transcript formats the importer reads.
var Formats = []string{"claude-code", "codex"}

// Transcript is one session read from a file: its record and its events, in order.
type Transcript struct {
	SessionID string
	AgentID   string
	ModelID   string
	Project   string
	// Parent, when set, makes the session a continuation of another transcript's session
	// (a Claude Code sub-agent's sidechain): it is written after its parent.
	Parent *Parent
	Events []contract.Event
	// Forks are the sub-agent runs this transcript started: agent id → where (the run and its
	// source message) the sub-agent was called from.
	Forks map[string]ForkPoint
}

// Parent names the transcript a continuation branches from.
type Parent struct {
	SessionID string
	AgentID   string // the sub-agent's id, looked up in the parent's Forks
}

// ForkPoint is the run of a parent session in which a sub-agent was called.
type ForkPoint struct {
	RunID, SourceMessageID string
}

// Report accounts for every line of one source file: Lines = Mapped + Merged + the sum of
// Skipped.
type Report struct {
	Path   string `json:"path"`
	Format string `json:"format"`
	Lines  int    `json:"lines"`
	// Mapped lines produced events of their own.
	Mapped int `json:"mapped"`
	// Merged lines were folded into another line's event: a fragment of an assistant message
	// that shares its message.id, or a record that duplicates another (Codex writes most
	// items twice).
	Merged int `json:"merged"`
	// Skipped lines produced nothing, by reason.
	Skipped map[string]int `json:"skipped"`
	// Notes are what else the reader should know (a tool call without its result, …).
	Notes []string `json:"notes,omitempty"`
	// Sessions are the sessions the file became, with what writing them did.
	Sessions []SessionResult `json:"sessions"`
	// Error is why the file could not be imported (unreadable, or a session refused).
	Error string `json:"error,omitempty"`
}

// SessionResult is what writing one transcript did.
type SessionResult struct {
	// Source is the transcript's own session id; SessionID the session it was written to
	// (another for a continuation, whose thread the server names).
	Source    string `json:"source"`
	SessionID string `json:"sessionId"`
	Events    int    `json:"events"`
	Accepted  int    `json:"accepted"`
	Duplicate int    `json:"duplicate"`
	// ContinuationOf is the parent session of a sub-agent's continuation.
	ContinuationOf string `json:"continuationOf,omitempty"`
}

func (r *Report) skip(reason string) {
	if r.Skipped == nil {
		r.Skipped = map[string]int{}
	}
	r.Skipped[reason]++
}

func (r *Report) note(format string, args ...any) {
	if len(r.Notes) < 100 {
		r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
	}
}

// Accounted reports whether every line is accounted for.
func (r *Report) Accounted() bool {
	n := r.Mapped + r.Merged
	for _, c := range r.Skipped {
		n += c
	}
	return n == r.Lines
}

// SkippedReasons are the reasons lines were skipped, sorted.
func (r *Report) SkippedReasons() []string {
	out := make([]string, 0, len(r.Skipped))
	for k := range r.Skipped {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// builder appends a transcript's events with ids derived from the source: the session id, the
// line the event comes from and its index among that line's events.
type builder struct {
	t        *Transcript
	line     int
	k        int
	run      *openRun
	lastTime string
	lastRun  string // the run of the last event that has one (kept, not searched for)
	runs     int
	sources  map[string]string // run id → its source message
}

// openRun is the run in progress: one turn (a user prompt and what followed).
type openRun struct {
	id, source string
	began      time.Time
	startedAt  string
}

func (b *builder) at(line int) { b.line, b.k = line, 0 }

// add appends an event of eventType with payload at time ts (the line's timestamp; the
// previous event's when the line has none), in the current run when inRun.
func (b *builder) add(ts, eventType string, p contract.Payload, inRun bool) {
	ts = b.stamp(ts)
	b.k++
	id := b.t.SessionID + ":" + strconv.Itoa(b.line) + ":" + strconv.Itoa(b.k)
	e := contract.Event{Contract: "AgentSessionEvent", EventID: id, SessionID: b.t.SessionID, IdempotencyKey: id,
		OccurredAt: ts, EventType: eventType, Payload: p}
	if inRun && b.run != nil {
		e.RunID, e.SourceMessageID = b.run.id, b.run.source
	}
	if sp, ok := p.(*contract.SummaryPayload); ok {
		e.RunID, e.SourceMessageID = sp.RunID, b.sources[sp.RunID] // a summary names its run
	}
	if e.RunID != "" {
		b.lastRun = e.RunID
	}
	b.t.Events = append(b.t.Events, fit(clean(e)))
}

// stamp returns a valid timestamp for an event: ts when the contract takes it, else the last
// one seen, else the Unix epoch (a file without times).
func (b *builder) stamp(ts string) string {
	if ts != "" && ts == b.lastTime {
		return ts // the line's other events: checked already
	}
	if _, err := time.Parse(time.RFC3339Nano, ts); err == nil && contract.IsTimestamp(ts) {
		b.lastTime = ts
		return ts
	}
	if b.lastTime != "" {
		return b.lastTime
	}
	return "1970-01-01T00:00:00Z"
}

// startRun opens a run for the prompt sourceMessage (closing the one before), at ts.
func (b *builder) startRun(ts, runID, sourceMessage string) {
	b.endRun(ts, contract.RunStatusCompleted)
	ts = b.stamp(ts)
	began, _ := time.Parse(time.RFC3339Nano, ts)
	b.run = &openRun{id: runID, source: sourceMessage, began: began, startedAt: ts}
	if b.sources == nil {
		b.sources = map[string]string{}
	}
	b.sources[runID] = sourceMessage
	b.runs++
	b.add(ts, "status", &contract.StatusPayload{Status: contract.RunStatusRunning, StartedAt: ts}, true)
}

// endRun closes the run in progress with status (completed, stopped — through stopping —
// or failed), at ts.
func (b *builder) endRun(ts, status string) {
	if b.run == nil {
		return
	}
	ts = b.stamp(ts)
	end, _ := time.Parse(time.RFC3339Nano, ts)
	ms := max(end.Sub(b.run.began).Milliseconds(), 0)
	d := json.Number(strconv.FormatInt(ms, 10))
	p := &contract.StatusPayload{Status: status, DurationMs: &d}
	switch status {
	case contract.RunStatusStopped:
		b.add(ts, "status", &contract.StatusPayload{Status: contract.RunStatusStopping, StoppingRequestedAt: ts}, true)
		p.StoppedAt = ts
	case contract.RunStatusFailed:
		p.FailedAt = ts
	default:
		p.CompletedAt = ts
	}
	b.add(ts, "status", p, true)
	b.run = nil
}

// textPart is the contract's text part: {"text":…,"type":"text"}, the bytes json.Marshal
// gives the map of those two keys (earlier imports wrote those; a re-import must find them
// duplicates), without encoding a map.
func textPart(s string) contract.RawJSON {
	q, _ := json.Marshal(s)
	b := make([]byte, 0, len(q)+len(`{"text":,"type":"text"}`))
	b = append(append(append(b, `{"text":`...), q...), `,"type":"text"}`...)
	return b
}

// jsonText returns v as JSON: a JSON value given as a string that parses is kept as that
// value, any other string as a JSON string.
func jsonText(s string) contract.RawJSON {
	t := strings.TrimSpace(s)
	if (strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[")) && json.Valid([]byte(t)) {
		return contract.RawJSON(t)
	}
	b, _ := json.Marshal(s)
	return b
}

// maxEvent is the size an event is cut down to when it is over the event size limit (the
// contract's document limit, which the store applies to each event).
const maxEvent = contract.DefaultMaxBytes - 64<<10

// fit returns e, or, when it is over the event size limit, e with its largest free JSON
// values (tool input and output, message parts) cut to a string prefix that says how much
// was left out.
func fit(e contract.Event) contract.Event {
	if approxSize(e.Payload) < maxEvent/2 {
		return e // far from the limit: not worth encoding to find out
	}
	b, err := contract.Marshal(e)
	if err != nil || len(b) <= maxEvent {
		return e
	}
	cut := func(v contract.RawJSON, budget int) contract.RawJSON {
		if len(v) <= budget {
			return v
		}
		s := string(v[:budget])
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		out, _ := json.Marshal(s + fmt.Sprintf("…[%d bytes left out by sessiond import: over the event size limit]", len(v)-len(s)))
		return out
	}
	budget := maxEvent / 2
	switch p := e.Payload.(type) {
	case *contract.ToolPayload:
		cp := *p
		cp.Input, cp.Output = cut(cp.Input, budget/2), cut(cp.Output, budget/2)
		e.Payload = &cp
	case *contract.MessagePayload:
		cp := *p
		cp.Parts = make([]contract.RawJSON, len(p.Parts))
		for i, part := range p.Parts {
			cp.Parts[i] = cut(part, budget/max(len(p.Parts), 1))
		}
		e.Payload = &cp
	case *contract.TerminalPayload:
		cp := *p
		if len(cp.Chunk) > budget {
			cp.Chunk = strings.ToValidUTF8(cp.Chunk[:budget], "") + "…[left out by sessiond import: over the event size limit]"
		}
		e.Payload = &cp
	case *contract.ReasoningPayload:
		cp := *p
		if len(cp.Text) > budget {
			cp.Text = strings.ToValidUTF8(cp.Text[:budget], "") + "…[left out by sessiond import: over the event size limit]"
		}
		e.Payload = &cp
	}
	return e
}

// approxSize is about the encoded size of a payload's large fields (strings may grow when
// escaped: counted twice).
func approxSize(p contract.Payload) int {
	switch p := p.(type) {
	case *contract.ToolPayload:
		return len(p.Input) + len(p.Output) + 2*len(p.ToolName)
	case *contract.MessagePayload:
		n := 0
		for _, part := range p.Parts {
			n += len(part)
		}
		return n
	case *contract.TerminalPayload:
		return 2 * len(p.Chunk)
	case *contract.ReasoningPayload:
		return 2 * len(p.Text)
	case *contract.SummaryPayload:
		return 2 * len(p.Text)
	case *contract.DiffPayload:
		if p.Patch != nil {
			return 2 * len(*p.Patch)
		}
	}
	return 0
}

// tokens is contract.Count of a count the source always has.
func tokens(n, least int64) *int64 { return contract.Count(&n, least) }

// idPart makes a source's id fit in a session id ("S-…", at most 256 characters, no white
// space, control characters, "/" or "\\"): those characters become "-", and it is cut to 100.
func idPart(s string) string {
	s = strings.Map(func(r rune) rune {
		if r <= ' ' || r == '/' || r == '\\' || r == 0x7f || unicode.IsSpace(r) {
			return '-'
		}
		return r
	}, s)
	if len(s) > 100 {
		s = strings.ToValidUTF8(s[:100], "")
	}
	return s
}

// ref makes an id from the source fit the contract's ids (1 to 256 characters): a longer one
// is cut and given a hash of the whole, so that two long ids stay apart.
func ref(s string) string {
	if len(s) <= 200 {
		return s
	}
	h := sha256.Sum256([]byte(s))
	return strings.ToValidUTF8(s[:150], "") + "-" + hex.EncodeToString(h[:8])
}

// clean makes the free JSON values an event took from a file (parts, tool input and output)
// values the contract accepts (contract.CleanJSON): one odd value must not refuse a batch.
func clean(e contract.Event) contract.Event {
	switch p := e.Payload.(type) {
	case *contract.MessagePayload:
		for i := range p.Parts {
			p.Parts[i] = contract.CleanJSON(p.Parts[i])
		}
	case *contract.ToolPayload:
		if len(p.Input) > 0 {
			p.Input = contract.CleanJSON(p.Input)
		}
		if len(p.Output) > 0 {
			p.Output = contract.CleanJSON(p.Output)
		}
	}
	return e
}
