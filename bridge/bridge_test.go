package bridge

import (
	"encoding/json"
	"strings"
	"testing"
)

func event(t testing.TB, run, typ, payload string) []byte {
	if t != nil {
		t.Helper()
	}
	data := []byte(`{"contract":"AgentSessionEvent","eventId":"e","sessionId":"S","runId":"` + run + `","sequence":0,"idempotencyKey":"e","occurredAt":"2026-03-01T12:00:00Z","eventType":"` + typ + `","payload":` + payload + `}`)
	return data
}

// ops folds events (type and payload, of run r) and returns the ops of all, as "KIND:ID" words.
func ops(t *testing.T, f *Fold, events ...[2]string) string {
	t.Helper()
	var out []string
	for _, ev := range events {
		data := event(t, "r", ev[0], ev[1])
		e, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range f.Apply(e) {
			out = append(out, opNames[op.Kind]+":"+op.ID)
		}
	}
	return strings.Join(out, " ")
}

var opNames = map[OpKind]string{OpUserMessage: "user", OpTextStart: "ts", OpTextDelta: "td", OpTextEnd: "te", OpReasoningStart: "rs",
	OpReasoningDelta: "rd", OpReasoningEnd: "re", OpToolStart: "tool", OpToolInput: "in", OpToolOutput: "out", OpToolError: "err",
	OpToolDenied: "denied", OpApprovalRequest: "ask", OpApprovalDecision: "decided", OpStepStart: "step", OpStepEnd: "/step",
	OpState: "state", OpData: "data", OpRunWaiting: "wait", OpRunCompleted: "done", OpRunStopped: "stopped", OpRunFailed: "failed"}

func TestFold(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events [][2]string
		want   string
	}{
		{"text streamed and completed", [][2]string{
			{"message", `{"messageId":"a","role":"assistant","operation":"append","parts":[{"type":"text","text":"x"},"y"],"status":"streaming"}`},
			{"message", `{"messageId":"a","role":"assistant","operation":"append","parts":[],"status":"completed"}`},
		}, "ts:a td:a te:a"},
		{"a part that is not text is carried whole", [][2]string{
			{"message", `{"messageId":"a","role":"assistant","operation":"append","parts":[{"type":"file","url":"u"}]}`},
		}, "data: ts:a"},
		{"replace closes the text and goes out whole", [][2]string{
			{"message", `{"messageId":"a","role":"assistant","operation":"append","parts":["x"]}`},
			{"message", `{"messageId":"a","role":"assistant","operation":"replace","parts":["y"]}`},
		}, "ts:a td:a te:a data:a"},
		{"a tool without input gets {} before its output", [][2]string{
			{"tool", `{"toolCallId":"t","toolName":"x","status":"pending"}`},
			{"tool", `{"toolCallId":"t","toolName":"x","status":"failed","error":"no"}`},
		}, "tool:t in:t err:t"},
		{"approval of an unknown tool call is data", [][2]string{
			{"approval", `{"approvalId":"a","status":"requested","title":"t"}`},
			{"status", `{"status":"waiting_approval"}`},
		}, "data:a wait:"},
		{"plan steps open and close, and close at the end", [][2]string{
			{"plan", `{"planId":"p","status":"running","steps":[{"id":"1","title":"A","status":"running"},{"id":"2","title":"B","status":"running"}]}`},
			{"plan", `{"planId":"p","status":"running","steps":[{"id":"1","title":"A","status":"completed"},{"id":"2","title":"B","status":"running"}]}`},
			{"status", `{"status":"failed","failedAt":"2026-03-01T12:00:00Z","durationMs":1}`},
		}, "step:1 step:2 data:p state: /step:1 data:p state: /step:2 failed:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ops(t, NewFold("r"), tc.events...); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	// A failed run says the last error event's message.
	f := NewFold("r")
	ops(t, f, [2]string{"error", `{"code":"X","message":"boom","retryable":false}`})
	data := event(t, "r", "status", `{"status":"failed","failedAt":"2026-03-01T12:00:00Z","durationMs":1}`)
	e, _ := Decode(data)
	got := f.Apply(e)
	if last := got[len(got)-1]; last.Kind != OpRunFailed || last.Text != "boom" || last.Code != "X" {
		t.Fatalf("failed: %+v", last)
	}
	// Another run's events give nothing.
	data = event(t, "other", "message", `{"messageId":"a","role":"assistant","operation":"append","parts":["x"]}`)
	e, _ = Decode(data)
	if got := NewFold("r").Apply(e); len(got) != 0 {
		t.Fatalf("another run's event: %+v", got)
	}
}

// FuzzRequests: any body the server's strict decoder lets through is checked without a panic.
func FuzzRequests(f *testing.F) {
	f.Add(`{"id":"S","messages":[{"id":"m","role":"assistant","parts":[{"state":"approval-responded","approval":{"id":"a","approved":true}}]}],"trigger":"submit-message"}`)
	f.Add(`{"threadId":"S","runId":"r","messages":[{"id":"m","role":"user","content":[{"type":"text","text":"x"}]}],"resume":[{"interruptId":"a","status":"resolved","payload":{"approved":false}}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		var c ChatRequest
		if json.Unmarshal([]byte(body), &c) == nil {
			c.Check("S")
			c.Approvals()
		}
		var in RunAgentInput
		if json.Unmarshal([]byte(body), &in) == nil {
			in.Check("S")
			in.Decisions()
			for i := range in.Messages {
				in.Messages[i].Parts()
			}
		}
	})
}
