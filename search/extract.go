package search

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// The searchable fields of a document, in the order of Doc.Fields.
const (
	FieldText     = iota // message text, reasoning, summaries, steering text, details
	FieldTitle           // plan, step, task and approval titles and descriptions
	FieldTool            // tool names
	FieldInput           // tool inputs, an approval's requested action
	FieldOutput          // tool outputs, diff patches
	FieldPath            // file paths of diffs, workspace files and artifacts
	FieldTerminal        // terminal output
	FieldTest            // test names and their output
	FieldError           // error codes and messages (error events, failed tools, steering errors)
	NumFields
)

// FieldNames are the names of the fields, as results (wire.SearchHit.Field) and the docs name
// them, indexed by the Field constants.
var FieldNames = [NumFields]string{"text", "title", "tool", "input", "output", "path", "terminal", "test", "error"}

// MaxFieldBytes is how much of one field of one event is indexed: the first 32 KiB (cut at a
// character boundary). A longer terminal chunk or tool output is searchable by its beginning.
const MaxFieldBytes = 32 << 10

// Doc is the searchable document of one event: where it is, the values the filters compare,
// and the text of each field. Extract makes it; both drivers index exactly this.
type Doc struct {
	Sequence int64
	Kind     string // the eventType
	RunID    string
	// Tool is the tool name of a tool event, for the tool filter ("" otherwise).
	Tool string
	// Code is the error code of an error event or of a steering command's error, for the code
	// filter ("" otherwise).
	Code string
	// At is the event's occurredAt, truncated to the millisecond.
	At time.Time
	// Fields holds the text of each field, indexed by the Field constants.
	Fields [NumFields]string
}

// Empty reports whether the document has no text in any field (it is still found by filters).
func (d *Doc) Empty() bool {
	for _, f := range d.Fields {
		if f != "" {
			return false
		}
	}
	return true
}

// Substring returns the text the substring index holds for the document: its paths and tool
// inputs (where commands are), one per line.
func (d *Doc) Substring() string {
	switch {
	case d.Fields[FieldPath] == "":
		return d.Fields[FieldInput]
	case d.Fields[FieldInput] == "":
		return d.Fields[FieldPath]
	}
	return d.Fields[FieldPath] + "\n" + d.Fields[FieldInput]
}

// eventEnvelope is the part of a stored event Extract reads before its payload.
type eventEnvelope struct {
	RunID      string          `json:"runId"`
	Sequence   int64           `json:"sequence"`
	OccurredAt string          `json:"occurredAt"`
	EventType  string          `json:"eventType"`
	Payload    json.RawMessage `json:"payload"`
}

// Extract returns the searchable document of a stored event. It is a pure function of the
// event's bytes: indexing and a rebuild (fsck's comparison) agree because both call it. An
// event whose bytes do not decode (never the case for an event the store accepted) is an error.
func Extract(ev store.StoredEvent) (Doc, error) {
	var env eventEnvelope
	if err := json.Unmarshal(ev.Data, &env); err != nil {
		return Doc{}, fmt.Errorf("extract event %d: %w", ev.Sequence, err)
	}
	d := Doc{Sequence: ev.Sequence, Kind: env.EventType, RunID: env.RunID}
	if t, err := time.Parse(time.RFC3339Nano, env.OccurredAt); err == nil {
		d.At = t.UTC().Truncate(time.Millisecond)
	}
	var b [NumFields]fieldBuilder
	if err := extractPayload(&d, &b, env.EventType, env.Payload); err != nil {
		return Doc{}, fmt.Errorf("extract event %d (%s): %w", ev.Sequence, env.EventType, err)
	}
	for i := range b {
		d.Fields[i] = b[i].String()
	}
	return d, nil
}

