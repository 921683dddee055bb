package session_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/sqlite"
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

// bigSession fills the bundle's session with n events: a user message starting a run, then
// assistant messages, tool calls and usage, in batches of 1000.
func bigSession(b *testing.B, bu *bundle, n int) {
	b.Helper()
	ctx := context.Background()
	yes := true
	bu.st.UpdateSession(ctx, bu.sid, func(s *store.Session) error { s.Snapshot.Capabilities.ThreadForking = &yes; return nil })
	bu.append(b, bu.event(b, "message", "", `{"messageId":"u1","role":"user","operation":"append","parts":["go"]}`),
		bu.event(b, "status", `"runId":"r1","sourceMessageId":"u1"`, `{"status":"running","startedAt":"2026-03-01T12:00:01Z"}`))
	for done := 2; done < n; {
		batch := make([]*contract.EncodedEvent, 0, 1000)
		for ; len(batch) < 1000 && done < n; done++ {
			switch done % 3 {
			case 0:
				batch = append(batch, bu.event(b, "message", `"runId":"r1"`, fmt.Sprintf(`{"messageId":"a%d","role":"assistant","operation":"append","parts":["chunk %d of a long streamed answer"]}`, done/30, done)))
			case 1:
				batch = append(batch, bu.event(b, "tool", `"runId":"r1"`, fmt.Sprintf(`{"toolCallId":"t%d","toolName":"shell","status":"completed","input":{"cmd":"ls"},"output":"a\nb"}`, done/300)))
			default:
				batch = append(batch, bu.event(b, "usage", `"runId":"r1"`, `{"inputTokens":10,"outputTokens":2,"totalTokens":12}`))
			}
		}
		bu.append(b, batch...)
	}
}

