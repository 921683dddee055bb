package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
)

// runtimeSim appends events the way an agent runtime would, with unique keys.
type runtimeSim struct {
	t   testing.TB
	b   *bundle
	sid string
	n   int
}

func (b *bundle) runtime(t testing.TB, sid string, caps string) *runtimeSim {
	t.Helper()
	body := fmt.Sprintf(`{"session_id":%q,"agent_id":"agent-1","role":"implementer","snapshot":{"mode":"work","modelId":"m","capabilities":%s}}`, sid, caps)
	if b.authz != "" {
		body = strings.Replace(body, `"agent_id"`, `"project":"bench","agent_id"`, 1) // as createSession
	}
	if resp := b.do(t, "POST", "/v1/sessions", "", body); resp.status != 201 {
		t.Fatalf("create: %s", resp.body)
	}
	return &runtimeSim{t: t, b: b, sid: sid}
}

const allCaps = `{"resume":true,"summary":true,"approval":true,"steering":true,"threadForking":true,"editAndRerun":true}`

// emit appends one event and returns its eventId; header holds extra envelope fields.
func (r *runtimeSim) emit(eventType, header, payload string) string {
	r.t.Helper()
	r.n++
	id := fmt.Sprintf("rt-%d", r.n)
	if header != "" {
		header = "," + header
	}
	ev := fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":%q,"sessionId":%q,"sequence":0,"idempotencyKey":%q,"occurredAt":"2026-03-01T12:00:%02dZ","eventType":%q%s,"payload":%s}`,
		id, r.sid, id, r.n%60, eventType, header, payload)
	if resp := r.b.do(r.t, "POST", "/v1/sessions/"+r.sid+"/events", "", ev); resp.status != 201 {
		r.t.Fatalf("runtime append %s: %d %s", eventType, resp.status, resp.body)
	}
	return id
}

func (r *runtimeSim) message(mid, role, text string) string {
	return r.emit("message", "", fmt.Sprintf(`{"messageId":%q,"role":%q,"operation":"append","parts":[%q]}`, mid, role, text))
}

// status appends a run status event with the timestamp and duration its status needs.
func (r *runtimeSim) status(runID, src, status string) string {
	ts := map[string]string{"running": "startedAt", "stopping": "stoppingRequestedAt", "stopped": "stoppedAt", "completed": "completedAt", "failed": "failedAt"}
	pl := fmt.Sprintf(`{"status":%q`, status)
	if f := ts[status]; f != "" {
		pl += fmt.Sprintf(`,%q:"2026-03-01T12:01:00Z"`, f)
	}
	if contract.IsTerminal(status) {
		pl += `,"durationMs":1500`
	}
	return r.emit("status", fmt.Sprintf(`"runId":%q,"sourceMessageId":%q`, runID, src), pl+"}")
}

func (r *runtimeSim) last() int64 { return r.b.lastSequence(r.t, r.sid) }

// command sends a command and returns the HTTP status and the decoded result, which must
// satisfy the contract whatever the outcome.
func (b *bundle) command(t testing.TB, sid, cmdType, runID, key string, expected int64, payload, query string) (int, contract.CommandResult) {
	t.Helper()
	run := ""
	if runID != "" {
		run = fmt.Sprintf(`"runId":%q,`, runID)
	}
	body := fmt.Sprintf(`{"contract":"AgentSessionCommand","commandId":"c-%s","sessionId":%q,%s"idempotencyKey":%q,"expectedSequence":%d,"issuedAt":"2026-03-01T12:05:00Z","commandType":%q,"payload":%s}`,
		key, sid, run, key, expected, cmdType, payload)
	resp := b.do(t, "POST", "/v1/sessions/"+sid+"/commands"+query, "", body)
	if err := contract.Validate(contract.KindCommandResult, []byte(resp.body), contract.Limits{}); err != nil {
		t.Fatalf("%s: answer is not a valid command result (%d %s): %v", cmdType, resp.status, resp.body, err)
	}
	var res contract.CommandResult
	json.Unmarshal([]byte(resp.body), &res)
	return resp.status, res
}

