package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
)

// BenchmarkVerify: sessiond verify's check (verifyExport) of an exported log of 1,000,000
// message events of about 470 bytes, written as sessiond export writes it (the file is made
// once, before the timer, in a temporary directory). One op verifies the whole file, read from
// the file system; events/s is the figure.
//
//	go test ./cmd/sessiond/ -run '^$' -bench Verify -benchtime 5x
func BenchmarkVerify(b *testing.B) {
	const n = 1_000_000
	path := filepath.Join(b.TempDir(), "export.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	cw := newChainWriter(f, "S-bench", &api.CreateSessionRequest{AgentID: "agent-1", Role: "implementer"})
	for i := range n {
		doc := fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"ev-%08d","sessionId":"S-bench","sequence":0,"idempotencyKey":"key-%08d","occurredAt":"2026-03-01T12:00:00Z","eventType":"message","payload":{"messageId":"m-%d","role":"assistant","operation":"append","parts":[{"type":"text","text":"The build failed in the integration suite: the fixture for the session store expects an empty directory, and the previous run left its lock file behind; removing it and rerunning the suite makes every test pass."}]}}`, i, i, i)
		ev, err := contract.CheckEvent([]byte(doc), contract.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		if err := cw.event(ev.JSON(int64(i))); err != nil {
			b.Fatal(err)
		}
	}
	if err := cw.close(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(path)
	b.SetBytes(fi.Size())
	b.ResetTimer()
	for range b.N {
		in, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		_, res, err := verifyExport(path, in)
		in.Close()
		if err != nil || !res.Valid || res.Events != n {
			b.Fatalf("verify: %+v, %v", res.Problems, err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(fi.Size())/n, "B/event")
}
