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
	var lat []time.Duration
	rec := &acp.Recorder{Client: cl, SessionID: sid, Root: b.TempDir(), Tap: func(d acp.Direction, frame []byte) {
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
			switch p := e.Payload.(type) {
			case *contract.MessagePayload:
				for _, part := range p.Parts {
					var t struct{ Text string }
					if json.Unmarshal(part, &t) == nil && strings.HasPrefix(t.Text, "chunk-") {
						mu.Lock()
						if at, ok := read[t.Text]; ok {
							lat = append(lat, now.Sub(at))
							delete(read, t.Text)
						}
						mu.Unlock()
					}
				}
			case *contract.StatusPayload:
				if contract.IsTerminal(p.Status) {
					done <- e.RunID
				}
			}
			return nil
		})
	}()
	i := 0
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
	mu.Lock()
	defer mu.Unlock()
	if len(lat) == 0 {
		b.Fatal("no latency measured")
	}
	slices.Sort(lat)
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(len(lat))/float64(i), "chunks/op")
}
