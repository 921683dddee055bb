package contract

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// The internal parse used by Validate, CheckEvent and Decode shares string memory with the
// input and reuses pooled arenas. These tests make sure nothing handed to a caller still points
// into the input or into pooled memory.

func TestCheckEventOwnsItsStrings(t *testing.T) {
	doc := []byte(`{"contract":"AgentSessionEvent","eventId":"ev\u002d1\n","sessionId":"S-1","runId":"r1","sourceMessageId":"m\t1","sequence":7,"idempotencyKey":"key-1","occurredAt":"2026-03-01T12:00:00Z","eventType":"status","payload":{"status":"completed","completedAt":"2026-03-01T12:00:09Z","durationMs":9000}}`)
	e, err := CheckEvent(doc, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	body := string(e.JSON(7))
	// scribble over the input and run many other parses through the pool
	for i := range doc {
		doc[i] = 'x'
	}
	for i := 0; i < 200; i++ {
		other := strings.Replace(evSteer, `"e1"`, `"zz\u0041zzzzzzzzzzzzz`+strings.Repeat("q", i)+`"`, 1)
		if err := Validate(KindEvent, []byte(other), Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	if e.EventID != "ev-1\n" || e.SessionID != "S-1" || e.RunID != "r1" || e.SourceMessageID != "m\t1" || e.IdempotencyKey != "key-1" || e.EventType != "status" || e.OccurredAt != "2026-03-01T12:00:00Z" {
		t.Errorf("fields changed: %+v", e)
	}
	rs := e.RunStatus
	if rs == nil || rs.Status != "completed" || rs.CompletedAt != "2026-03-01T12:00:09Z" || rs.DurationMs != "9000" || rs.RunID != "r1" || rs.SourceMessageID != "m\t1" {
		t.Errorf("run status changed: %+v", rs)
	}
	if got := string(e.JSON(7)); got != body {
		t.Errorf("body changed:\n%s\n%s", got, body)
	}
}

func TestParseOwnsItsStrings(t *testing.T) {
	doc := []byte(`{"a":"plain","b":"esc\u0041ped"}`)
	v, err := Parse(doc, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range doc {
		doc[i] = 'x'
	}
	Validate(KindEvent, []byte(evSteer), Limits{})
	if v.Members[0].Key != "a" || v.Get("a").Str != "plain" || v.Get("b").Str != "escAped" {
		t.Errorf("Parse result changed with its input: %+v", v.Members)
	}
}

// TestEscapedStringsInScratchParse checks decoded strings with escapes in a scratch parse:
// many of them in one document (the reusable buffer grows while earlier strings are in use),
// and duplicates that are only equal once decoded.
func TestEscapedStringsInScratchParse(t *testing.T) {
	ev := func(id, key string, seq int) string {
		return `{"contract":"AgentSessionEvent","eventId":"` + id + `","sessionId":"S-1","sequence":` + itoa(seq) + `,"idempotencyKey":"` + key + `","occurredAt":"2026-03-01T12:00:00Z","eventType":"reasoning","payload":{"reasoningId":"x","text":"` + strings.Repeat(`\n\u00e9`, 50) + `","status":"completed"}}`
	}
	var evs []string
	for i := 0; i < 40; i++ {
		evs = append(evs, ev(`e\u0041`+itoa(i), `k\t`+itoa(i), i))
	}
	evs = append(evs, ev(`eA3`, `k\u00093`, 40)) // same as event 3 once decoded
	doc := `{"sessionId":"S-1","snapshot":{"mode":"chat","modelId":"m","capabilities":{}},"status":"running","events":[` + strings.Join(evs, ",") + `],"lastSequence":40}`
	got := problemsOf(t, KindView, []byte(doc))
	want := []string{"/events/40/eventId view-unique-event-id rule", "/events/40/idempotencyKey view-unique-idempotency-key rule"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("problems %q, want %q", got, want)
	}
}

// TestConcurrentUse validates, checks and decodes from many goroutines at once (the parser
// pool is shared); run with -race. Every result must equal the sequential one.
func TestConcurrentUse(t *testing.T) {
	docs := generateEvents(t, 11, 0)
	if len(docs) > 3000 {
		docs = docs[:3000]
	}
	want := make([]string, len(docs))
	for i, d := range docs {
		want[i] = fmt.Sprint(Validate(KindEvent, d.data, Limits{}))
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < len(docs); i += 3 {
				if got := fmt.Sprint(Validate(KindEvent, docs[i].data, Limits{})); got != want[i] {
					t.Errorf("%s: concurrent %s, sequential %s", docs[i].name, got, want[i])
					return
				}
				if e, err := CheckEvent(docs[i].data, Limits{}); err == nil {
					var ev Event
					if err := Decode(KindEvent, e.JSON(e.Sequence), Limits{}, &ev); err != nil {
						t.Errorf("%s: decode of the canonical form: %v", docs[i].name, err)
						return
					}
				}
			}
		}(g)
	}
	wg.Wait()
}
