package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
)

// userTurn is a batch of a person's message mid and the run it queues, as a JSON array.
func userTurn(sid, mid, runID string) string {
	return fmt.Sprintf(`[{"contract":"AgentSessionEvent","eventId":"ev-%[2]s","sessionId":%[1]q,"sequence":0,"idempotencyKey":"k-%[2]s","occurredAt":"2026-03-01T12:00:00Z","eventType":"message","payload":{"messageId":%[2]q,"role":"user","operation":"append","parts":["next"]}},`+
		`{"contract":"AgentSessionEvent","eventId":"ev-q-%[3]s","sessionId":%[1]q,"sequence":0,"idempotencyKey":"k-q-%[3]s","occurredAt":"2026-03-01T12:00:00Z","runId":%[3]q,"sourceMessageId":%[2]q,"eventType":"status","payload":{"status":"queued"}}]`, sid, mid, runID)
}

// appendAnswer decodes an append's answer.
func appendAnswer(t *testing.T, resp response) api.AppendResponse {
	t.Helper()
	var out api.AppendResponse
	if err := json.Unmarshal([]byte(resp.body), &out); err != nil {
		t.Fatalf("append answer %d %s: %v", resp.status, resp.body, err)
	}
	return out
}

// runStatuses is "id:status" of every run of the session, in creation order.
func (b *bundle) runStatuses(t *testing.T, sid string) string {
	t.Helper()
	var out []string
	for _, r := range b.runs(t, sid) {
		out = append(out, r.RunID+":"+r.Status)
	}
	return strings.Join(out, " ")
}

// TestMultitaskRejectByDefault: a run queued while another is active is refused, saying how to
// enqueue it; nothing is written.
func TestMultitaskRejectByDefault(t *testing.T) {
	b := setup(t, server.Options{})
	r := b.queueRun(t, "S-1")
	last := r.last()
	resp := b.do(t, "POST", "/v1/sessions/S-1/events", "", userTurn("S-1", "m2", "r2"))
	e := errorBody(t, resp.body)
	if resp.status != http.StatusConflict || e.Code != contract.CodeInvalidState || !strings.Contains(e.Message, "?multitask=enqueue") {
		t.Fatalf("a second run while r1 is queued: %d %s", resp.status, resp.body)
	}
	if got := r.last(); got != last {
		t.Errorf("the refused batch wrote: the log ends at %d, not %d", got, last)
	}
	if resp := b.do(t, "POST", "/v1/sessions/S-1/events?multitask=later", "", userTurn("S-1", "m2", "r2")); resp.status != http.StatusBadRequest || !strings.Contains(resp.body, "reject, enqueue or interrupt") {
		t.Errorf("?multitask=later: %d %s", resp.status, resp.body)
	}
}