// BenchmarkFork100k forks a session of 100,000 events from its newest message, side by side
// with copying the same log into a new session (what a fork must not cost).
func BenchmarkFork100k(b *testing.B) {
	const n = 100_000
	bu := setup(b)
	bigSession(b, bu, n)
	ctx := context.Background()
	last, _ := bu.st.LastSequence(ctx, bu.sid)
	lastMsg := fmt.Sprintf("a%d", (n-1)/30)
	runs := 0 // sub-benchmarks run more than once: keep keys and ids unique across runs
	b.Run("fork", func(b *testing.B) {
		runs++
		for i := 0; i < b.N; i++ {
			c := &contract.Command{Contract: "AgentSessionCommand", CommandID: fmt.Sprint("f", i), SessionID: bu.sid,
				IdempotencyKey: fmt.Sprint("fork-", runs, "-", i), ExpectedSequence: last, IssuedAt: "2026-03-01T12:05:00Z", CommandType: "fork",
				Payload: &contract.ForkCommand{SourceThreadID: bu.sid, SourceMessageID: lastMsg, SourceRunID: "r1",
					Inheritance: contract.Inheritance{Messages: "through-source-message", Attachments: "inherit", Summaries: "inherit", ToolResults: "inherit", CodeChanges: "inherit"}}}
			res, err := bu.svc.Execute(ctx, bu.sid, c, session.ExecOptions{})
			if err != nil || res.Outcome != "accepted" {
				b.Fatalf("fork: %v %+v", err, res)
			}
		}
	})
	b.Run("copy", func(b *testing.B) {
		runs++
		for i := 0; i < b.N; i++ {
			id := fmt.Sprintf("S-copy-%d-%d", runs, i)
			sess, _ := bu.st.GetSession(ctx, bu.sid)
			sess.Record.SessionID = id
			if err := bu.st.CreateSession(ctx, sess); err != nil {
				b.Fatal(err)
			}
			for after := int64(-1); ; {
				evs, err := bu.st.ReadEvents(ctx, bu.sid, after, 1000)
				if err != nil {
					b.Fatal(err)
				}
				if len(evs) == 0 {
					break
				}
				batch := make([]*contract.EncodedEvent, len(evs))
				for j, se := range evs {
					raw := strings.Replace(string(se.Data), `"sessionId":"`+bu.sid+`"`, `"sessionId":"`+id+`"`, 1)
					if batch[j], err = contract.CheckEvent([]byte(raw), contract.Limits{}); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := bu.st.Append(ctx, id, batch, store.AppendOptions{}); err != nil {
					b.Fatal(err)
				}
				after = evs[len(evs)-1].Sequence
			}
		}
	})
}

// terminalSession fills the bundle's session with n events: a user message starting a run,
// then terminal output chunks of a long build (stdout and stderr of two terminals), in
// batches of 1000. This is the log that made the old fold quadratic (Output += chunk).
func terminalSession(b *testing.B, bu *bundle, n int) {
	b.Helper()
	bu.append(b, bu.event(b, "message", "", `{"messageId":"u1","role":"user","operation":"append","parts":["build"]}`),
		bu.event(b, "status", `"runId":"r1","sourceMessageId":"u1"`, `{"status":"running","startedAt":"2026-03-01T12:00:01Z"}`))
	for done := 2; done < n; {
		batch := make([]*contract.EncodedEvent, 0, 1000)
		for ; len(batch) < 1000 && done < n; done++ {
			stream := "stdout"
			if done%7 == 0 {
				stream = "stderr"
			}
			batch = append(batch, bu.event(b, "terminal", `"runId":"r1"`,
				fmt.Sprintf(`{"terminalId":"term%d","stream":%q,"chunk":"[%06d] compiling package %d of the build\n"}`, done%2, stream, done, done)))
		}
		bu.append(b, batch...)
	}
}

// terminalSizes are the session sizes of the terminal benchmarks: the 10x step shows that
// the cost is linear (the 100k figure is about 10 times the 10k one, not 100 times).
var terminalSizes = []int{10_000, 100_000}

// terminalBundles builds one session per size of terminalSizes, once per benchmark.
func terminalBundles(b *testing.B) map[int]*bundle {
	b.Helper()
	out := map[int]*bundle{}
	for _, n := range terminalSizes {
		bu := setup(b)
		terminalSession(b, bu, n)
		out[n] = bu
	}
	return out
}

// BenchmarkTerminalTranscript folds a session of terminal chunks to its transcript from the
// store (what GET /v1/sessions/{id}/transcript costs on a cold projection): read every event,
// fold it, copy the transcript out. Target: 100,000 events in at most 1 s.
func BenchmarkTerminalTranscript(b *testing.B) {
	bundles := terminalBundles(b)
	for _, n := range terminalSizes {
		bu := bundles[n]
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				t, err := bu.svc.Rebuild(context.Background(), bu.sid)
				if err != nil {
					b.Fatal(err)
				}
				if t.LastSequence != int64(n-1) {
					b.Fatalf("folded through %d, want %d", t.LastSequence, n-1)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkTerminalFold is the fold alone, over events already in memory (no store): the
// cleanest view of its scaling.
func BenchmarkTerminalFold(b *testing.B) {
	bundles := terminalBundles(b)
	for _, n := range terminalSizes {
		bu := bundles[n]
		var evs []store.StoredEvent
		for len(evs) < n {
			page, err := bu.st.ReadEvents(context.Background(), bu.sid, int64(len(evs))-1, 10_000)
			if err != nil || len(page) == 0 {
				b.Fatalf("read events after %d: %v", len(evs)-1, err)
			}
			evs = append(evs, page...)
		}
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				f := session.NewFold(bu.sid)
				for _, e := range evs {
					if err := f.Apply(e); err != nil {
						b.Fatal(err)
					}
				}
				if t := f.Transcript(); t.LastSequence != int64(n-1) {
					b.Fatalf("folded through %d, want %d", t.LastSequence, n-1)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkTerminalView builds the view model (every event decoded) of a terminal session.
func BenchmarkTerminalView(b *testing.B) {
	bundles := terminalBundles(b)
	for _, n := range terminalSizes {
		bu := bundles[n]
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				vm, err := bu.svc.View(context.Background(), bu.sid)
				if err != nil {
					b.Fatal(err)
				}
				if len(vm.Events) != n {
					b.Fatalf("view has %d events, want %d", len(vm.Events), n)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// unarchive puts an archived session back to paused through the store, so that the next
// benchmark iteration can archive it again (timer stopped by the caller).
func unarchive(b *testing.B, bu *bundle) {
	b.Helper()
	_, _, err := bu.st.UpdateLifecycle(context.Background(), bu.sid, func(cur *store.Session, _ *store.Lifecycle) error {
		cur.Record.Status = "paused"
		cur.Record.ArchivePath = contract.Nullable[string]{}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTerminalArchive archives a session of terminal chunks (SQLite store in a temp
// dir): read and fold the log, encode, write and fsync the file, read it back and verify it,
// mark the session archived. Target: 100,000 events in at most 5 s.
func BenchmarkTerminalArchive(b *testing.B) {
	bundles := terminalBundles(b)
	for _, n := range terminalSizes {
		bu := bundles[n]
		dir := b.TempDir()
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				res, err := bu.svc.Archive(context.Background(), bu.sid, session.ArchiveOptions{Dir: dir})
				if err != nil {
					b.Fatal(err)
				}
				if res.Events != n {
					b.Fatalf("archived %d events, want %d", res.Events, n)
				}
				b.StopTimer()
				unarchive(b, bu)
				b.StartTimer()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkTerminalRestore restores the archive of a session of terminal chunks into an empty
// store (a fresh SQLite store in a temp dir per iteration): read and verify the file, check
// every event against the contract, import the log in one transaction.
func BenchmarkTerminalRestore(b *testing.B) {
	bundles := terminalBundles(b)
	for _, n := range terminalSizes {
		bu := bundles[n]
		dir := b.TempDir()
		res, err := bu.svc.Archive(context.Background(), bu.sid, session.ArchiveOptions{Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				st, err := sqlite.Open(context.Background(), b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				svc := session.New(st, session.Options{})
				b.StartTimer()
				got, err := svc.Restore(context.Background(), dir, session.RestoreRequest{Name: res.Name})
				if err != nil {
					b.Fatal(err)
				}
				if got.Events != n {
					b.Fatalf("restored %d events, want %d", got.Events, n)
				}
				b.StopTimer()
				st.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