func wantRejected(t *testing.T, status int, res contract.CommandResult, code contract.ErrorCode, httpStatus int) {
	t.Helper()
	if res.Outcome != "rejected" || res.Error == nil || res.Error.Code != code || status != httpStatus || len(res.ResultEventIDs) != 0 {
		t.Fatalf("got %d %+v (error %+v), want rejected %s with HTTP %d", status, res, res.Error, code, httpStatus)
	}
	if res.Error.Message == "" {
		t.Error("rejection without a message")
	}
}

func TestCommandStop(t *testing.T) {
	b := setup(t, server.Options{})
	r := b.runtime(t, "S-stop", allCaps)
	r.message("m1", "user", "do it")
	r.status("r1", "m1", "running")
	r.message("m2", "assistant", "working")

	// A stale expectedSequence does not matter for stop (target-run rule).
	status, res := b.command(t, "S-stop", "stop", "r1", "k-stop", 0, `{"reason":"enough"}`, "")
	if status != 200 || res.Outcome != "accepted" || res.Termination != "requested" || res.SessionStatus != "stopping" ||
		len(res.ResultEventIDs) != 1 || res.AcceptedSequence == nil || *res.AcceptedSequence != r.last() || res.RunID != "r1" {
		t.Fatalf("stop: %d %+v", status, res)
	}
	run, _ := b.st.Run(context.Background(), "S-stop", "r1")
	if run.Status != "stopping" || run.StoppingRequestedAt == "" {
		t.Fatalf("run after stop: %+v", run)
	}
	// The same command again: the first result, as a duplicate, and nothing appended.
	before := r.last()
	status, dup := b.command(t, "S-stop", "stop", "r1", "k-stop", 0, `{"reason":"enough"}`, "")
	if status != 200 || dup.Outcome != "duplicate" || fmt.Sprint(dup.ResultEventIDs) != fmt.Sprint(res.ResultEventIDs) || r.last() != before {
		t.Fatalf("duplicate stop: %+v", dup)
	}
	// A new stop while stopping is refused.
	status, res = b.command(t, "S-stop", "stop", "r1", "k-stop-2", 0, `{}`, "")
	wantRejected(t, status, res, "INVALID_SESSION_STATE", 409)

	// ?wait: the runtime confirms in time.
	go func() {
		time.Sleep(50 * time.Millisecond)
		r.status("r1", "m1", "stopped")
	}()
	status, res = b.command(t, "S-stop", "stop", "r1", "k-stop", 0, `{"reason":"enough"}`, "?wait=5s")
	if status != 200 || res.Termination != "confirmed" || res.SessionStatus != "stopped" {
		t.Fatalf("stop with wait: %d %+v", status, res)
	}
	// Stopping a finished run.
	status, res = b.command(t, "S-stop", "stop", "r1", "k-stop-3", 0, `{}`, "")
	wantRejected(t, status, res, "RUN_ALREADY_FINISHED", 409)
}

func TestCommandStopTimeout(t *testing.T) {
	b := setup(t, server.Options{})
	r := b.runtime(t, "S-st", allCaps)
	r.message("m1", "user", "go")
	r.status("r1", "m1", "queued")
	r.status("r1", "m1", "running") // a queued run nobody holds is stopped at once: no wait
	status, res := b.command(t, "S-st", "stop", "r1", "k1", -1, `{}`, "?wait=100ms")
	if status != http.StatusAccepted || res.Outcome != "failed" || res.Error == nil || res.Error.Code != "STOP_TIMEOUT" ||
		!res.Error.Retryable || res.Termination != "requested" || res.SessionStatus != "stopping" {
		t.Fatalf("stop timeout: %d %+v", status, res)
	}
	body := `{"contract":"AgentSessionCommand","commandId":"c","sessionId":"S-st","runId":"r1","idempotencyKey":"k1","expectedSequence":-1,"issuedAt":"2026-03-01T12:05:00Z","commandType":"stop","payload":{}}`
	if resp := b.do(t, "POST", "/v1/sessions/S-st/commands?wait=1h", "", body); resp.status != 400 || errorBody(t, resp.body).Code != "MALFORMED_REQUEST" {
		t.Fatalf("wait over the limit: %d %s", resp.status, resp.body)
	}
}