// TestMultitaskEnqueue: the new run waits behind the running one, the session's current run
// stays the running one, and a worker gets the new run once the first has ended.
func TestMultitaskEnqueue(t *testing.T) {
	b := setup(t, server.Options{})
	b.queueRun(t, "S-1")
	c := b.claim(t, `{}`, http.StatusOK)
	lease := c.Lease.Header
	if resp := b.doLease(t, "POST", "/v1/sessions/S-1/events", lease, statusEvent("S-1", "s1", "r1", "running")); resp.status != http.StatusCreated {
		t.Fatalf("running: %d %s", resp.status, resp.body)
	}
	resp := b.do(t, "POST", "/v1/sessions/S-1/events?multitask=enqueue", "", userTurn("S-1", "m2", "r2"))
	if a := appendAnswer(t, resp); resp.status != http.StatusCreated || len(a.Results) != 2 || a.Interrupted != nil {
		t.Fatalf("enqueue: %d %s", resp.status, resp.body)
	}
	if got := b.runStatuses(t, "S-1"); got != "r1:running r2:queued" {
		t.Errorf("runs = %s", got)
	}
	s, err := b.cl.GetSession(t.Context(), "S-1")
	if err != nil || s.CurrentRun.RunID != "r1" {
		t.Fatalf("current run = %+v, %v; want r1, the one working", s.CurrentRun, err)
	}
	b.claim(t, `{}`, http.StatusNoContent) // r2 waits for r1
	// A worker waiting for work is woken by r1's end, which makes r2 claimable.
	got := make(chan string, 1)
	go func() {
		resp := b.do(t, "POST", "/v1/runs/claim", "", `{"wait":"20s"}`)
		got <- fmt.Sprint(resp.status, " ", resp.body)
	}()
	time.Sleep(200 * time.Millisecond)
	completed := `{"contract":"AgentSessionEvent","eventId":"s2","sessionId":"S-1","sequence":0,"idempotencyKey":"s2","occurredAt":"2026-03-01T12:00:05Z","runId":"r1","sourceMessageId":"m1","eventType":"status","payload":{"status":"completed","completedAt":"2026-03-01T12:00:05Z","durationMs":5000}}`
	if resp := b.doLease(t, "POST", "/v1/sessions/S-1/events", lease, completed); resp.status != http.StatusCreated {
		t.Fatalf("completed: %d %s", resp.status, resp.body)
	}
	select {
	case answer := <-got:
		if !strings.HasPrefix(answer, "200 ") || !strings.Contains(answer, `"runId":"r2"`) {
			t.Fatalf("the waiting claim after r1 completed: %s, want r2", answer)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting claim was not woken by r1's end")
	}
}

// TestMultitaskInterrupt: the running run is asked to stop in the same append, before the
// person's message; a retry adds nothing; the new run is claimable once the runtime has
// confirmed the stop.
func TestMultitaskInterrupt(t *testing.T) {
	b := setup(t, server.Options{})
	b.queueRun(t, "S-1")
	c := b.claim(t, `{}`, http.StatusOK)
	lease := c.Lease.Header
	if resp := b.doLease(t, "POST", "/v1/sessions/S-1/events", lease, statusEvent("S-1", "s1", "r1", "running")); resp.status != http.StatusCreated {
		t.Fatalf("running: %d %s", resp.status, resp.body)
	}
	before := b.lastSequence(t, "S-1")
	resp := b.do(t, "POST", "/v1/sessions/S-1/events?multitask=interrupt", "", userTurn("S-1", "m2", "r2"))
	a := appendAnswer(t, resp)
	if resp.status != http.StatusCreated || a.Interrupted == nil || a.Interrupted.RunID != "r1" || len(a.Interrupted.Results) != 1 ||
		a.Interrupted.Results[0].Sequence != before+1 || a.Results[0].Sequence != before+2 || a.LastSequence != before+3 {
		t.Fatalf("interrupt: %d %s", resp.status, resp.body)
	}
	if got := b.runStatuses(t, "S-1"); got != "r1:stopping r2:queued" {
		t.Errorf("runs = %s", got)
	}
	// The same request again: duplicates, no second stop.
	resp = b.do(t, "POST", "/v1/sessions/S-1/events?multitask=interrupt", "", userTurn("S-1", "m2", "r2"))
	if a := appendAnswer(t, resp); resp.status != http.StatusOK || a.Interrupted != nil || a.Results[0].Status != api.Duplicate || b.lastSequence(t, "S-1") != before+3 {
		t.Fatalf("the retried interrupt: %d %s", resp.status, resp.body)
	}
	b.claim(t, `{}`, http.StatusNoContent) // r2 waits for r1 to stop
	stopped := `{"contract":"AgentSessionEvent","eventId":"s2","sessionId":"S-1","sequence":0,"idempotencyKey":"s2","occurredAt":"2026-03-01T12:00:05Z","runId":"r1","sourceMessageId":"m1","eventType":"status","payload":{"status":"stopped","stoppedAt":"2026-03-01T12:00:05Z","durationMs":5000}}`
	if resp := b.doLease(t, "POST", "/v1/sessions/S-1/events", lease, stopped); resp.status != http.StatusCreated {
		t.Fatalf("stopped: %d %s", resp.status, resp.body)
	}
	if c := b.claim(t, `{"wait":"5s"}`, http.StatusOK); c.Run.RunID != "r2" {
		t.Fatalf("claim after r1 stopped = %+v, want r2", c)
	}
}

// TestMultitaskInterruptUnclaimed: a queued run nobody holds is stopped at once (stopping,
// then stopped, by the server), so the new run is claimable right away.
func TestMultitaskInterruptUnclaimed(t *testing.T) {
	b := setup(t, server.Options{})
	b.queueRun(t, "S-1")
	resp := b.do(t, "POST", "/v1/sessions/S-1/events?multitask=interrupt", "", userTurn("S-1", "m2", "r2"))
	if a := appendAnswer(t, resp); resp.status != http.StatusCreated || a.Interrupted == nil || len(a.Interrupted.Results) != 2 {
		t.Fatalf("interrupt: %d %s", resp.status, resp.body)
	}
	if got := b.runStatuses(t, "S-1"); got != "r1:stopped r2:queued" {
		t.Errorf("runs = %s", got)
	}
	if c := b.claim(t, `{}`, http.StatusOK); c.Run.RunID != "r2" {
		t.Fatalf("claim = %+v, want r2", c)
	}
}

// TestMultitaskSessionDefault: PATCH sets the session's strategy, used when an append names
// none; an unknown one is refused naming the field.
func TestMultitaskSessionDefault(t *testing.T) {
	b := setup(t, server.Options{})
	b.queueRun(t, "S-1")
	if resp := b.do(t, "PATCH", "/v1/sessions/S-1", "", `{"multitask":"sometimes","updated_by_gate":"user"}`); resp.status != http.StatusUnprocessableEntity || !strings.Contains(resp.body, `"/multitask"`) {
		t.Fatalf("PATCH multitask sometimes: %d %s", resp.status, resp.body)
	}
	resp := b.do(t, "PATCH", "/v1/sessions/S-1", "", `{"multitask":"enqueue","updated_by_gate":"user"}`)
	var s api.Session
	if err := json.Unmarshal([]byte(resp.body), &s); err != nil || resp.status != http.StatusOK || s.Lifecycle.Multitask != "enqueue" {
		t.Fatalf("PATCH multitask enqueue: %d %s", resp.status, resp.body)
	}
	if resp := b.do(t, "POST", "/v1/sessions/S-1/events", "", userTurn("S-1", "m2", "r2")); resp.status != http.StatusCreated {
		t.Fatalf("append with the session's default enqueue: %d %s", resp.status, resp.body)
	}
	// A request still chooses for itself.
	if resp := b.do(t, "POST", "/v1/sessions/S-1/events?multitask=reject", "", userTurn("S-1", "m3", "r3")); resp.status != http.StatusConflict {
		t.Fatalf("?multitask=reject over the default: %d %s", resp.status, resp.body)
	}
	if got := b.runStatuses(t, "S-1"); got != "r1:queued r2:queued" {
		t.Errorf("runs = %s", got)
	}
}

// TestClientMultitask: the Go client sends an append's strategy (AppendOptions.Multitask, with
// the lease and expected sequence beside it) and the session's default (PatchSession); an
// unknown strategy comes back as the server's error.
func TestClientMultitask(t *testing.T) {
	b := setup(t, server.Options{})
	ctx := context.Background()
	b.queueRun(t, "S-1")
	turn := func(mid, runID string) []contract.Event {
		var evs []contract.Event
		if err := json.Unmarshal([]byte(userTurn("S-1", mid, runID)), &evs); err != nil {
			t.Fatal(err)
		}
		return evs
	}
	if _, err := b.cl.AppendEventsWith(ctx, "S-1", turn("m2", "r2"), client.AppendOptions{}); !isCode(err, contract.CodeInvalidState) {
		t.Fatalf("no strategy while r1 is queued: %v, want INVALID_SESSION_STATE", err)
	}
	if _, err := b.cl.AppendEventsWith(ctx, "S-1", turn("m2", "r2"), client.AppendOptions{Multitask: "later"}); !isCode(err, contract.CodeMalformed) {
		t.Fatalf("multitask later: %v, want MALFORMED", err)
	}
	stale := int64(-1)
	if _, err := b.cl.AppendEventsWith(ctx, "S-1", turn("m2", "r2"), client.AppendOptions{Multitask: contract.MultitaskEnqueue, Expected: &stale}); !isCode(err, contract.CodeSequenceConflict) {
		t.Fatalf("enqueue with a stale expected sequence: %v, want SEQUENCE_CONFLICT", err)
	}
	res, err := b.cl.AppendEventsWith(ctx, "S-1", turn("m2", "r2"), client.AppendOptions{Multitask: contract.MultitaskEnqueue})
	if err != nil || res.Interrupted != nil {
		t.Fatalf("enqueue: %+v, %v", res, err)
	}
	res, err = b.cl.AppendEventsWith(ctx, "S-1", turn("m3", "r3"), client.AppendOptions{Multitask: contract.MultitaskInterrupt})
	if err != nil || res.Interrupted == nil || res.Interrupted.RunID != "r1" {
		t.Fatalf("interrupt: %+v, %v; want r1 interrupted", res, err)
	}
	enqueue := contract.MultitaskEnqueue
	s, err := b.cl.PatchSession(ctx, "S-1", api.PatchSessionRequest{Multitask: &enqueue, UpdatedByGate: "user"})
	if err != nil || s.Lifecycle.Multitask != "enqueue" {
		t.Fatalf("PatchSession multitask: %+v, %v", s, err)
	}
	if _, err := b.cl.AppendEventsWith(ctx, "S-1", turn("m4", "r4"), client.AppendOptions{}); err != nil {
		t.Fatalf("append with the session's default enqueue: %v", err)
	}
	if got := b.runStatuses(t, "S-1"); got != "r1:stopped r2:queued r3:queued r4:queued" {
		t.Errorf("runs = %s", got)
	}
}

// isCode reports whether err is an *api.Error with code.
func isCode(err error, code contract.ErrorCode) bool {
	var ae *api.Error
	return errors.As(err, &ae) && ae.Code == code
}

// TestChatStopsTheCurrentRun: with a run enqueued behind the running one, the AI SDK bridge's
// stop stops the running run (the session's current run), not the newest one.
func TestChatStopsTheCurrentRun(t *testing.T) {
	b := setup(t, server.Options{})
	b.queueRun(t, "S-1")
	if resp := b.do(t, "POST", "/v1/sessions/S-1/events", "", statusEvent("S-1", "s1", "r1", "running")); resp.status != http.StatusCreated {
		t.Fatalf("running: %d %s", resp.status, resp.body)
	}
	if resp := b.do(t, "POST", "/v1/sessions/S-1/events?multitask=enqueue", "", userTurn("S-1", "m2", "r2")); resp.status != http.StatusCreated {
		t.Fatalf("enqueue: %d %s", resp.status, resp.body)
	}
	if resp := b.do(t, "POST", "/v1/sessions/S-1/chat/stop", "", ""); resp.status != http.StatusOK {
		t.Fatalf("chat stop: %d %s", resp.status, resp.body)
	}
	if got := b.runStatuses(t, "S-1"); got != "r1:stopping r2:queued" {
		t.Errorf("runs after the chat's stop = %s, want r1:stopping r2:queued", got)
	}
}
