package acp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/acp"
	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/internal/testenv"
)

// BenchmarkRecordLatency measures what recording adds between an agent's session/update and
// the event on the session's stream: from the moment the recorder reads the update's frame
// to the moment a client following the stream (over HTTP, as a UI would) receives the event.
// The agent (written with the SDK) streams 200 chunks, one every 5 ms, per prompt; the
// benchmark reports the median and the 99th percentile over all chunks.
func BenchmarkRecordLatency(b *testing.B) {
	node, script, _ := sdkAgent(b)
	cl := startServer(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const sid = "S-acp-bench"
	if _, err := cl.CreateSession(ctx, api.CreateSessionRequest{SessionID: sid, AgentID: "sdk-test-agent", Role: "implementer",
		Snapshot: contract.Snapshot{Mode: "work", ModelID: "test"}}); err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	read := map[string]time.Time{}
	var lat, appended []time.Duration // read → on the stream; read → append answered
	rec := &acp.Recorder{Client: cl, SessionID: sid, Root: b.TempDir(), OnEvent: func(evs []contract.Event) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for _, e := range evs {
			if t := chunkText(e); t != "" {
				if at, ok := read[t]; ok {
					appended = append(appended, now.Sub(at))
				}
			}
		}
	}, Tap: func(d acp.Direction, frame []byte) {
		if d != acp.Received {
			return
		}
		if i := strings.Index(string(frame), `"text":"chunk-`); i >= 0 {
			var n struct {
				Params struct {
					Update struct {
						Content struct{ Text string }
					}
				}
			}
			if json.Unmarshal(frame, &n) == nil {
				mu.Lock()
				read[n.Params.Update.Content.Text] = time.Now()
				mu.Unlock()
			}
		}
	}}
	go func() { _ = rec.Run(ctx, acp.Agent{Path: node, Args: []string{script}}) }()
	done := make(chan string, 16)
	go func() {
		_ = cl.Stream(ctx, sid, client.StreamOptions{After: -1}, func(se client.StreamEvent) error {
			now := time.Now()
			var e contract.Event
			if e.UnmarshalJSON(se.Data) != nil {
				return nil
			}
			if t := chunkText(e); t != "" {
				mu.Lock()
				if at, ok := read[t]; ok {
					lat = append(lat, now.Sub(at))
					delete(read, t)
				}
				mu.Unlock()
			}
			switch p := e.Payload.(type) {
			case *contract.StatusPayload:
				if contract.IsTerminal(p.Status) {
					done <- e.RunID
				}
			}
			return nil
		})
	}()
	i := 0
	cpu0 := testenv.ProcessCPU()
	for b.Loop() {
		i++
		id := fmt.Sprintf("b%d", i)
		if _, err := cl.AppendEvents(ctx, sid, []contract.Event{userMessage(sid, id, "bench 200")}, nil); err != nil {
			b.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			b.Fatal("the prompt did not end")
		}
	}
	cpu := testenv.ProcessCPU() - cpu0
	mu.Lock()
	defer mu.Unlock()
	if len(lat) == 0 || len(appended) == 0 {
		b.Fatal("no latency measured")
	}
	slices.Sort(lat)
	slices.Sort(appended)
	q := func(d []time.Duration, f float64) float64 {
		return float64(d[int(f*float64(len(d)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(q(lat, 0.5), "p50-ms")
	b.ReportMetric(q(lat, 0.99), "p99-ms")
	b.ReportMetric(q(appended, 0.5), "append-p50-ms")
	b.ReportMetric(q(appended, 0.99), "append-p99-ms")
	b.ReportMetric(float64(len(lat))/float64(i), "chunks/op")
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(lat)), "cpu-µs/chunk")
}

// chunkText is the text of a benchmark chunk's message event ("chunk-…"), or "".
func chunkText(e contract.Event) string {
	p, ok := e.Payload.(*contract.MessagePayload)
	if !ok {
		return ""
	}
	for _, part := range p.Parts {
		var t struct{ Text string }
		if json.Unmarshal(part, &t) == nil && strings.HasPrefix(t.Text, "chunk-") {
			return t.Text
		}
	}
	return ""
}