func TestCommandApproval(t *testing.T) {
	b := setup(t, server.Options{})
	r := b.runtime(t, "S-ap", allCaps)
	r.message("m1", "user", "clean up")
	r.status("r1", "m1", "running")
	r.emit("tool", `"runId":"r1"`, `{"toolCallId":"tc1","toolName":"shell","status":"pending","input":{"cmd":"rm -rf build"}}`)
	r.emit("approval", `"runId":"r1"`, `{"approvalId":"a1","toolCallId":"tc1","status":"requested","title":"Run rm?"}`)

	// Not waiting for approval yet.
	status, res := b.command(t, "S-ap", "approval", "r1", "k0", r.last(), `{"approvalId":"a1","decision":"approved"}`, "")
	wantRejected(t, status, res, "INVALID_SESSION_STATE", 409)
	r.status("r1", "m1", "waiting_approval")
	status, res = b.command(t, "S-ap", "approval", "r1", "k0b", r.last(), `{"approvalId":"nope","decision":"approved"}`, "")
	wantRejected(t, status, res, "APPROVAL_NOT_FOUND", 404)
	status, res = b.command(t, "S-ap", "approval", "r1", "k0c", r.last()-1, `{"approvalId":"a1","decision":"approved"}`, "")
	wantRejected(t, status, res, "SEQUENCE_CONFLICT", 409)
	if !strings.Contains(res.Error.Message, fmt.Sprintf("log ends at %d", r.last())) {
		t.Errorf("sequence conflict does not give the current last sequence: %s", res.Error.Message)
	}

	// Two clients race the same approval: exactly one is accepted.
	expected := r.last()
	var wg sync.WaitGroup
	results := make([]contract.CommandResult, 2)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, results[i] = b.command(t, "S-ap", "approval", "r1", fmt.Sprintf("race-%d", i), expected, `{"approvalId":"a1","decision":"approved"}`, "")
		}(i)
	}
	wg.Wait()
	outcomes := map[string]int{}
	for _, res := range results {
		key := res.Outcome
		if res.Error != nil {
			key += "/" + string(res.Error.Code)
		}
		outcomes[key]++
	}
	if outcomes["accepted"] != 1 || outcomes["rejected/APPROVAL_ALREADY_RESOLVED"] != 1 {
		t.Fatalf("racing approvals: %v", outcomes)
	}
	tr, err := b.srv.Service().Transcript(context.Background(), "S-ap")
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Approvals) != 1 || tr.Approvals[0].Status != "approved" || tr.Approvals[0].ToolCallID != "tc1" || tr.Approvals[0].Title != "Run rm?" {
		t.Errorf("approval after the command: %+v", tr.Approvals)
	}
	if run, _ := b.st.Run(context.Background(), "S-ap", "r1"); run.Status != "running" {
		t.Errorf("run after approval: %s", run.Status)
	}
}

