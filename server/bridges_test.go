package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/server"
)

// The bridges' tests with a scripted runtime (the real clients run in interop/): the exact
// chunks and events a run becomes, history, idempotency, resume and refusals.

const bridgeCreate = `{"session_id":%q,"agent_id":"agent-1","role":"implementer","snapshot":{"mode":"work","modelId":"m","capabilities":{"approval":true}}}`

// runtimeEvent is an event of run r of session sid, appended by the scripted runtime.
func runtimeEvent(sid, run string, n int, typ, payload string) string {
	return fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"rt-%s-%d","sessionId":%q,"runId":%q,"sourceMessageId":%q,"sequence":0,"idempotencyKey":"rt-%s-%d","occurredAt":"2026-03-01T12:00:00Z","eventType":%q,"payload":%s}`,
		run, n, sid, run, strings.TrimPrefix(run, "run-"), run, n, typ, payload)
}

func (b *bundle) appendAll(t testing.TB, sid string, events ...string) {
	t.Helper()
	resp := b.do(t, "POST", "/v1/sessions/"+sid+"/events", "application/json", "["+strings.Join(events, ",")+"]")
	if resp.status != http.StatusCreated {
		t.Fatalf("append: %d %s", resp.status, resp.body)
	}
}

// async sends a request in the background; its answer arrives on the channel.
func (b *bundle) async(t testing.TB, method, path, body string) <-chan response {
	ch := make(chan response, 1)
	go func() { ch <- b.do(t, method, path, "application/json", body) }()
	return ch
}

func (b *bundle) waitSequence(t testing.TB, sid string, seq int64) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if b.lastSequence(t, sid) >= seq {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("session %s never reached sequence %d", sid, seq)
}

// dataLines returns the data of each SSE block of body.
func dataLines(body string) []string {
	var out []string
	for _, block := range strings.Split(body, "\n\n") {
		for _, line := range strings.Split(block, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				out = append(out, d)
			}
		}
	}
	return out
}

func TestChatRunWithApproval(t *testing.T) {
	b := setup(t, server.Options{})
	const sid, run = "S-chat", "run-m1"
	if r := b.do(t, "POST", "/v1/sessions", "application/json", fmt.Sprintf(bridgeCreate, sid)); r.status != http.StatusCreated {
		t.Fatal(r.body)
	}
	user := `{"id":"m1","role":"user","parts":[{"type":"text","text":"hi"}]}`
	post := `{"id":"S-chat","messages":[` + user + `],"trigger":"submit-message"}`
	first := b.async(t, "POST", "/v1/sessions/S-chat/chat", post)
	b.waitSequence(t, sid, 1) // the message and the queued run
	b.appendAll(t, sid,
		runtimeEvent(sid, run, 1, "status", `{"status":"running","startedAt":"2026-03-01T12:00:00Z"}`),
		runtimeEvent(sid, run, 2, "reasoning", `{"reasoningId":"r1","text":"think","status":"completed"}`),
		runtimeEvent(sid, run, 3, "message", `{"messageId":"a1","role":"assistant","operation":"append","parts":[{"type":"text","text":"Hello \"you\"\n"}],"status":"streaming"}`),
		runtimeEvent(sid, run, 4, "tool", `{"toolCallId":"t1","toolName":"shell","status":"pending","input":{"cmd":"ls"}}`),
		runtimeEvent(sid, run, 5, "approval", `{"approvalId":"ap1","toolCallId":"t1","status":"requested","title":"Run ls?"}`),
		runtimeEvent(sid, run, 6, "status", `{"status":"waiting_approval"}`))
	resp := <-first
	if resp.status != http.StatusOK || resp.header.Get("X-Vercel-Ai-Ui-Message-Stream") != "v1" || resp.header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("chat POST: %d %v %s", resp.status, resp.header, resp.body)
	}
	want := []string{
		`{"type":"start","messageId":"run-m1"}`,
		`{"type":"reasoning-start","id":"r1"}`,
		`{"type":"reasoning-delta","id":"r1","delta":"think"}`,
		`{"type":"reasoning-end","id":"r1"}`,
		`{"type":"text-start","id":"a1"}`,
		`{"type":"text-delta","id":"a1","delta":"Hello \"you\"\n"}`,
		`{"type":"tool-input-start","toolCallId":"t1","toolName":"shell","dynamic":true}`,
		`{"type":"tool-input-available","toolCallId":"t1","toolName":"shell","input":{"cmd":"ls"},"dynamic":true}`,
		`{"type":"tool-approval-request","approvalId":"ap1","toolCallId":"t1"}`,
		`{"type":"text-end","id":"a1"}`,
		`{"type":"finish","finishReason":"tool-calls"}`,
		`[DONE]`,
	}
	if got := dataLines(resp.body); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("first stream:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The resume endpoint replays the waiting run.
	if r := b.do(t, "GET", "/v1/sessions/S-chat/chat/S-chat/stream", "", ""); r.status != http.StatusOK || strings.Join(dataLines(r.body), "\n") != strings.Join(want, "\n") {
		t.Fatalf("resume while waiting: %d %s", r.status, r.body)
	}

	// The client answers the approval: the assistant message with the tool part responded.
	assistant := `{"id":"run-m1","role":"assistant","parts":[{"type":"dynamic-tool","toolName":"shell","toolCallId":"t1","state":"approval-responded","input":{"cmd":"ls"},"approval":{"id":"ap1","approved":true,"reason":"looks safe"}}]}`
	second := b.async(t, "POST", "/v1/sessions/S-chat/chat", `{"id":"S-chat","messages":[`+user+`,`+assistant+`],"trigger":"submit-message"}`)
	b.waitSequence(t, sid, 8) // the decision and running
	// Replays of the run that went through the approval, for each AI SDK major: no finish
	// mid-stream; ai 7 gets the decision and its reason.
	replay := map[string]*http.Response{}
	for _, major := range []string{"6", "7"} {
		req, err := http.NewRequest("GET", b.ts.URL+"/v1/sessions/S-chat/chat/S-chat/stream", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Sessiond-AI-SDK", major)
		if replay[major], err = b.ts.Client().Do(req); err != nil { // the stream has started
			t.Fatal(err)
		}
		defer replay[major].Body.Close()
	}
	b.appendAll(t, sid,
		runtimeEvent(sid, run, 7, "tool", `{"toolCallId":"t1","toolName":"shell","status":"completed","output":"a b"}`),
		runtimeEvent(sid, run, 8, "message", `{"messageId":"a1","role":"assistant","operation":"append","parts":[{"type":"text","text":"done"}],"status":"completed"}`),
		runtimeEvent(sid, run, 9, "terminal", `{"terminalId":"t1","stream":"stdout","chunk":"a b"}`),
		runtimeEvent(sid, run, 10, "status", `{"status":"completed","completedAt":"2026-03-01T12:00:01Z","durationMs":1000}`))
	resp = <-second
	want2 := []string{
		`{"type":"start","messageId":"run-m1"}`,
		`{"type":"tool-output-available","toolCallId":"t1","output":"a b","dynamic":true}`,
		`{"type":"text-start","id":"a1"}`,
		`{"type":"text-delta","id":"a1","delta":"done"}`,
		`{"type":"text-end","id":"a1"}`,
		`{"type":"data-terminal","data":{"terminalId":"t1","stream":"stdout","chunk":"a b"}}`,
		`{"type":"finish","finishReason":"stop"}`,
		`[DONE]`,
	}
	if got := dataLines(resp.body); strings.Join(got, "\n") != strings.Join(want2, "\n") {
		t.Fatalf("continuation:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want2, "\n"))
	}
	decision := []string{
		`{"type":"tool-approval-response","approvalId":"ap1","approved":true}`,
		`{"type":"tool-approval-response","approvalId":"ap1","approved":true,"reason":"looks safe"}`,
	}
	for major, chunks := range map[string][][]string{"6": {want[:10], want2[1:]}, "7": {want[:10], decision, want2[1:]}} {
		body, _ := io.ReadAll(replay[major].Body)
		if got, w := strings.Join(dataLines(string(body)), "\n"), strings.Join(slices.Concat(chunks...), "\n"); replay[major].StatusCode != http.StatusOK || got != w {
			t.Fatalf("replay for ai %s: %d\n%s\nwant:\n%s", major, replay[major].StatusCode, got, w)
		}
	}

	// History: the user's message and the run's message, as the client holds them.
	hist := b.do(t, "GET", "/v1/sessions/S-chat/chat", "", "")
	var h struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal([]byte(hist.body), &h); err != nil || len(h.Messages) != 2 {
		t.Fatalf("history: %s", hist.body)
	}
	wantAssistant := `{"id":"run-m1","role":"assistant","parts":[{"type":"reasoning","id":"r1","text":"think","state":"done"},{"type":"text","text":"Hello \"you\"\n","state":"done"},{"type":"dynamic-tool","state":"output-available","toolName":"shell","toolCallId":"t1","input":{"cmd":"ls"},"output":"a b","approval":{"id":"ap1","approved":true,"reason":"looks safe"}},{"type":"text","text":"done","state":"done"},{"type":"data-terminal","data":{"terminalId":"t1","stream":"stdout","chunk":"a b"}}]}`
	if string(h.Messages[0]) != user || string(h.Messages[1]) != wantAssistant {
		t.Fatalf("history:\n%s\n%s\nwant:\n%s\n%s", h.Messages[0], h.Messages[1], user, wantAssistant)
	}

	// No active run: 204. The same first POST again appends nothing and replays the run.
	if r := b.do(t, "GET", "/v1/sessions/S-chat/chat/S-chat/stream", "", ""); r.status != http.StatusNoContent {
		t.Fatalf("resume without a run: %d %s", r.status, r.body)
	}
	last := b.lastSequence(t, sid)
	if r := b.do(t, "POST", "/v1/sessions/S-chat/chat", "application/json", post); r.status != http.StatusOK || !strings.HasSuffix(r.body, "data: [DONE]\n\n") {
		t.Fatalf("repeated POST: %d %s", r.status, r.body)
	}
	if got := b.lastSequence(t, sid); got != last {
		t.Fatalf("the repeated POST appended: last sequence %d, was %d", got, last)
	}
	// Stop without an active run.
	if r := b.do(t, "POST", "/v1/sessions/S-chat/chat/stop", "", ""); r.status != http.StatusConflict || errorBody(t, r.body).Code != "ACTIVE_RUN_NOT_FOUND" {
		t.Fatalf("stop without a run: %d %s", r.status, r.body)
	}
}

func TestAGUIRunWithInterrupt(t *testing.T) {
	b := setup(t, server.Options{})
	const sid, run = "S-agui", "run-u1"
	if r := b.do(t, "POST", "/v1/sessions", "application/json", fmt.Sprintf(bridgeCreate, sid)); r.status != http.StatusCreated {
		t.Fatal(r.body)
	}
	in := `{"threadId":"S-agui","runId":"c1","messages":[{"id":"u1","role":"user","content":"hi"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}`
	first := b.async(t, "POST", "/v1/sessions/S-agui/agui", in)
	b.waitSequence(t, sid, 1)
	b.appendAll(t, sid,
		runtimeEvent(sid, run, 1, "status", `{"status":"running","startedAt":"2026-03-01T12:00:00Z"}`),
		runtimeEvent(sid, run, 2, "plan", `{"planId":"p","status":"running","steps":[{"id":"s1","title":"Look","status":"running"}]}`),
		runtimeEvent(sid, run, 3, "message", `{"messageId":"a1","role":"assistant","operation":"append","parts":[{"type":"text","text":"ok"}],"status":"streaming"}`),
		runtimeEvent(sid, run, 4, "tool", `{"toolCallId":"t1","toolName":"shell","status":"pending","input":{"cmd":"ls"}}`),
		runtimeEvent(sid, run, 5, "approval", `{"approvalId":"ap1","toolCallId":"t1","status":"requested","title":"Run ls?"}`),
		runtimeEvent(sid, run, 6, "status", `{"status":"waiting_approval"}`))
	resp := <-first
	types := func(body string) []string {
		var out []string
		for _, d := range dataLines(body) {
			var e struct{ Type string }
			if err := json.Unmarshal([]byte(d), &e); err != nil {
				t.Fatalf("not JSON: %s", d)
			}
			out = append(out, e.Type)
		}
		return out
	}
	want := "RUN_STARTED MESSAGES_SNAPSHOT STEP_STARTED STATE_SNAPSHOT TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END CUSTOM TEXT_MESSAGE_END STEP_FINISHED RUN_FINISHED"
	if got := strings.Join(types(resp.body), " "); got != want {
		t.Fatalf("first run:\n%s\nwant\n%s\n%s", got, want, resp.body)
	}
	lines := dataLines(resp.body)
	if lines[1] != `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"u1","role":"user","content":"hi"}]}` ||
		lines[len(lines)-1] != `{"type":"RUN_FINISHED","threadId":"S-agui","runId":"c1","outcome":{"type":"interrupt","interrupts":[{"id":"ap1","reason":"approval","message":"Run ls?","toolCallId":"t1"}]}}` {
		t.Fatalf("first run: %s", resp.body)
	}

	// A reloaded tab (nothing new to send) while the run waits: the snapshot, then the
	// interrupt it waits for, and the stream ends.
	reload := b.async(t, "POST", "/v1/sessions/S-agui/agui", strings.Replace(in, `"c1"`, `"c1b"`, 1))
	select {
	case r := <-reload:
		got := dataLines(r.body)
		if strings.Join(types(r.body), " ") != "RUN_STARTED MESSAGES_SNAPSHOT RUN_FINISHED" ||
			got[2] != strings.Replace(lines[len(lines)-1], `"c1"`, `"c1b"`, 1) {
			t.Fatalf("reload while waiting:\n%s", r.body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("reload while waiting: the stream did not end with the pending interrupt")
	}

	resume := `{"threadId":"S-agui","runId":"c2","messages":[{"id":"u1","role":"user","content":"hi"}],"resume":[{"interruptId":"ap1","status":"resolved","payload":{"approved":true}}]}`
	second := b.async(t, "POST", "/v1/sessions/S-agui/agui", resume)
	b.waitSequence(t, sid, 8)
	b.appendAll(t, sid,
		runtimeEvent(sid, run, 7, "tool", `{"toolCallId":"t1","toolName":"shell","status":"completed","output":{"files":2}}`),
		runtimeEvent(sid, run, 8, "status", `{"status":"completed","completedAt":"2026-03-01T12:00:01Z","durationMs":1000}`))
	resp = <-second
	lines = dataLines(resp.body)
	want2 := "RUN_STARTED MESSAGES_SNAPSHOT CUSTOM TOOL_CALL_RESULT RUN_FINISHED"
	if got := strings.Join(types(resp.body), " "); got != want2 {
		t.Fatalf("resumed run: %s\nwant %s\n%s", got, want2, resp.body)
	}
	if lines[3] != `{"type":"TOOL_CALL_RESULT","messageId":"result-t1","toolCallId":"t1","content":"{\"files\":2}","role":"tool"}` {
		t.Fatalf("tool result: %s", lines[3])
	}
	msgs := b.do(t, "GET", "/v1/sessions/S-agui/agui/messages", "", "")
	wantMsgs := `{"messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"ok"},{"id":"t1","role":"assistant","toolCalls":[{"id":"t1","type":"function","function":{"name":"shell","arguments":"{\"cmd\":\"ls\"}"}}]},{"id":"result-t1","role":"tool","content":"{\"files\":2}","toolCallId":"t1"}]}` + "\n"
	if msgs.body != wantMsgs {
		t.Fatalf("messages:\n%s\nwant\n%s", msgs.body, wantMsgs)
	}
	// Nothing new and no active run: the run is over at once, after the snapshot.
	if r := b.do(t, "POST", "/v1/sessions/S-agui/agui", "application/json", strings.Replace(in, `"c1"`, `"c3"`, 1)); strings.Join(types(r.body), " ") != "RUN_STARTED MESSAGES_SNAPSHOT RUN_FINISHED" {
		t.Fatalf("idle thread: %s", r.body)
	}
}

func TestBridgeRefusals(t *testing.T) {
	b := setup(t, server.Options{})
	if r := b.do(t, "POST", "/v1/sessions", "application/json", fmt.Sprintf(bridgeCreate, "S-r")); r.status != http.StatusCreated {
		t.Fatal(r.body)
	}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code, says               string
	}{
		{"chat id is not the session", "POST", "/v1/sessions/S-r/chat", `{"id":"other","messages":[{"id":"m","role":"user","parts":["x"]}],"trigger":"submit-message"}`, 422, "CONTRACT_VIOLATION", "chat request"},
		{"unknown member", "POST", "/v1/sessions/S-r/chat", `{"id":"S-r","messages":[],"trigger":"submit-message","model":"x"}`, 422, "CONTRACT_VIOLATION", "model"},
		{"no messages", "POST", "/v1/sessions/S-r/chat", `{"id":"S-r","messages":[],"trigger":"submit-message"}`, 422, "CONTRACT_VIOLATION", "chat request"},
		{"regenerate", "POST", "/v1/sessions/S-r/chat", `{"id":"S-r","messages":[{"id":"m","role":"user","parts":["x"]}],"trigger":"regenerate-message"}`, 422, "COMMAND_NOT_SUPPORTED", "chat request"},
		{"assistant without approvals", "POST", "/v1/sessions/S-r/chat", `{"id":"S-r","messages":[{"id":"m","role":"assistant","parts":[]}],"trigger":"submit-message"}`, 422, "CONTRACT_VIOLATION", "chat request"},
		{"approval never requested", "POST", "/v1/sessions/S-r/chat", `{"id":"S-r","messages":[{"id":"m","role":"assistant","parts":[{"type":"dynamic-tool","state":"approval-responded","approval":{"id":"nope","approved":true}}]}],"trigger":"submit-message"}`, 404, "APPROVAL_NOT_FOUND", "never requested"},
		{"unknown session", "POST", "/v1/sessions/S-none/chat", `{"id":"S-none","messages":[{"id":"m","role":"user","parts":["x"]}],"trigger":"submit-message"}`, 404, "SESSION_NOT_FOUND", "create it"},
		{"resume of another chat", "GET", "/v1/sessions/S-r/chat/other/stream", "", 404, "NOT_FOUND", "reconnect to /v1/sessions/S-r/chat/S-r/stream"},
		{"thread is not the session", "POST", "/v1/sessions/S-r/agui", `{"threadId":"x","runId":"r","messages":[]}`, 422, "CONTRACT_VIOLATION", "RunAgentInput"},
		{"bad resume status", "POST", "/v1/sessions/S-r/agui", `{"threadId":"S-r","runId":"r","messages":[],"resume":[{"interruptId":"a","status":"maybe"}]}`, 422, "CONTRACT_VIOLATION", "RunAgentInput"},
		{"content neither text nor parts", "POST", "/v1/sessions/S-r/agui", `{"threadId":"S-r","runId":"r","messages":[{"id":"u","role":"user","content":7}]}`, 422, "CONTRACT_VIOLATION", "/messages/0/content"},
		{"unknown input member", "POST", "/v1/sessions/S-r/agui", `{"threadId":"S-r","runId":"r","messages":[],"extra":1}`, 422, "CONTRACT_VIOLATION", "extra"},
		{"history of an unknown session", "GET", "/v1/sessions/S-none/chat", "", 404, "SESSION_NOT_FOUND", "create it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do(t, tc.method, tc.path, "application/json", tc.body)
			if r.status != tc.status {
				t.Fatalf("%d %s", r.status, r.body)
			}
			e := errorBody(t, r.body)
			if string(e.Code) != tc.code || !strings.Contains(r.body, tc.says) {
				t.Fatalf("%s: %s", e.Code, r.body)
			}
		})
	}
	// A new run while one is active is refused, and nothing is appended.
	b.appendAll(t, "S-r", runtimeEvent("S-r", "run-x", 1, "status", `{"status":"queued"}`))
	last := b.lastSequence(t, "S-r")
	r := b.do(t, "POST", "/v1/sessions/S-r/chat", "application/json", `{"id":"S-r","messages":[{"id":"m2","role":"user","parts":["x"]}],"trigger":"submit-message"}`)
	if r.status != http.StatusConflict || errorBody(t, r.body).Code != "INVALID_SESSION_STATE" || b.lastSequence(t, "S-r") != last {
		t.Fatalf("chat with an active run: %d %s", r.status, r.body)
	}
}

// TestAGUIJoinAsTheRunEnds: a tab that joins a run (nothing new to send) finds it active, and
// the run's last status lands before the tab reads where the log ends: the stream sends the
// run's end at once (here its failure, with the error's message) instead of waiting for
// events the run will never have.
func TestAGUIJoinAsTheRunEnds(t *testing.T) {
	b := setup(t, server.Options{})
	const sid, run = "S-join", "run-u1"
	if r := b.do(t, "POST", "/v1/sessions", "application/json", fmt.Sprintf(bridgeCreate, sid)); r.status != http.StatusCreated {
		t.Fatal(r.body)
	}
	first := b.async(t, "POST", "/v1/sessions/S-join/agui", `{"threadId":"S-join","runId":"c1","messages":[{"id":"u1","role":"user","content":"hi"}]}`)
	b.waitSequence(t, sid, 1)
	b.appendAll(t, sid,
		runtimeEvent(sid, run, 1, "status", `{"status":"running","startedAt":"2026-03-01T12:00:00Z"}`),
		runtimeEvent(sid, run, 2, "error", `{"code":"TOOL_CRASHED","message":"the tool crashed","retryable":false}`),
		runtimeEvent(sid, run, 3, "status", `{"status":"failed","failedAt":"2026-03-01T12:00:01Z","durationMs":1000}`))
	<-first
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { b.srv.JoinRunAt(w, r, sid, run, 4) }))
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL, nil)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("the joined stream did not end: %v (got %q)", err, body)
	}
	lines := dataLines(string(body))
	if len(lines) != 3 || !strings.HasPrefix(lines[0], `{"type":"RUN_STARTED"`) || !strings.HasPrefix(lines[1], `{"type":"MESSAGES_SNAPSHOT"`) ||
		!strings.HasPrefix(lines[2], `{"type":"RUN_ERROR","message":"the tool crashed"`) {
		t.Fatalf("joined as the run ended:\n%s", body)
	}
}
