package bridge

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sessiond/sessiond/contract"
)

func TestDecode(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name, typ, payload string
		want               Event
	}{
		{"message text parts", "message", `{"messageId":"a","role":"assistant","operation":"append","parts":[{"type":"text","text":"he\"l\\n"},"lo \u00e9\ud83d\ude00",{"type":"image","url":"x"}],"status":"streaming"}`,
			Event{ID: "a", Role: "assistant", Operation: "append", Status: "streaming", Text: "he\"l\\nlo é😀", TextJSON: []byte(`he\"l\\nlo \u00e9\ud83d\ude00`)}},
		{"escaped key", "message", `{"message\u0049d":"a","role":"user","operation":"append","parts":[]}`, Event{ID: "a", Role: "user", Operation: "append"}},
		{"reasoning", "reasoning", `{"reasoningId":"r","text":"a\tb","status":"completed"}`, Event{ID: "r", Status: "completed", Text: "a\tb", TextJSON: []byte(`a\tb`)}},
		{"tool failed", "tool", `{"toolCallId":"t","toolName":"sh","status":"failed","input":{"a":[1,"}"]},"error":"no"}`, Event{ID: "t", ToolName: "sh", Status: "failed", Input: []byte(`{"a":[1,"}"]}`), Detail: str("no")}},
		{"tool null output", "tool", `{"toolCallId":"t","toolName":"sh","status":"completed","output":null}`, Event{ID: "t", ToolName: "sh", Status: "completed", Output: []byte("null")}},
		{"approval", "approval", `{"approvalId":"ap","toolCallId":"t","status":"requested","title":"ok?"}`, Event{ID: "ap", ToolCallID: "t", Status: "requested", Title: "ok?"}},
		{"status", "status", `{"status":"stopped","detail":"by \"me\""}`, Event{Status: "stopped", Detail: str(`by "me"`)}},
		{"error", "error", `{"code":"X","message":"boom","retryable":false}`, Event{Code: "X", Message: "boom"}},
		{"diff subject", "diff", `{"path":"a/b.go","status":"modified"}`, Event{ID: "a/b.go", Status: "modified"}},
		{"terminal has none", "terminal", `{"terminalId":"t","stream":"stdout","chunk":"x"}`, Event{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := event(t, "r", tc.typ, tc.payload)
			e, err := Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(Event{ID: e.ID, Role: e.Role, Operation: e.Operation, Status: e.Status, ToolName: e.ToolName, ToolCallID: e.ToolCallID,
				Title: e.Title, Detail: e.Detail, Code: e.Code, Message: e.Message, Text: e.Text, TextJSON: e.TextJSON, Input: e.Input, Output: e.Output})
			want, _ := json.Marshal(tc.want)
			if string(got) != string(want) {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
			if e.Type != tc.typ || e.RunID != "r" || string(e.Payload) != tc.payload {
				t.Fatalf("envelope: %q %q %s", e.Type, e.RunID, e.Payload)
			}
		})
	}
	for _, bad := range []string{``, `{`, `{"eventType":"message","payload":{"messageId":}}`, `{"eventType":"x"} x`, `{"payload":{}}`, `{"eventType":"message","payload":{"parts":[}}`} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// FuzzUnescape: the contents of any JSON string the contract accepts decode as encoding/json
// decodes them.
func FuzzUnescape(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c", "\x00\x1f\n\t", "\u2028\u2029", "é✓😀"} {
		b, _ := json.Marshal(s)
		f.Add(string(b))
	}
	f.Add(`"\ud83d\ude00 \u00e9 \/"`)
	f.Fuzz(func(t *testing.T, q string) {
		var want string
		if !utf8.ValidString(q) || json.Unmarshal([]byte(q), &want) != nil || len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
			return
		}
		if _, err := contract.Parse([]byte(q), contract.Limits{}); err != nil {
			return // the store keeps only what the contract accepts (valid UTF-8, no lone surrogates)
		}
		got, ok := unquote([]byte(q))
		if !ok || got != want {
			t.Fatalf("%s: got %q (%v), want %q", q, got, ok, want)
		}
	})
}

// FuzzDecode: Decode never panics, and reads the envelope as encoding/json does.
func FuzzDecode(f *testing.F) {
	f.Add(`{"eventType":"message","runId":"r","payload":{"messageId":"a","role":"assistant","parts":["x",{"type":"text","text":"y"}]}}`)
	f.Add(`{"eventType":"plan","payload":{"planId":"p","steps":[{"id":"1","title":"t","status":"running"}]}}`)
	f.Fuzz(func(t *testing.T, data string) {
		e, err := Decode([]byte(data))
		var v struct {
			EventType string `json:"eventType"`
			RunID     string `json:"runId"`
		}
		if err != nil || json.Unmarshal([]byte(data), &v) != nil {
			return
		}
		if v.EventType != e.Type || v.RunID != e.RunID {
			t.Fatalf("got %q %q, want %q %q", e.Type, e.RunID, v.EventType, v.RunID)
		}
	})
}

// BenchmarkDecode: reading one stored event for the projection, the one-pass decoder against
// encoding/json into the contract's structs (what the bridges used before), on the events of
// server's BenchmarkBridgeProjection (a text delta, a reasoning delta, a tool call).
func BenchmarkDecode(b *testing.B) {
	text := strings.Repeat("lorem ipsum ", 8)
	evs := [][]byte{
		event(nil, "r", "message", `{"messageId":"a0","role":"assistant","operation":"append","parts":[{"type":"text","text":"`+text+`"}],"status":"streaming"}`),
		event(nil, "r", "reasoning", `{"reasoningId":"r0","text":"`+text+`","status":"streaming"}`),
		event(nil, "r", "tool", `{"toolCallId":"t1","toolName":"shell","status":"completed","input":{"cmd":"ls"},"output":"`+text+`"}`),
	}
	b.Run("bridge", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := Decode(evs[i%len(evs)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var e contract.Event
			if err := json.Unmarshal(evs[i%len(evs)], &e); err != nil {
				b.Fatal(err)
			}
		}
	})
}