func TestCommandSteer(t *testing.T) {
	b := setup(t, server.Options{})
	r := b.runtime(t, "S-sr", allCaps)
	r.message("m1", "user", "write tests")
	r.status("r1", "m1", "running")
	status, res := b.command(t, "S-sr", "steer", "r1", "k1", r.last(), `{"targetRunId":"r1","text":"focus on the parser"}`, "")
	if status != 200 || res.Outcome != "accepted" || len(res.ResultEventIDs) != 1 {
		t.Fatalf("steer: %d %+v", status, res)
	}
	page, _ := b.cl.ReadEvents(context.Background(), "S-sr", r.last()-1, 1)
	if !strings.Contains(string(page.Events[0]), `"status":"accepted"`) || !strings.Contains(string(page.Events[0]), `"commandId":"c-k1"`) {
		t.Errorf("steer event: %s", page.Events[0])
	}
	r.status("r1", "m1", "waiting_approval")
	status, res = b.command(t, "S-sr", "steer", "r1", "k2", r.last(), `{"targetRunId":"r1","text":"x"}`, "")
	wantRejected(t, status, res, "INVALID_SESSION_STATE", 409)

	// Without the capability.
	r2 := b.runtime(t, "S-nocap", `{}`)
	r2.message("m1", "user", "hi")
	r2.status("r1", "m1", "running")
	status, res = b.command(t, "S-nocap", "steer", "r1", "k1", r2.last(), `{"targetRunId":"r1","text":"x"}`, "")
	wantRejected(t, status, res, "CAPABILITY_UNAVAILABLE", 422)
}

func TestCommandResumeAndRetry(t *testing.T) {
	b := setup(t, server.Options{})
	r := b.runtime(t, "S-rr", allCaps)
	r.message("m1", "user", "build it")
	r.status("r1", "m1", "running")
	errID := r.emit("error", `"runId":"r1"`, `{"code":"RATE_LIMIT","message":"slow down","retryable":true}`)
	hardErr := r.emit("error", `"runId":"r1"`, `{"code":"BAD","message":"no","retryable":false}`)
	r.status("r1", "m1", "completed")

	// retry needs a failed run.
	status, res := b.command(t, "S-rr", "retry", "r1", "k1", r.last(), fmt.Sprintf(`{"sourceEventId":%q}`, errID), "")
	wantRejected(t, status, res, "INVALID_SESSION_STATE", 409)

	// resume from a completed run: a new run, queued, same source message.
	status, res = b.command(t, "S-rr", "resume", "r1", "k2", r.last(), `{"resumeEventId":"nope"}`, "")
	wantRejected(t, status, res, "TARGET_EVENT_NOT_FOUND", 404)
	status, res = b.command(t, "S-rr", "resume", "r-unknown", "k3", r.last(), `{}`, "")
	wantRejected(t, status, res, "RUN_NOT_FOUND", 404)
	status, res = b.command(t, "S-rr", "resume", "r1", "k4", r.last(), `{}`, "")
	if status != 200 || res.Outcome != "accepted" || res.SessionStatus != "queued" || res.RunID == "r1" {
		t.Fatalf("resume: %d %+v", status, res)
	}
	newRun, err := b.st.Run(context.Background(), "S-rr", res.RunID)
	if err != nil || newRun.SourceMessageID != "m1" || newRun.Status != "queued" {
		t.Fatalf("new run %+v %v", newRun, err)
	}

	// The new run fails; retry it from a retryable error, not from a non-retryable one.
	r.status(res.RunID, "m1", "running")
	r.status(res.RunID, "m1", "failed")
	status, rej := b.command(t, "S-rr", "retry", res.RunID, "k5", r.last(), fmt.Sprintf(`{"sourceEventId":%q}`, hardErr), "")
	wantRejected(t, status, rej, "TARGET_EVENT_NOT_RETRYABLE", 409)
	status, rej = b.command(t, "S-rr", "retry", res.RunID, "k6", r.last(), `{"sourceEventId":"missing"}`, "")
	wantRejected(t, status, rej, "TARGET_EVENT_NOT_FOUND", 404)
	status, retried := b.command(t, "S-rr", "retry", res.RunID, "k7", r.last(), fmt.Sprintf(`{"sourceEventId":%q}`, errID), "")
	if status != 200 || retried.Outcome != "accepted" || retried.SessionStatus != "queued" {
		t.Fatalf("retry: %d %+v", status, retried)
	}
	// A retry from the failed run's own terminal status works too (after that run fails).
	r.status(retried.RunID, "m1", "running")
	failedID := r.status(retried.RunID, "m1", "failed")
	status, res = b.command(t, "S-rr", "retry", retried.RunID, "k8", r.last(), fmt.Sprintf(`{"sourceEventId":%q}`, failedID), "")
	if status != 200 || res.Outcome != "accepted" {
		t.Fatalf("retry from failed status: %d %+v", status, res)
	}

	// resume without the capability.
	r2 := b.runtime(t, "S-nores", `{}`)
	r2.message("m1", "user", "x")
	r2.status("r1", "m1", "running")
	r2.status("r1", "m1", "completed")
	status, res = b.command(t, "S-nores", "resume", "r1", "k1", r2.last(), `{}`, "")
	wantRejected(t, status, res, "CAPABILITY_UNAVAILABLE", 422)
}

