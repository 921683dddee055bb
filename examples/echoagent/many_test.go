package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/wire"
)

// TestServesManySessions: one agent with 4 slots works the queued runs of 12 sessions it was
// never told about, each to completion, every event under the lease it claimed the run with
// (the event ids name the fencing token).
func TestServesManySessions(t *testing.T) {
	cl := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const sessions = 12
	for i := range sessions {
		id := fmt.Sprintf("S-%02d", i)
		if _, err := cl.CreateSession(ctx, api.CreateSessionRequest{SessionID: id, AgentID: "echoagent", Role: "implementer",
			Snapshot: contract.Snapshot{Mode: "work", ModelID: "echo"}}); err != nil {
			t.Fatal(err)
		}
		msg := contract.Event{Contract: "AgentSessionEvent", EventID: "u1", SessionID: id, IdempotencyKey: "u1", OccurredAt: now(),
			EventType: "message", Payload: &contract.MessagePayload{MessageID: "m1", Role: "user", Operation: "append", Parts: []contract.RawJSON{textPart("hi " + id)}}}
		queued := contract.Event{Contract: "AgentSessionEvent", EventID: "q1", SessionID: id, IdempotencyKey: "q1", RunID: "run-m1", SourceMessageID: "m1",
			OccurredAt: now(), EventType: "status", Payload: &contract.StatusPayload{Status: "queued"}}
		if _, err := cl.AppendEvents(ctx, id, []contract.Event{msg, queued}, nil); err != nil {
			t.Fatal(err)
		}
	}
	agentCtx, stopAgent := context.WithCancel(ctx)
	done := make(chan error, 1)
	agent := &Agent{Client: cl, Filter: wire.ClaimRequest{AgentID: "echoagent", Wait: "1s"}, Concurrency: 4, Tick: time.Millisecond, Chunks: 3,
		SkipApproval: true, OnError: func(err error) { t.Errorf("agent: %v", err) }}
	go func() { done <- agent.Run(agentCtx) }()

	for i := range sessions {
		id := fmt.Sprintf("S-%02d", i)
		for {
			runs, err := cl.Runs(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) == 1 && runs[0].Status == "completed" {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: the run never completed: %+v", id, runs)
			}
			time.Sleep(10 * time.Millisecond)
		}
		page, err := cl.ReadEvents(ctx, id, -1, 100)
		if err != nil {
			t.Fatal(err)
		}
		var reply strings.Builder
		for _, raw := range page.Events {
			var e contract.Event
			if err := e.UnmarshalJSON(raw); err != nil {
				t.Fatal(err)
			}
			if e.RunID != "" && e.EventID != "q1" && !strings.HasPrefix(e.EventID, "echoagent-run-m1-t1-") {
				t.Errorf("%s: event %s of the run is not named for fencing token 1", id, e.EventID)
			}
			if m, ok := e.Payload.(*contract.MessagePayload); ok && m.MessageID == "reply-run-m1" {
				for _, p := range m.Parts {
					s, _ := partText(p)
					reply.WriteString(s)
				}
			}
		}
		if want := "You said: hi " + id + "."; reply.String() != want {
			t.Errorf("%s: reply %q, want %q", id, reply.String(), want)
		}
	}
	stopAgent()
	if err := <-done; err != context.Canceled {
		t.Errorf("agent: %v", err)
	}
}