func extractPayload(d *Doc, b *[NumFields]fieldBuilder, kind string, raw json.RawMessage) error {
	switch kind {
	case "message":
		var p contract.MessagePayload
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		for _, part := range p.Parts {
			strings_(&b[FieldText], part, "type")
		}
	case "reasoning":
		var p contract.ReasoningPayload
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		b[FieldText].add(p.Text)
	case "plan":
		var p contract.PlanPayload
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		if p.Title != nil {
			b[FieldTitle].add(*p.Title)
		}
		for _, s := range p.Steps {
			b[FieldTitle].add(s.Title)
		}
	case "task":
		var p contract.TaskPayload
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		b[FieldTitle].add(p.Title)
		if p.Detail != nil {
			b[FieldText].add(*p.Detail)
		}
	case "tool":
		var p contract.ToolPayload
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		d.Tool = p.ToolName
		b[FieldTool].add(p.ToolName)
		strings_(&b[FieldInput], p.Input, "")
		strings_(&b[FieldOutput], p.Output, "")
		if p.Error != nil {
			b[FieldError].add(*p.Error)
		}
	case "approval":
		var p contract.ApprovalPayload
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		b[FieldTitle].add(p.Title)
		if p.Description != nil {
			b[FieldTitle].add(*p.Description)
		}
		strings_(&b[FieldInput], p.RequestedAction, "")
	case "status":
		var p contract.StatusPayload
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		if p.Detail != nil {
			b[FieldText].add(*p.Detail)
		}
	case "artifact":
		var p contract.ArtifactPayload
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		b[FieldPath].add(p.Name)
		b[FieldPath].add(p.URL)
	case "resume":
		var p contract.ResumePayload
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		if p.Reason != nil {
			b[FieldText].add(*p.Reason)
		}
	case "error":
		var p contract.ErrorPayload
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		d.Code = p.Code
		b[FieldError].add(p.Code)
		b[FieldError].add(p.Message)
	case "diff":
		var p contract.DiffPayload
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		b[FieldPath].add(p.Path)
		if p.Patch != nil {
			b[FieldOutput].add(*p.Patch)
		}
	case "workspace-file":
		var p contract.WorkspaceFilePayload
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		b[FieldPath].add(p.Path)
	case "terminal":
		var p contract.TerminalPayload
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		b[FieldTerminal].add(p.Chunk)
	case "test-result":
		var p contract.TestResultPayload
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		b[FieldTest].add(p.Name)
		if p.Output != nil {
			b[FieldTest].add(*p.Output)
		}
	case "steer":
		var p contract.SteerPayload
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		b[FieldText].add(p.Text)
		if p.Error != nil {
			d.Code = string(p.Error.Code)
			b[FieldError].add(string(p.Error.Code))
			b[FieldError].add(p.Error.Message)
		}
	case "summary":
		var p contract.SummaryPayload
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		b[FieldText].add(p.Text)
		for _, h := range p.Highlights {
			b[FieldText].add(h)
		}
		for _, h := range p.PendingItems {
			b[FieldText].add(h)
		}
	}
	return nil
}

// fieldBuilder joins the values of one field with newlines, up to MaxFieldBytes.
type fieldBuilder struct{ buf []byte }

func (f *fieldBuilder) add(s string) {
	s = strings.TrimSpace(s)
	if s == "" || len(f.buf) >= MaxFieldBytes {
		return
	}
	if len(f.buf) > 0 {
		f.buf = append(f.buf, '\n')
	}
	for _, r := range s {
		if r == 0 {
			r = ' ' // PostgreSQL's text holds no NUL
		}
		if len(f.buf)+utf8.RuneLen(r) > MaxFieldBytes {
			return
		}
		f.buf = utf8.AppendRune(f.buf, r)
	}
}

func (f *fieldBuilder) String() string { return string(f.buf) }

// strings_ adds every string value of the JSON value raw to f, in document order, leaving out
// the values of the members named skip (a message part's "type").
func strings_(f *fieldBuilder, raw json.RawMessage, skip string) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			f.add(v)
		case json.Number:
			// numbers are not text: an exit code or a line number would make every small
			// number a common term
		case []any:
			for _, x := range v {
				walk(x)
			}
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sortStrings(keys)
			for _, k := range keys {
				if k == skip && skip != "" {
					continue
				}
				walk(v[k])
			}
		}
	}
	var v any
	if dec.Decode(&v) == nil {
		walk(v)
	}
}

// sortStrings sorts keys (JSON objects are unordered; the canonical encoding sorts them too,
// so the order here is the stored order).
func sortStrings(keys []string) {
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
}

// millis returns t in Unix milliseconds, 0 for the zero time or a time before 1970.
func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return max(t.UnixMilli(), 0)
}

// formatMillis formats Unix milliseconds as RFC 3339 in UTC.
func formatMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

var _ = strconv.Itoa
