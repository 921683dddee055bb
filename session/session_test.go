package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/sqlite"
)

type bundle struct {
	st  *sqlite.Store
	svc *session.Service
	sid string
	n   int
}

func setup(t testing.TB) *bundle {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b := &bundle{st: st, svc: session.New(st, session.Options{}), sid: "S-t"}
	sess := &store.Session{
		Record:   contract.SessionRecord{SchemaVersion: 1, SessionID: b.sid, AgentID: "a", Role: "implementer", Status: "running", StartedAt: "2026-03-01T12:00:00Z"},
		Snapshot: contract.Snapshot{Mode: "work", ModelID: "m"},
	}
	if err := st.CreateSession(context.Background(), sess); err != nil {
		t.Fatal(err)
	}
	return b
}

// event builds one valid event of the session.
func (b *bundle) event(t testing.TB, eventType, header, payload string) *contract.EncodedEvent {
	t.Helper()
	b.n++
	if header != "" {
		header = "," + header
	}
	raw := fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"e%d","sessionId":%q,"sequence":0,"idempotencyKey":"k%d","occurredAt":"2026-03-01T12:00:00Z","eventType":%q%s,"payload":%s}`,
		b.n, b.sid, b.n, eventType, header, payload)
	ev, err := contract.CheckEvent([]byte(raw), contract.Limits{})
	if err != nil {
		t.Fatalf("test event %s: %v", raw, err)
	}
	return ev
}

func (b *bundle) append(t testing.TB, evs ...*contract.EncodedEvent) {
	t.Helper()
	if _, err := b.st.Append(context.Background(), b.sid, evs, store.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
}

// story is a session log that exercises every part of the transcript.
func (b *bundle) story(t *testing.T) []*contract.EncodedEvent {
	return []*contract.EncodedEvent{
		b.event(t, "message", "", `{"messageId":"u1","role":"user","operation":"append","parts":["fix the build"]}`),
		b.event(t, "status", `"runId":"r1","sourceMessageId":"u1"`, `{"status":"running","startedAt":"2026-03-01T12:00:01Z"}`),
		b.event(t, "message", `"runId":"r1"`, `{"messageId":"a1","role":"assistant","operation":"append","parts":["Look"],"status":"streaming"}`),
		b.event(t, "reasoning", `"runId":"r1"`, `{"reasoningId":"th1","text":"The build ","status":"streaming"}`),
		b.event(t, "reasoning", `"runId":"r1"`, `{"reasoningId":"th1","text":"fails.","status":"completed"}`),
		b.event(t, "message", `"runId":"r1"`, `{"messageId":"a1","role":"assistant","operation":"append","parts":["ing."]}`),
		b.event(t, "plan", `"runId":"r1"`, `{"planId":"p1","status":"running","steps":[{"id":"s1","title":"read","status":"completed"},{"id":"s2","title":"fix","status":"running"}]}`),
		b.event(t, "task", `"runId":"r1"`, `{"taskId":"t1","title":"read logs","status":"running"}`),
		b.event(t, "tool", `"runId":"r1"`, `{"toolCallId":"tc1","toolName":"shell","status":"running","input":{"cmd":"make"},"startedAt":"2026-03-01T12:00:02Z"}`),
		b.event(t, "terminal", `"runId":"r1"`, `{"terminalId":"term1","stream":"stdout","chunk":"building...\n"}`),
		b.event(t, "terminal", `"runId":"r1"`, `{"terminalId":"term1","stream":"stderr","chunk":"error: x\n"}`),
		b.event(t, "terminal", `"runId":"r1"`, `{"terminalId":"term1","stream":"status","chunk":"","exitCode":2}`),
		b.event(t, "tool", `"runId":"r1"`, `{"toolCallId":"tc1","toolName":"shell","status":"failed","error":"exit 2"}`),
		b.event(t, "approval", `"runId":"r1"`, `{"approvalId":"ap1","toolCallId":"tc2","status":"requested","title":"edit Makefile?"}`),
		b.event(t, "approval", `"runId":"r1"`, `{"approvalId":"ap0","status":"requested","title":"old"}`),
		b.event(t, "approval", `"runId":"r1"`, `{"approvalId":"ap1","status":"approved","title":"edit Makefile?"}`),
		b.event(t, "diff", `"runId":"r1"`, `{"path":"Makefile","status":"modified","patch":"-a\n+b"}`),
		b.event(t, "diff", `"runId":"r1"`, `{"path":"Makefile","status":"modified","patch":"-a\n+c"}`),
		b.event(t, "artifact", `"runId":"r1"`, `{"artifactId":"art1","name":"log.txt","kind":"file","status":"pending"}`),
		b.event(t, "artifact", `"runId":"r1"`, `{"artifactId":"art1","name":"log.txt","kind":"file","status":"ready","url":"https://example.com/log.txt"}`),
		b.event(t, "test-result", `"runId":"r1"`, `{"testId":"tt1","name":"TestX","status":"running"}`),
		b.event(t, "test-result", `"runId":"r1"`, `{"testId":"tt1","name":"TestX","status":"passed","durationMs":12.5}`),
		b.event(t, "usage", `"runId":"r1"`, `{"inputTokens":100,"outputTokens":20,"totalTokens":120}`),
		b.event(t, "usage", `"runId":"r1"`, `{"inputTokens":50,"outputTokens":5,"totalTokens":55,"contextWindow":200000}`),
		b.event(t, "usage", "", `{"totalTokens":7}`),
		b.event(t, "message", `"runId":"r1"`, `{"messageId":"a1","role":"assistant","operation":"replace","parts":["Fixed."],"status":"completed"}`),
		b.event(t, "error", `"runId":"r1"`, `{"code":"WARN","message":"flaky","retryable":true}`),
		b.event(t, "summary", `"runId":"r1"`, `{"summaryId":"sum1","runId":"r1","text":"fixed","highlights":["Makefile"],"pendingItems":[],"status":"completed"}`),
		b.event(t, "resume", "", `{"resumable":true}`),
		b.event(t, "status", `"runId":"r1","sourceMessageId":"u1"`, `{"status":"completed","completedAt":"2026-03-01T12:00:09Z","durationMs":8000}`),
	}
}

func TestTranscriptFoldsTheLog(t *testing.T) {
	b := setup(t)
	b.append(t, b.story(t)...)
	tr, err := b.svc.Transcript(context.Background(), b.sid)
	if err != nil {
		t.Fatal(err)
	}
	js := func(v any) string { out, _ := json.Marshal(v); return string(out) }
	checks := []struct{ name, got, want string }{
		{"messages", fmt.Sprint(len(tr.Messages)), "2"},
		{"replace", js(tr.Messages[1].Parts), `["Fixed."]`},
		{"message status", tr.Messages[1].Status, "completed"},
		{"reasoning appended", tr.Reasoning[0].Text, "The build fails."},
		{"plan", tr.Plan.Steps[1].Status, "running"},
		{"tool keeps input", js(tr.Tools[0].Input), `{"cmd":"make"}`},
		{"tool latest", tr.Tools[0].Status, "failed"},
		{"tool keeps startedAt", tr.Tools[0].StartedAt, "2026-03-01T12:00:02Z"},
		{"terminal output", tr.Terminals[0].Output, "building...\nerror: x\n"},
		{"terminal exit", fmt.Sprint(*tr.Terminals[0].ExitCode), "2"},
		{"approvals pending first", tr.Approvals[0].ApprovalID + "," + tr.Approvals[1].ApprovalID, "ap0,ap1"},
		{"approval keeps toolCallId", tr.Approvals[1].ToolCallID, "tc2"},
		{"diff by path", fmt.Sprint(len(tr.Diffs)) + " " + *tr.Diffs[0].Patch, "1 -a\n+c"},
		{"artifact latest", tr.Artifacts[0].Status, "ready"},
		{"test latest", tr.TestResults[0].Status, "passed"},
		{"usage total", fmt.Sprint(tr.Usage.Total.TotalTokens), "182"},
		{"usage by run", fmt.Sprint(tr.Usage.ByRun["r1"].TotalTokens), "175"},
		{"usage latest", fmt.Sprint(*tr.Usage.Latest.TotalTokens), "7"},
		{"errors", fmt.Sprint(len(tr.Errors)), "1"},
		{"summary", tr.Summaries[0].Text, "fixed"},
		{"resumable", fmt.Sprint(tr.Resumable), "true"},
		{"last sequence", fmt.Sprint(tr.LastSequence), "29"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
}

// TestLiveProjectionEqualsRebuild appends the story in random batches, reading the live
// transcript between batches, and checks it always equals a rebuild from scratch.
func TestLiveProjectionEqualsRebuild(t *testing.T) {
	for seed := int64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			b := setup(t)
			evs := b.story(t)
			rng := rand.New(rand.NewSource(seed))
			for len(evs) > 0 {
				n := 1 + rng.Intn(5)
				if n > len(evs) {
					n = len(evs)
				}
				b.append(t, evs[:n]...)
				evs = evs[n:]
				live, err := b.svc.Transcript(context.Background(), b.sid)
				if err != nil {
					t.Fatal(err)
				}
				rebuilt, err := b.svc.Rebuild(context.Background(), b.sid)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(rebuilt, live); diff != "" {
					t.Fatalf("live projection differs from rebuild (-rebuilt +live):\n%s", diff)
				}
			}
		})
	}
}

func TestViewModelSatisfiesContract(t *testing.T) {
	b := setup(t)
	vm, err := b.svc.View(context.Background(), b.sid)
	if err != nil {
		t.Fatal(err)
	}
	if vm.Status != "idle" || vm.LastSequence != -1 || len(vm.Events) != 0 {
		t.Errorf("empty view: %+v", vm)
	}
	b.append(t, b.story(t)...)
	vm, err = b.svc.View(context.Background(), b.sid)
	if err != nil {
		t.Fatal(err)
	}
	data, err := contract.Marshal(vm)
	if err != nil {
		t.Fatal(err)
	}
	if err := contract.Validate(contract.KindView, data, contract.Limits{MaxBytes: 1 << 24}); err != nil {
		t.Fatalf("view breaks the view rules: %v", err)
	}
	if vm.Status != "completed" || !vm.Resumable || vm.LastSequence != 29 || len(vm.Events) != 30 {
		t.Errorf("view: status %s resumable %v last %d events %d", vm.Status, vm.Resumable, vm.LastSequence, len(vm.Events))
	}
}
