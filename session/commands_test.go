package session_test

import (
	"context"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
)

// movingLog is the real store, except that every append finds the log moved on, as when a
// runtime appends faster than a command can be judged.
type movingLog struct {
	store.Store
	appends int
}

func (m *movingLog) Append(ctx context.Context, id string, evs []*contract.EncodedEvent, opts store.AppendOptions) ([]store.AppendResult, error) {
	m.appends++
	return nil, &store.SequenceConflictError{SessionID: id, Expected: *opts.ExpectedSequence, Actual: *opts.ExpectedSequence + 1}
}

// TestCommandExecutionFailed: a command that keeps finding the log moved gives up with the
// retryable COMMAND_EXECUTION_FAILED after a bounded number of tries, having changed nothing.
func TestCommandExecutionFailed(t *testing.T) {
	b := setup(t)
	b.append(t, b.event(t, "message", "", `{"messageId":"u1","role":"user","operation":"append","parts":["go"]}`),
		b.event(t, "status", `"runId":"r1","sourceMessageId":"u1"`, `{"status":"running","startedAt":"2026-03-01T12:00:01Z"}`))
	moving := &movingLog{Store: b.st}
	svc := session.New(moving, session.Options{})
	c := &contract.Command{Contract: "AgentSessionCommand", CommandID: "c1", SessionID: b.sid, RunID: "r1",
		IdempotencyKey: "k1", ExpectedSequence: 1, IssuedAt: "2026-03-01T12:05:00Z", CommandType: "stop",
		Payload: &contract.StopCommand{}}
	res, err := svc.Execute(context.Background(), b.sid, c, session.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != "failed" || res.SessionStatus != "running" || res.Error == nil || res.Error.Code != "COMMAND_EXECUTION_FAILED" || !res.Error.Retryable {
		t.Fatalf("got %+v (error %+v), want a retryable COMMAND_EXECUTION_FAILED", res, res.Error)
	}
	if moving.appends < 2 || moving.appends > 20 {
		t.Errorf("tried %d appends; want a few, bounded", moving.appends)
	}
	if last, _ := b.st.LastSequence(context.Background(), b.sid); last != 1 {
		t.Errorf("the log changed: last sequence %d", last)
	}
	data, _ := contract.Marshal(res)
	if err := contract.Validate(contract.KindCommandResult, data, contract.Limits{}); err != nil {
		t.Errorf("result breaks the contract: %v", err)
	}
}
