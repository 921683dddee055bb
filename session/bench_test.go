package session_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
)

// BenchmarkCommands measures commands per second on one session: steer commands, each
// accepted (judged, one event appended with fsync, the result stored with fsync), sent one
// after another the way one client would; and repeats of an accepted command (answered from
// the stored result).
func BenchmarkCommands(b *testing.B) {
	yes := true
	for _, mode := range []string{"accepted", "duplicate"} {
		b.Run(mode, func(b *testing.B) {
			bu := setup(b)
			ctx := context.Background()
			bu.st.UpdateSession(ctx, bu.sid, func(s *store.Session) error { s.Snapshot.Capabilities.Steering = &yes; return nil })
			bu.append(b, bu.event(b, "message", "", `{"messageId":"u1","role":"user","operation":"append","parts":["go"]}`),
				bu.event(b, "status", `"runId":"r1","sourceMessageId":"u1"`, `{"status":"running","startedAt":"2026-03-01T12:00:01Z"}`))
			last := int64(1)
			cmd := func(i int) *contract.Command {
				return &contract.Command{Contract: "AgentSessionCommand", CommandID: fmt.Sprint("c", i), SessionID: bu.sid, RunID: "r1",
					IdempotencyKey: fmt.Sprint("k", i), ExpectedSequence: last, IssuedAt: "2026-03-01T12:05:00Z", CommandType: "steer",
					Payload: &contract.SteerCommand{TargetRunID: "r1", Text: "focus"}}
			}
			if mode == "duplicate" {
				if _, err := bu.svc.Execute(ctx, bu.sid, cmd(0), session.ExecOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				n := i
				if mode == "duplicate" {
					n = 0
				}
				res, err := bu.svc.Execute(ctx, bu.sid, cmd(n), session.ExecOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if res.Outcome != mode {
					b.Fatalf("outcome %s: %+v", res.Outcome, res.Error)
				}
				if res.AcceptedSequence != nil {
					last = *res.AcceptedSequence
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commands/s")
		})
	}
}
