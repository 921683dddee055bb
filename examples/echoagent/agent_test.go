package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/server/servertest"
	"github.com/sessiond/sessiond/wire"
)

// startServer starts a real server on SQLite in a temporary directory, stopped when the test
// ends, and returns a client of it.
func startServer(t *testing.T) *client.Client {
	t.Helper()
	return client.New(servertest.Start(t, server.Options{}), nil)
}

// TestWholeLoop runs the example agent against a real server and drives it the way a person
// would: message and queued run → claim → tool → approval → steer → stop, then resume.
func TestWholeLoop(t *testing.T) {
	cl := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	yes := true
	_, err := cl.CreateSession(ctx, api.CreateSessionRequest{SessionID: "S-loop", AgentID: "echoagent", Role: "implementer",
		Snapshot: contract.Snapshot{Mode: "work", ModelID: "echo", Capabilities: contract.Capabilities{Approval: &yes, Steering: &yes, Resume: &yes}}})
	if err != nil {
		t.Fatal(err)
	}
	agentCtx, stopAgent := context.WithCancel(ctx)
	done := make(chan error, 1)
	agent := &Agent{Client: cl, Filter: wire.ClaimRequest{AgentID: "echoagent", Wait: "1s"}, Tick: 20 * time.Millisecond, Chunks: 1000, Log: t.Logf}
	go func() { done <- agent.Run(agentCtx) }()

	// A person asks for something, and queues a run for it.
	user := contract.Event{Contract: "AgentSessionEvent", EventID: "u1", SessionID: "S-loop", IdempotencyKey: "u1",
		OccurredAt: now(), EventType: "message", Payload: &contract.MessagePayload{MessageID: "m1", Role: "user", Operation: "append", Parts: []contract.RawJSON{textPart("say hello")}}}
	queued := contract.Event{Contract: "AgentSessionEvent", EventID: "q1", SessionID: "S-loop", IdempotencyKey: "q1", RunID: "run-m1", SourceMessageID: "m1",
		OccurredAt: now(), EventType: "status", Payload: &contract.StatusPayload{Status: "queued"}}
	if _, err := cl.AppendEvents(ctx, "S-loop", []contract.Event{user, queued}, nil); err != nil {
		t.Fatal(err)
	}
	waitRun := func(runID, status string) {
		t.Helper()
		for {
			runs, err := cl.Runs(ctx, "S-loop")
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range runs {
				if r.RunID == runID && r.Status == status {
					return
				}
			}
			if ctx.Err() != nil {
				t.Fatalf("run %s never became %s: %+v", runID, status, runs)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitRun("run-m1", "waiting_approval")

	send := func(cmdType string, payload contract.CommandPayload, wait time.Duration) *contract.CommandResult {
		t.Helper()
		// The agent keeps appending, so a match-current command may find the log moved:
		// read the head again and resend with the same key (a rejection changes nothing).
		for attempt := 0; ; attempt++ {
			s, err := cl.GetSession(ctx, "S-loop")
			if err != nil {
				t.Fatal(err)
			}
			c := &contract.Command{Contract: "AgentSessionCommand", CommandID: "c-" + cmdType, SessionID: "S-loop", RunID: "run-m1",
				IdempotencyKey: "k-" + cmdType, ExpectedSequence: s.LastSequence, IssuedAt: now(), CommandType: cmdType, Payload: payload}
			res, err := cl.Command(ctx, c, wait)
			if err != nil {
				t.Fatal(err)
			}
			if res.Error != nil && res.Error.Code == "SEQUENCE_CONFLICT" && attempt < 50 {
				continue
			}
			if res.Outcome != "accepted" {
				t.Fatalf("%s: %+v %+v", cmdType, res, res.Error)
			}
			return res
		}
	}
	send("approval", &contract.ApprovalCommand{ApprovalID: "approval-run-m1", Decision: "approved"}, 0)
	waitRun("run-m1", "running")

	steer := send("steer", &contract.SteerCommand{TargetRunID: "run-m1", Text: "be brief"}, 0)
	// The agent applies the steer.
	for {
		tr, err := cl.Transcript(ctx, "S-loop")
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Steers) == 1 && tr.Steers[0].Status == "applied" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("steer %v never applied: %+v", steer.ResultEventIDs, tr.Steers)
		}
		time.Sleep(10 * time.Millisecond)
	}

	res := send("stop", &contract.StopCommand{Reason: "enough"}, 10*time.Second)
	if res.Termination != "confirmed" || res.SessionStatus != "stopped" {
		t.Fatalf("stop with wait: %+v", res)
	}
	tr, err := cl.Transcript(ctx, "S-loop")
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Tools) != 1 || tr.Tools[0].Status != "completed" || len(tr.Approvals) != 1 || tr.Approvals[0].Status != "approved" ||
		tr.Terminals[0].Output != "hello\n" || len(tr.Messages) != 3 || !strings.Contains(fmt.Sprintf("%s", tr.Messages[2].Parts), "be brief") {
		t.Errorf("transcript after the loop: %+v", tr)
	}
	var reply []string
	for _, part := range tr.Messages[1].Parts {
		text, _ := partText(part)
		reply = append(reply, text)
	}
	if got := strings.Join(reply, ""); got != "You said: say hello." {
		t.Errorf("the reply to the user's text part is %q, want %q", got, "You said: say hello.")
	}

	// Resume: a new run, which the agent picks up and works on.
	res = send("resume", &contract.ResumeCommand{}, 0)
	waitRun(res.RunID, "waiting_approval")

	stopAgent()
	if err := <-done; err != context.Canceled {
		t.Errorf("agent: %v", err)
	}
}