func TestCommandRetrySummary(t *testing.T) {
	b := setup(t, server.Options{})
	r := b.runtime(t, "S-sum", allCaps)
	r.message("m1", "user", "summarise")
	r.status("r1", "m1", "running")
	sumID := r.emit("summary", `"runId":"r1"`, `{"summaryId":"s1","runId":"r1","text":"","highlights":[],"pendingItems":[],"status":"failed"}`)
	msgID := r.message("m2", "assistant", "done")
	r.status("r1", "m1", "completed")

	status, res := b.command(t, "S-sum", "retry-summary", "r1", "k1", r.last(), fmt.Sprintf(`{"sourceEventId":%q,"sourceRunId":"r1"}`, msgID), "")
	wantRejected(t, status, res, "TARGET_EVENT_NOT_RETRYABLE", 409)
	status, res = b.command(t, "S-sum", "retry-summary", "r1", "k2", r.last(), fmt.Sprintf(`{"sourceEventId":%q,"sourceRunId":"r1"}`, sumID), "")
	if status != 200 || res.Outcome != "accepted" || res.SessionStatus != "completed" {
		t.Fatalf("retry-summary: %d %+v", status, res)
	}
	tr, _ := b.srv.Service().Transcript(context.Background(), "S-sum")
	if len(tr.Summaries) != 1 || tr.Summaries[0].Status != "generating" {
		t.Errorf("summary after retry: %+v", tr.Summaries)
	}
}

