package benchkit

import (
	"bytes"
	_ "embed"
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// templates are the agent events every system receives (testdata/events.jsonl): a message, a
// tool call, reasoning, a plan, a diff, terminal output, a test result, usage, an approval, an
// artifact and a summary, derived from contract/testdata/bench_events.jsonl. Each has the
// placeholders {{EVENT_ID}}, {{SESSION_ID}} and {{KEY}}.
//
//go:embed testdata/events.jsonl
var templatesFile string

var templates = func() [][4][]byte {
	var out [][4][]byte
	for _, l := range strings.Split(strings.TrimSpace(templatesFile), "\n") {
		// Split each template at its placeholders once: eventId, sessionId, key, in this order.
		a, rest, ok1 := strings.Cut(l, "{{EVENT_ID}}")
		b, rest, ok2 := strings.Cut(rest, "{{SESSION_ID}}")
		c, d, ok3 := strings.Cut(rest, "{{KEY}}")
		if !ok1 || !ok2 || !ok3 {
			panic("benchkit: testdata/events.jsonl: a template without {{EVENT_ID}}, {{SESSION_ID}} and {{KEY}} in this order: " + l)
		}
		out = append(out, [4][]byte{[]byte(a), []byte(b), []byte(c), []byte(d)})
	}
	return out
}()

// IDs says how event ids and idempotency keys are made.
type IDs int

const (
	// RandomIDs are UUIDv4: what most runtimes send, and the headline figures.
	RandomIDs IDs = iota
	// TimeOrderedIDs are UUIDv7: they sort by creation time, so they append at the end of
	// every index.
	TimeOrderedIDs
)

// String names the id kind as the benchmarks and the table do.
func (k IDs) String() string {
	if k == TimeOrderedIDs {
		return "uuidv7"
	}
	return "uuidv4"
}

// Event is one event as every system receives it: its id and idempotency key (which the peers
// store beside it) and its JSON.
type Event struct {
	ID, Key string
	Data    []byte
}

// Generator makes events. It is not safe for concurrent use; give each writer its own.
type Generator struct {
	ids IDs
	n   int
}

// NewGenerator returns a generator of events whose ids and keys are of kind ids; start picks
// the first template, so that writers starting at different points send different kinds.
func NewGenerator(ids IDs, start int) *Generator {
	return &Generator{ids: ids, n: start}
}

func (g *Generator) newID() string {
	if g.ids == TimeOrderedIDs {
		return uuid.Must(uuid.NewV7()).String()
	}
	return uuid.NewString()
}

// Next returns a new event of session sid with a fresh event id and idempotency key, the next
// template in turn.
func (g *Generator) Next(sid string) Event {
	t := templates[g.n%len(templates)]
	g.n++
	e := Event{ID: g.newID(), Key: g.newID()}
	buf := make([]byte, 0, len(t[0])+len(t[1])+len(t[2])+len(t[3])+len(sid)+len(e.ID)+len(e.Key))
	buf = append(buf, t[0]...)
	buf = append(buf, e.ID...)
	buf = append(buf, t[1]...)
	buf = append(buf, sid...)
	buf = append(buf, t[2]...)
	buf = append(buf, e.Key...)
	buf = append(buf, t[3]...)
	e.Data = buf
	return e
}

// Batch returns n new events of session sid.
func (g *Generator) Batch(sid string, n int) []Event {
	evs := make([]Event, n)
	for i := range evs {
		evs[i] = g.Next(sid)
	}
	return evs
}

// KeyOf returns the idempotency key in an event's JSON as any system hands it back (sessiond's
// canonical form, or the bytes as sent), or "" when it has none.
func KeyOf(data []byte) string { return FieldOf(data, "idempotencyKey") }

// FieldOf returns the first string member called name in data, or "" (the events' ids and
// keys need no unescaping).
func FieldOf(data []byte, name string) string {
	field := `"` + name + `":"`
	i := bytes.Index(data, []byte(field))
	if i < 0 {
		return ""
	}
	rest := data[i+len(field):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}

// SessionID returns the id of session i of a workload; run makes it unique to one run of it.
func SessionID(workload string, run int64, i int) string {
	return fmt.Sprintf("S-%s-%d-%d", workload, run, i)
}
