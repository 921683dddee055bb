package importer

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/contract"
)

// TestAppendEventIsMarshal: appendEvent writes the bytes contract.Marshal writes, for every
// event of every fixture and for values that need escaping or compacting, and declines (for
// encoding/json to encode) what it does not handle.
func TestAppendEventIsMarshal(t *testing.T) {
	var events []contract.Event
	err := filepath.WalkDir("testdata", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(name, ".jsonl") {
			return err
		}
		format := "claude-code"
		if strings.Contains(name, "codex") {
			format = "codex"
		}
		ts, _, err := ParseFile(format, name)
		for _, tr := range ts {
			events = append(events, tr.Events...)
		}
		return err
	})
	if err != nil || len(events) < 400 {
		t.Fatalf("%d fixture events: %v", len(events), err)
	}
	odd := "a<b>&c\"\\\n\t\r\b\f\x00\x1f\x7f \u2028\u2029 \xff\xfe 日本語 🙂"
	d, bad := json.Number("1234"), json.Number("01")
	n := int64(7)
	head := contract.Event{Contract: "AgentSessionEvent", EventID: "e" + odd, SessionID: "S-1", IdempotencyKey: "k", OccurredAt: "2026-03-01T12:00:00Z", EventType: "x", Sequence: 3}
	with := func(p contract.Payload, runID string) contract.Event {
		e := head
		e.Payload, e.RunID, e.SourceMessageID = p, runID, runID
		return e
	}
	handled := []contract.Event{
		with(&contract.MessagePayload{MessageID: odd, Role: "user", Operation: "append", Parts: []contract.RawJSON{textPart(odd), nil, contract.RawJSON(" { \"a\" : [ 1 , \"x y\\\" z\" ] }\n")}, Status: "completed"}, ""),
		with(&contract.MessagePayload{MessageID: "m", Role: "user", Operation: "append"}, "r"),
		with(&contract.MessagePayload{MessageID: "m", Role: "user", Operation: "append", Parts: []contract.RawJSON{}}, "r"),
		with(&contract.StatusPayload{Status: "completed", Detail: &odd, StartedAt: "s", StoppingRequestedAt: "sr", StoppedAt: "st", CompletedAt: "c", FailedAt: "f", DurationMs: &d}, "r"),
		with(&contract.StatusPayload{Status: "running"}, "r"),
		with(&contract.UsagePayload{}, "r"),
		with(&contract.UsagePayload{OutputTokens: &n, ContextWindow: &n}, "r"),
		with(&contract.ToolPayload{ToolCallID: "t", ToolName: odd, Status: "failed", Input: contract.RawJSON(`[ ]`), Output: contract.RawJSON(`"\u2028"`), Error: &odd, StartedAt: "a", CompletedAt: "b"}, "r"),
		with(&contract.ToolPayload{ToolCallID: "t", ToolName: "n", Status: "running"}, ""),
		with(&contract.ReasoningPayload{ReasoningID: "x", Text: odd, Status: "completed"}, "r"),
		with(&contract.SummaryPayload{SummaryID: "s", RunID: "r", Text: odd, Highlights: []string{odd, ""}, Status: "completed"}, "r"),
		with(&contract.SummaryPayload{SummaryID: "s", RunID: "r", PendingItems: []string{}}, "r"),
	}
	fast := 0
	for i, e := range append(events, handled...) {
		want, err := contract.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendEvent([]byte("prefix"), &e)
		if !bytes.HasPrefix(got, []byte("prefix")) {
			t.Fatalf("event %d: appendEvent changed what was in buf: %s", i, got)
		}
		if ok {
			fast++
			if !bytes.Equal(got[len("prefix"):], want) {
				t.Errorf("event %d:\nappendEvent      %s\ncontract.Marshal %s", i, got[len("prefix"):], want)
			}
		} else if i >= len(events) {
			t.Errorf("event %d (%T) not encoded: %s", i, e.Payload, want)
		} else if len(got) != len("prefix") {
			t.Errorf("event %d: declined, but buf grew: %s", i, got)
		}
	}
	if fast < len(events)*9/10 {
		t.Errorf("only %d of %d fixture events encoded by appendEvent", fast, len(events))
	}
	for _, e := range []contract.Event{
		with(&contract.DiffPayload{}, ""),
		with(&contract.StatusPayload{Status: "completed", DurationMs: &bad}, "r"),
		with(&contract.ToolPayload{ToolCallID: "t", ToolName: "n", Status: "running", Input: contract.RawJSON(`{"a":`)}, ""),
		with(&contract.MessagePayload{MessageID: "m", Role: "user", Operation: "append", Parts: []contract.RawJSON{contract.RawJSON("nul")}}, ""),
	} {
		if got, ok := appendEvent([]byte("prefix"), &e); ok || string(got) != "prefix" {
			t.Errorf("%T %+v: encoded (%v) as %s; want it left to encoding/json", e.Payload, e.Payload, ok, got)
		}
	}
}

// TestAppendStringIsMarshal: contract.AppendString, which the encoder writes strings with,
// escapes random strings (any bytes: control characters, invalid UTF-8, U+2028, HTML
// characters) as encoding/json does without HTML escaping, and appendRaw compacts random free
// JSON values holding them as it does.
func TestAppendStringIsMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 19))
	pieces := []string{"a", " ", "\"", "\\", "<", "&", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "\u2028", "\u2029", "🙂", "\xff", "\xe2\x80", "\xed\xa0\x80"}
	var one bytes.Buffer
	enc := json.NewEncoder(&one)
	enc.SetEscapeHTML(false)
	for range 20000 {
		var sb strings.Builder
		for range r.IntN(12) {
			if r.IntN(3) == 0 {
				sb.WriteByte(byte(r.IntN(256)))
			} else {
				sb.WriteString(pieces[r.IntN(len(pieces))])
			}
		}
		s := sb.String()
		one.Reset()
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(one.Bytes(), []byte("\n"))
		if got := contract.AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("contract.AppendString(%q) = %s, want %s", s, got, want)
		}
		// The string inside a free JSON value with white space around and in it.
		raw := contract.RawJSON(" [ " + string(want) + " ,\t{ \"k\" :\n" + string(want) + " } ]\r\n")
		one.Reset()
		if err := enc.Encode(raw); err != nil {
			t.Fatal(err)
		}
		want = bytes.TrimSuffix(one.Bytes(), []byte("\n"))
		if got, ok := appendRaw(nil, raw); !ok || !bytes.Equal(got, want) {
			t.Fatalf("appendRaw(%s) = %s, %v; want %s", raw, got, ok, want)
		}
	}
}

// BenchmarkEncodeEvents encodes the events of a Claude Code fixture as an append's body:
// appendEvent against contract.Marshal (encoding/json), per event.
func BenchmarkEncodeEvents(b *testing.B) {
	ts, _, err := ParseFile("claude-code", "testdata/claude-code/representative_messages.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	events := ts[0].Events
	b.Run("appendEvent", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = buf[:0]
			for i := range events {
				buf, _ = appendEvent(buf, &events[i])
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/event")
	})
	b.Run("contract.Marshal", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = buf[:0]
			for _, e := range events {
				raw, err := contract.Marshal(e)
				if err != nil {
					b.Fatal(err)
				}
				buf = append(buf, raw...)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/event")
	})
}
