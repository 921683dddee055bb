package bridge

import (
	"encoding/json"
	"strings"
	"testing"
)

// decodeAll decodes events given as (run, type, payload).
func decodeAll(t *testing.T, events [][3]string) []*Event {
	t.Helper()
	out := make([]*Event, len(events))
	for i, ev := range events {
		e, err := Decode(event(t, ev[0], ev[1], ev[2]))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = e
	}
	return out
}

// TestUIHistoryOneMessagePerRun: a message that falls inside a run (an imported "[Request
// interrupted…]") does not split the run's assistant message in two: each id is listed once.
func TestUIHistoryOneMessagePerRun(t *testing.T) {
	h := NewUIHistory()
	for _, e := range decodeAll(t, [][3]string{
		{"", "message", `{"messageId":"m1","role":"user","operation":"append","parts":["go"]}`},
		{"r1", "status", `{"status":"running"}`},
		{"r1", "message", `{"messageId":"a1","role":"assistant","operation":"append","parts":["working"],"status":"streaming"}`},
		{"r1", "message", `{"messageId":"m2","role":"user","operation":"append","parts":["[Request interrupted by user]"],"status":"completed"}`},
		{"r1", "status", `{"status":"stopping","stoppingRequestedAt":"2026-03-01T12:00:00Z"}`},
		{"r1", "status", `{"status":"stopped","stoppedAt":"2026-03-01T12:00:01Z"}`},
		{"r2", "status", `{"status":"running"}`},
		{"r2", "message", `{"messageId":"a2","role":"assistant","operation":"append","parts":["again"],"status":"completed"}`},
		{"r2", "status", `{"status":"completed"}`},
	}) {
		h.Apply(e)
	}
	var ids []string
	for _, m := range h.Messages() {
		ids = append(ids, m.ID)
	}
	if got := strings.Join(ids, " "); got != "m1 r1 m2 r2" {
		t.Fatalf("history ids %q, want each once: m1 r1 m2 r2", got)
	}
	b, _ := json.Marshal(h.Messages()[1])
	if want := `{"id":"r1","role":"assistant","parts":[{"type":"text","text":"working","state":"done"}]}`; string(b) != want {
		t.Fatalf("run r1's message:\n%s\nwant\n%s", b, want)
	}
}

// TestStopReasonReachesTheStream: the reason of a stop (the stopping status's detail) is the
// abort chunk's, when the runtime's stopped status gives none of its own.
func TestStopReasonReachesTheStream(t *testing.T) {
	for _, tc := range []struct{ stopped, want string }{
		{`{"status":"stopped"}`, `data: {"type":"abort","reason":"enough for today"}`},
		{`{"status":"stopped","detail":"the runtime's own"}`, `data: {"type":"abort","reason":"the runtime's own"}`},
	} {
		f := NewFold("r1")
		var b []byte
		for _, e := range decodeAll(t, [][3]string{
			{"r1", "status", `{"status":"running"}`},
			{"r1", "status", `{"status":"stopping","stoppingRequestedAt":"2026-03-01T12:00:00Z","detail":"enough for today"}`},
			{"r1", "status", tc.stopped},
		}) {
			for _, op := range f.Apply(e) {
				b = AppendUI(b, &op)
			}
		}
		if got := strings.Split(string(b), "\n\n")[0]; got != tc.want {
			t.Errorf("stopped %s: %s, want %s", tc.stopped, got, tc.want)
		}
	}
}
