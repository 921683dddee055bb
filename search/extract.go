package search

import (
	"fmt"
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

// parseLimits bound the parse of a stored event: twice the largest event the store accepts.
var parseLimits = contract.Limits{MaxBytes: 2 * store.MaxEventBytes}

// Extract returns the searchable document of a stored event. It is a pure function of the
// event's bytes: indexing and a rebuild (fsck's comparison) agree because both call it. An
// event whose bytes do not parse (never the case for an event the store accepted) is an error.
func Extract(ev store.StoredEvent) (Doc, error) {
	v, err := contract.Parse(ev.Data, parseLimits)
	if err != nil || v.Kind != contract.KindObject {
		return Doc{}, fmt.Errorf("extract event %d: not a JSON object: %v", ev.Sequence, err)
	}
	d := Doc{Sequence: ev.Sequence, Kind: str(&v, "eventType"), RunID: str(&v, "runId")}
	if t, err := time.Parse(time.RFC3339Nano, str(&v, "occurredAt")); err == nil {
		d.At = t.UTC().Truncate(time.Millisecond)
	}
	var b [NumFields]fieldBuilder
	if p := v.Get("payload"); p != nil && p.Kind == contract.KindObject {
		extractPayload(&d, &b, p)
	}
	for i := range b {
		d.Fields[i] = b[i].String()
	}
	return d, nil
}

// str returns the string member key of v ("" when absent or not a string).
func str(v *contract.Value, key string) string {
	if m := v.Get(key); m != nil && m.Kind == contract.KindString {
		return m.Str
	}
	return ""
}

// extractPayload fills the fields from an event's payload, by event type (the contract's
// payload of each type: contract/types.go).
func extractPayload(d *Doc, b *[NumFields]fieldBuilder, p *contract.Value) {
	add := func(f int, key string) { b[f].add(str(p, key)) }
	all := func(f int, key string) {
		if m := p.Get(key); m != nil {
			strings_(&b[f], m, "")
		}
	}
	switch d.Kind {
	case "message":
		if parts := p.Get("parts"); parts != nil {
			for i := range parts.Elems {
				strings_(&b[FieldText], &parts.Elems[i], "type")
			}
		}
	case "reasoning":
		add(FieldText, "text")
	case "plan":
		add(FieldTitle, "title")
		if steps := p.Get("steps"); steps != nil {
			for i := range steps.Elems {
				b[FieldTitle].add(str(&steps.Elems[i], "title"))
			}
		}
	case "task":
		add(FieldTitle, "title")
		add(FieldText, "detail")
	case "tool":
		d.Tool = str(p, "toolName")
		add(FieldTool, "toolName")
		all(FieldInput, "input")
		all(FieldOutput, "output")
		add(FieldError, "error")
	case "approval":
		add(FieldTitle, "title")
		add(FieldTitle, "description")
		all(FieldInput, "requestedAction")
	case "status":
		add(FieldText, "detail")
	case "artifact":
		add(FieldPath, "name")
		add(FieldPath, "url")
	case "resume":
		add(FieldText, "reason")
	case "error":
		d.Code = str(p, "code")
		add(FieldError, "code")
		add(FieldError, "message")
	case "diff":
		add(FieldPath, "path")
		add(FieldOutput, "patch")
	case "workspace-file":
		add(FieldPath, "path")
	case "terminal":
		add(FieldTerminal, "chunk")
	case "test-result":
		add(FieldTest, "name")
		add(FieldTest, "output")
	case "steer":
		add(FieldText, "text")
		if e := p.Get("error"); e != nil && e.Kind == contract.KindObject {
			d.Code = str(e, "code")
			b[FieldError].add(d.Code)
			b[FieldError].add(str(e, "message"))
		}
	case "summary":
		add(FieldText, "text")
		all(FieldText, "highlights")
		all(FieldText, "pendingItems")
	}
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

// strings_ adds every string value of v to f, in document order (the stored canonical
// order), leaving out the values of the members named skip (a message part's "type").
// Numbers are not text: an exit code or a line number would make every small number a
// common term.
func strings_(f *fieldBuilder, v *contract.Value, skip string) {
	switch v.Kind {
	case contract.KindString:
		f.add(v.Str)
	case contract.KindArray:
		for i := range v.Elems {
			strings_(f, &v.Elems[i], "")
		}
	case contract.KindObject:
		for i := range v.Members {
			if skip != "" && v.Members[i].Key == skip {
				continue
			}
			strings_(f, &v.Members[i].Value, "")
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
