package session_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
)

// TestChatDecideAtTheHead: a person's approval answered in a chat is judged at the log's end,
// however far the runtime appended after the client last read; the same command judged
// against the sequence the client saw is a SEQUENCE_CONFLICT. An approval never requested is
// APPROVAL_NOT_FOUND, and a decision already in the log is answered from it.
func TestChatDecideAtTheHead(t *testing.T) {
	ctx := context.Background()
	b := setup(t)
	b.sid = "S-chat"
	on := true
	if err := b.st.CreateSession(ctx, &store.Session{
		Record:   contract.SessionRecord{SchemaVersion: 1, SessionID: b.sid, AgentID: "a", Role: "implementer", Status: "running", StartedAt: "2026-03-01T12:00:00Z"},
		Snapshot: contract.Snapshot{Mode: "work", ModelID: "m", Capabilities: contract.Capabilities{Approval: &on}},
	}); err != nil {
		t.Fatal(err)
	}
	b.append(t, b.event(t, "message", "", `{"messageId":"u1","role":"user","operation":"append","parts":["go"]}`),
		b.event(t, "status", `"runId":"r1","sourceMessageId":"u1"`, `{"status":"running","startedAt":"2026-03-01T12:00:01Z"}`),
		b.event(t, "approval", `"runId":"r1"`, `{"approvalId":"ap1","status":"requested","title":"edit Makefile?"}`),
		b.event(t, "status", `"runId":"r1","sourceMessageId":"u1"`, `{"status":"waiting_approval"}`))
	seen := int64(3) // what the client read; the runtime appends on
	b.append(t, b.event(t, "message", `"runId":"r1"`, `{"messageId":"a1","role":"assistant","operation":"append","parts":["still here"]}`))

	stale := &contract.Command{Contract: "AgentSessionCommand", CommandID: "c1", SessionID: b.sid, RunID: "r1",
		IdempotencyKey: "k-stale", ExpectedSequence: seen, IssuedAt: "2026-03-01T12:05:00Z", CommandType: "approval",
		Payload: &contract.ApprovalCommand{ApprovalID: "ap1", Decision: "approved"}}
	res, err := b.svc.Execute(ctx, b.sid, stale, session.ExecOptions{})
	if err != nil || res.Error == nil || res.Error.Code != contract.CodeSequenceConflict {
		t.Fatalf("judged at the sequence the client saw: %+v, %v; want SEQUENCE_CONFLICT", res.Error, err)
	}

	chat := b.svc.Chat()
	run, cut, err := chat.Decide(ctx, b.sid, []session.ApprovalDecision{{ApprovalID: "ap1", Approved: true, Reason: "fine"}})
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	if run != "r1" || cut != 4 {
		t.Errorf("Decide answered run %q, cut %d; want r1, 4 (just before the decision)", run, cut)
	}
	again, cut2, err := chat.Decide(ctx, b.sid, []session.ApprovalDecision{{ApprovalID: "ap1", Approved: true}})
	if err != nil || again != "r1" || cut2 != cut {
		t.Errorf("the same decision again: %q, %d, %v; want r1, %d from the log", again, cut2, err, cut)
	}
	_, _, err = chat.Decide(ctx, b.sid, []session.ApprovalDecision{{ApprovalID: "nope"}})
	var rej *session.RejectError
	if !errors.As(err, &rej) || rej.Code != contract.CodeApprovalNotFound {
		t.Errorf("an approval never requested: %v; want APPROVAL_NOT_FOUND", err)
	}
}

// TestChatMessageIDReused: a chat message sent again is the same run, another message under
// the same id is an IDEMPOTENCY_CONFLICT that says to give it an id of its own, and doing so
// queues its run.
func TestChatMessageIDReused(t *testing.T) {
	ctx := context.Background()
	b := setup(t)
	chat := b.svc.Chat()
	text := func(s string) []contract.RawJSON {
		return []contract.RawJSON{contract.RawJSON(`{"type":"text","text":"` + s + `"}`)}
	}
	run, from, err := chat.Submit(ctx, b.sid, "m1", text("first"))
	if err != nil || run != session.ChatRunID("m1") || from != 0 {
		t.Fatalf("Submit = %q, %d, %v; want %q, 0", run, from, err, session.ChatRunID("m1"))
	}
	if again, from2, err := chat.Submit(ctx, b.sid, "m1", text("first")); err != nil || again != run || from2 != 0 {
		t.Errorf("the same message again = %q, %d, %v; want its run from the log", again, from2, err)
	}
	b.append(t, b.event(t, "status", `"runId":"run-m1","sourceMessageId":"m1"`, `{"status":"running","startedAt":"2026-03-01T12:00:01Z"}`),
		b.event(t, "status", `"runId":"run-m1","sourceMessageId":"m1"`, `{"status":"completed","completedAt":"2026-03-01T12:00:09Z","durationMs":8000}`))
	_, _, err = chat.Submit(ctx, b.sid, "m1", text("other"))
	var rej *session.RejectError
	if !errors.As(err, &rej) || rej.Code != contract.CodeIdempotencyConflict || !strings.Contains(rej.Message, "give a new message an id of its own") {
		t.Fatalf("another message under the same id: %v; want IDEMPOTENCY_CONFLICT saying to give it an id of its own", err)
	}
	if run, _, err := chat.Submit(ctx, b.sid, "m2", text("other")); err != nil || run != session.ChatRunID("m2") {
		t.Errorf("the message under an id of its own = %q, %v", run, err)
	}
}
