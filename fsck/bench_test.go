//go:build unix

package fsck_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/fsck"
	"github.com/sessiond/sessiond/internal/testenv"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/sqlite"
)

// Bench store shape: 20 sessions of 10,000 events (200,000 events), messages of about
// 250 bytes with a run status every 100 events.
const (
	benchSessions = 20
	benchEvents   = 10000
)

func fillBenchStore(dir string) (string, error) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, dir)
	if err != nil {
		return "", err
	}
	defer st.Close()
	for s := range benchSessions {
		id := fmt.Sprintf("S-bench-%02d", s)
		if err := st.CreateSession(ctx, &store.Session{
			Record:   contract.SessionRecord{SchemaVersion: 1, SessionID: id, AgentID: "a", Role: "implementer", Status: "running", StartedAt: "2026-03-01T12:00:00Z"},
			Snapshot: contract.Snapshot{Mode: "work", ModelID: "m"},
		}); err != nil {
			return "", err
		}
		batch := make([]*contract.EncodedEvent, 0, 1000)
		run := 0
		for i := range benchEvents {
			var body string
			switch {
			case i%100 == 0:
				run++
				body = fmt.Sprintf(`"eventType":"message","payload":{"messageId":"u%d","role":"user","operation":"append","parts":["Please look at the failing test in the parser package and fix it."]}`, run)
			case i%100 == 1:
				body = fmt.Sprintf(`"eventType":"status","runId":"r%d","sourceMessageId":"u%d","payload":{"status":"running","startedAt":"2026-03-01T12:00:01Z"}`, run, run)
			case i%100 == 99:
				body = fmt.Sprintf(`"eventType":"status","runId":"r%d","sourceMessageId":"u%d","payload":{"status":"completed","completedAt":"2026-03-01T12:09:00Z","durationMs":1000}`, run, run)
			default:
				body = fmt.Sprintf(`"eventType":"message","runId":"r%d","payload":{"messageId":"a%d","role":"assistant","operation":"append","parts":["The parser drops the last token when the input ends without a newline; "],"status":"streaming"}`, run, i)
			}
			doc := fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"%s-e%d","sessionId":%q,"sequence":0,"idempotencyKey":"%s-k%d","occurredAt":"2026-03-01T12:00:00Z",%s}`, id, i, id, id, i, body)
			ev, err := contract.CheckEvent([]byte(doc), contract.Limits{})
			if err != nil {
				return "", fmt.Errorf("bench event %s: %w", doc, err)
			}
			batch = append(batch, ev)
			if len(batch) == cap(batch) {
				if _, err := st.Append(ctx, id, batch, store.AppendOptions{}); err != nil {
					return "", err
				}
				batch = batch[:0]
			}
		}
	}
	return dir, nil
}

// BenchmarkCheck checks a SQLite store of 200,000 events offline, everything included
// (quick_check, every event against the contract, the runs' fold); events/s is the figure of
// docs/benchmarks.md (target: at least 200,000).
func BenchmarkCheck(b *testing.B) {
	dir, err := fillBenchStore(b.TempDir()) // b.Loop runs this function once
	if err != nil {
		b.Fatal(err)
	}
	in, err := sqlite.OpenInspector(context.Background(), dir)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	cpu0 := testenv.ProcessCPU()
	var events int64
	for b.Loop() {
		rep, err := fsck.Check(context.Background(), in, fsck.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if !rep.Clean() || rep.Events != benchSessions*benchEvents {
			b.Fatalf("report %+v, %d findings", rep.Progress, len(rep.Findings))
		}
		events += rep.Events
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	// The same per second of CPU the process used (all cores), which the load of a shared
	// machine does not change: events/s on an idle machine is about this times the cores.
	b.ReportMetric(float64(events)/(testenv.ProcessCPU()-cpu0).Seconds(), "events/cpu-s")
}