func TestCommandRejectionsWithoutRuns(t *testing.T) {
	b := setup(t, server.Options{})
	r := b.runtime(t, "S-empty", allCaps)
	tests := []struct {
		cmdType, runID, payload string
		code                    contract.ErrorCode
		status                  int
	}{
		{"stop", "r1", `{}`, "ACTIVE_RUN_NOT_FOUND", 409},
		{"steer", "r1", `{"targetRunId":"r1","text":"x"}`, "ACTIVE_RUN_NOT_FOUND", 409},
		{"fork", "", `{"sourceThreadId":"S-empty","sourceMessageId":"m1","sourceRunId":"r1","inheritance":{"messages":"exclude","attachments":"exclude","summaries":"exclude","toolResults":"exclude","codeChanges":"exclude"}}`, "SOURCE_RUN_NOT_FOUND", 404},
		{"edit-and-rerun", "", `{"sourceThreadId":"S-empty","sourceMessageId":"m1","sourceRunId":"r1","replacementParts":["x"],"inheritance":{"messages":"exclude","attachments":"exclude","summaries":"exclude","toolResults":"exclude","codeChanges":"exclude"}}`, "INVALID_SESSION_STATE", 409},
	}
	for _, tc := range tests {
		t.Run(tc.cmdType, func(t *testing.T) {
			status, res := b.command(t, "S-empty", tc.cmdType, tc.runID, "k-"+tc.cmdType, -1, tc.payload, "")
			wantRejected(t, status, res, tc.code, tc.status)
			if res.SessionStatus != "idle" {
				t.Errorf("sessionStatus %q before any run, want idle", res.SessionStatus)
			}
		})
	}
	r.message("m1", "user", "go")
	r.status("r1", "m1", "running")
	status, res := b.command(t, "S-empty", "stop", "r-other", "k-x", -1, `{}`, "")
	wantRejected(t, status, res, "RUN_NOT_FOUND", 404)

	// Unknown session: a rejected result, 404.
	status, res = b.command(t, "S-ghost", "stop", "r1", "k", -1, `{}`, "")
	wantRejected(t, status, res, "SESSION_NOT_FOUND", 404)

	// Not a command at all, or one for another session: the error envelope.
	if resp := b.do(t, "POST", "/v1/sessions/S-empty/commands", "", `{"contract":"AgentSessionCommand"}`); resp.status != 422 || !strings.Contains(resp.body, `"path":"/commandId"`) {
		t.Errorf("invalid command: %d %s", resp.status, resp.body)
	}
	body := `{"contract":"AgentSessionCommand","commandId":"c","sessionId":"S-other","runId":"r1","idempotencyKey":"k","expectedSequence":-1,"issuedAt":"2026-03-01T12:05:00Z","commandType":"stop","payload":{}}`
	if resp := b.do(t, "POST", "/v1/sessions/S-empty/commands", "", body); resp.status != 422 || !strings.Contains(resp.body, "SESSION_MISMATCH") {
		t.Errorf("mismatched command: %d %s", resp.status, resp.body)
	}
}

// TestCommandRetriedConcurrently sends the same command (same key) from many clients at once:
// it takes effect once.
func TestCommandRetriedConcurrently(t *testing.T) {
	b := setup(t, server.Options{})
	r := b.runtime(t, "S-once", allCaps)
	r.message("m1", "user", "go")
	r.status("r1", "m1", "running")
	before := r.last()
	var wg sync.WaitGroup
	results := make([]contract.CommandResult, 8)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, results[i] = b.command(t, "S-once", "steer", "r1", "same-key", before, `{"targetRunId":"r1","text":"once"}`, "")
		}(i)
	}
	wg.Wait()
	accepted := 0
	for _, res := range results {
		switch res.Outcome {
		case "accepted":
			accepted++
		case "duplicate":
		default:
			t.Errorf("unexpected result %+v", res)
		}
		if fmt.Sprint(res.ResultEventIDs) != fmt.Sprint(results[0].ResultEventIDs) {
			t.Errorf("results name different events: %v vs %v", res.ResultEventIDs, results[0].ResultEventIDs)
		}
	}
	if accepted != 1 || r.last() != before+1 {
		t.Fatalf("%d accepted, log grew by %d; want exactly one effect", accepted, r.last()-before)
	}
}

func TestOneActiveRunPerSession(t *testing.T) {
	b := setup(t, server.Options{})
	r := b.runtime(t, "S-one", allCaps)
	r.message("m1", "user", "go")
	r.status("r1", "m1", "running")
	ev := `{"contract":"AgentSessionEvent","eventId":"x","sessionId":"S-one","sequence":0,"idempotencyKey":"x","occurredAt":"2026-03-01T12:00:00Z","eventType":"status","runId":"r2","sourceMessageId":"m1","payload":{"status":"queued"}}`
	resp := b.do(t, "POST", "/v1/sessions/S-one/events", "", ev)
	if resp.status != 409 || errorBody(t, resp.body).Code != "INVALID_SESSION_STATE" {
		t.Fatalf("second active run: %d %s", resp.status, resp.body)
	}
	r.status("r1", "m1", "completed")
	if resp := b.do(t, "POST", "/v1/sessions/S-one/events", "", ev); resp.status != 201 {
		t.Fatalf("new run after the first finished: %d %s", resp.status, resp.body)
	}
}
