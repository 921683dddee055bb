package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/internal/testenv"
	"github.com/sessiond/sessiond/server"
)

// projectionRun appends to sid a run whose first approval (ap1) is decided, then n events of
// the run (text deltas, reasoning, terminal output, tool calls), then a second approval the
// run waits for; it returns the sequence of the decision (where the streams start).
func projectionRun(b testing.TB, bb *bundle, sid string, n int) int64 {
	const run = "run-m1"
	ev := func(i int, typ, payload string) string { return runtimeEvent(sid, run, i, typ, payload) }
	user := `{"contract":"AgentSessionEvent","eventId":"u","sessionId":"` + sid + `","sequence":0,"idempotencyKey":"u","occurredAt":"2026-03-01T12:00:00Z","eventType":"message","payload":{"messageId":"m1","role":"user","operation":"append","parts":[{"type":"text","text":"go"}]}}`
	bb.appendAll(b, sid, user,
		ev(0, "status", `{"status":"queued"}`),
		ev(1, "status", `{"status":"running","startedAt":"2026-03-01T12:00:00Z"}`),
		ev(2, "tool", `{"toolCallId":"t0","toolName":"shell","status":"pending","input":{"cmd":"ls"}}`),
		ev(3, "approval", `{"approvalId":"ap1","toolCallId":"t0","status":"requested","title":"ls?"}`),
		ev(4, "status", `{"status":"waiting_approval"}`))
	last := bb.lastSequence(b, sid)
	cmd := fmt.Sprintf(`{"contract":"AgentSessionCommand","commandId":"c1","sessionId":%q,"runId":%q,"idempotencyKey":"c1","expectedSequence":%d,"issuedAt":"2026-03-01T12:00:00Z","commandType":"approval","payload":{"approvalId":"ap1","decision":"approved"}}`, sid, run, last)
	if r := bb.do(b, "POST", "/v1/sessions/"+sid+"/commands", "application/json", cmd); r.status != http.StatusOK {
		b.Fatalf("approval: %d %s", r.status, r.body)
	}
	cut := last + 1 // the decision; the server's running status follows
	text := strings.Repeat("lorem ipsum ", 8)
	var batch []string
	for i := 0; i < n; i++ {
		k := 10 + i
		switch {
		case i%10 < 6:
			batch = append(batch, ev(k, "message", fmt.Sprintf(`{"messageId":"a%d","role":"assistant","operation":"append","parts":[{"type":"text","text":%q}],"status":"streaming"}`, i/100, text)))
		case i%10 < 8:
			batch = append(batch, ev(k, "reasoning", fmt.Sprintf(`{"reasoningId":"r%d","text":%q,"status":"streaming"}`, i/100, text)))
		case i%10 == 8:
			batch = append(batch, ev(k, "terminal", fmt.Sprintf(`{"terminalId":"t","stream":"stdout","chunk":%q}`, text)))
		default:
			batch = append(batch, ev(k, "tool", fmt.Sprintf(`{"toolCallId":"t%d","toolName":"shell","status":"completed","input":{"cmd":"ls"},"output":%q}`, k, text)))
		}
		if len(batch) == 100 {
			bb.appendAll(b, sid, batch...)
			batch = batch[:0]
		}
	}
	bb.appendAll(b, sid,
		ev(10+n, "tool", `{"toolCallId":"tz","toolName":"shell","status":"pending","input":{"cmd":"rm"}}`),
		ev(11+n, "approval", `{"approvalId":"ap2","toolCallId":"tz","status":"requested","title":"rm?"}`),
		ev(12+n, "status", `{"status":"waiting_approval"}`))
	return cut
}

// BenchmarkBridgeProjection: 1,000 events of a run (text, reasoning, terminal output, tool
// calls) delivered over HTTP to one reader through each protocol, side by side: the native
// stream (GET …/events/stream after the approval), the AI SDK (the chat POST that answers the
// approval) and AG-UI (the POST whose resume[] answers it); each answer streams the same
// events from the log and ends at the run's next approval (the native stream is read up to
// that event). Each protocol is read once before measuring. Reported: CPU (this process:
// server and reader) and wall time per delivered event; docs/benchmarks.md has the ratios to
// native.
func BenchmarkBridgeProjection(b *testing.B) {
	const n = 1000
	bb := setup(b, server.Options{})
	const sid = "S-proj"
	if r := bb.do(b, "POST", "/v1/sessions", "application/json", fmt.Sprintf(bridgeCreate, sid)); r.status != http.StatusCreated {
		b.Fatal(r.body)
	}
	cut := projectionRun(b, bb, sid, n)
	last := bb.lastSequence(b, sid)
	user := `{"id":"m1","role":"user","parts":[{"type":"text","text":"go"}]}`
	assistant := `{"id":"run-m1","role":"assistant","parts":[{"type":"dynamic-tool","toolName":"shell","toolCallId":"t0","state":"approval-responded","input":{"cmd":"ls"},"approval":{"id":"ap1","approved":true}}]}`
	hc := bb.ts.Client()
	for _, tc := range []struct {
		name, method, path, body string
		end                      []byte // the reader stops at the end of the body or at this
	}{
		{"native", "GET", fmt.Sprintf("/v1/sessions/%s/events/stream?after=%d", sid, cut), "", []byte("id: " + strconv.FormatInt(last, 10) + "\n")},
		{"aisdk", "POST", "/v1/sessions/" + sid + "/chat", `{"id":"` + sid + `","messages":[` + user + `,` + assistant + `],"trigger":"submit-message"}`, nil},
		{"agui", "POST", "/v1/sessions/" + sid + "/agui", `{"threadId":"` + sid + `","runId":"c","messages":[{"id":"m1","role":"user","content":"go"}],"resume":[{"interruptId":"ap1","status":"resolved"}]}`, nil},
	} {
		b.Run(tc.name, func(b *testing.B) {
			buf := make([]byte, 64<<10)
			read := func() {
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, tc.method, bb.ts.URL+tc.path, strings.NewReader(tc.body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("%v %v", err, resp)
				}
				var tail []byte
				for {
					k, err := resp.Body.Read(buf)
					if tc.end != nil {
						tail = append(tail[max(0, len(tail)-64):], buf[:k]...)
						if bytes.Contains(tail, tc.end) {
							break
						}
					}
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				cancel()
				resp.Body.Close()
			}
			// One read before measuring, the same for every protocol: what a server that has
			// served this session does once (the session's live projection catching up with
			// the log, which the approval's command needs anyway; connections) is not per
			// delivered event.
			read()
			cpu0, start := testenv.ProcessCPU(), time.Now()
			for i := 0; i < b.N; i++ {
				read()
			}
			cpu, wall := testenv.ProcessCPU()-cpu0, time.Since(start)
			events := float64(b.N) * n
			b.ReportMetric(float64(cpu.Nanoseconds())/events, "cpu-ns/event")
			b.ReportMetric(float64(wall.Nanoseconds())/events, "wall-ns/event")
		})
	}
}

// BenchmarkBridgeFanout: 200 AI SDK streams (the resume GET of the active run) follow one
// session while a writer appends 1,000 text deltas of the run at 500 events/s, one event
// per append; side by side, the same with 200 native streams (GET …/events/stream?tail=true).
// Each delivery is timed at the reader (when the chunk holding it is read) minus the event's
// commit time (a store commit callback, see setupFanout). Reported: p50, p99 and max of
// commit-to-delivery over the 200,000 deliveries, and the process's CPU per delivery.
func BenchmarkBridgeFanout(b *testing.B) {
	for _, tc := range []struct {
		name, path string
		marker     []byte // precedes "e<k>;" (the text of delta k) in the stream
		end        []byte // the line that ends the stream
	}{
		{"native", "/events/stream?tail=true", []byte(`"text":"e`), []byte(`"status":"completed"`)},
		{"aisdk", "/chat/S-fan/stream", []byte(`"delta":"e`), []byte(`"finish"`)},
	} {
		b.Run(tc.name, func(b *testing.B) { bridgeFanout(b, tc.path, tc.marker, tc.end) })
	}
}

func bridgeFanout(b *testing.B, path string, marker, end []byte) {
	const (
		streams = 200
		total   = 1000
		rate    = 500
	)
	raiseOpenFiles(b, 2*streams+256)
	var p50s, p99s, maxs, cpus []float64
	for i := 0; i < b.N; i++ {
		fb := setupFanout(b, server.Options{}, total+64)
		const sid, run = "S-fan", "run-m1"
		if r := fb.do(b, "POST", "/v1/sessions", "application/json", fmt.Sprintf(bridgeCreate, sid)); r.status != http.StatusCreated {
			b.Fatal(r.body)
		}
		fb.appendAll(b, sid,
			runtimeEvent(sid, run, 0, "status", `{"status":"queued"}`),
			runtimeEvent(sid, run, 1, "status", `{"status":"running","startedAt":"2026-03-01T12:00:00Z"}`))
		base := fb.lastSequence(b, sid) + 1
		lat := make([][]int64, streams) // microseconds
		var ready, done sync.WaitGroup
		for s := range streams {
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				tr := &http.Transport{}
				defer tr.CloseIdleConnections()
				resp, err := (&http.Client{Transport: tr}).Get(fb.ts.URL + "/v1/sessions/" + sid + path)
				ready.Done()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Errorf("stream %d: %v %v", s, err, resp)
					return
				}
				defer resp.Body.Close()
				r := bufio.NewReaderSize(resp.Body, 64<<10)
				for {
					line, err := r.ReadSlice('\n')
					if err != nil {
						return
					}
					now := time.Now().UnixNano()
					j := bytes.Index(line, marker)
					if j < 0 {
						if bytes.Contains(line, end) {
							return
						}
						continue
					}
					j += len(marker)
					k, _ := strconv.Atoi(string(line[j : j+bytes.IndexByte(line[j:], ';')]))
					lat[s] = append(lat[s], (now-fb.commitNanos[base+int64(k)].Load())/1000)
				}
			}()
		}
		ready.Wait()
		time.Sleep(200 * time.Millisecond) // the streams are open and at the head
		svc := fb.srv.Service()
		cpu0, start := testenv.ProcessCPU(), time.Now()
		for k := 0; k < total; k++ {
			if d := time.Until(start.Add(time.Duration(k) * time.Second / rate)); d > 0 {
				time.Sleep(d)
			}
			e := &contract.Event{Contract: "AgentSessionEvent", EventID: fmt.Sprintf("d%d", k), SessionID: sid, RunID: run, SourceMessageID: "m1",
				IdempotencyKey: fmt.Sprintf("d%d", k), OccurredAt: "2026-03-01T12:00:00Z", EventType: "message",
				Payload: &contract.MessagePayload{MessageID: "a1", Role: "assistant", Operation: "append", Status: "streaming",
					Parts: []contract.RawJSON{contract.RawJSON(`{"type":"text","text":"e` + strconv.Itoa(k) + `;"}`)}}}
			enc, err := contract.EncodeEvent(e)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := svc.Append(context.Background(), sid, []*contract.EncodedEvent{enc}, nil, nil); err != nil {
				b.Fatal(err)
			}
		}
		fb.appendAll(b, sid, runtimeEvent(sid, run, 9, "status", `{"status":"completed","completedAt":"2026-03-01T12:00:01Z","durationMs":1}`))
		done.Wait()
		cpus = append(cpus, float64((testenv.ProcessCPU()-cpu0).Nanoseconds())/(streams*total))
		var all []int64
		for s, l := range lat {
			if len(l) != total {
				b.Fatalf("stream %d got %d of %d deltas", s, len(l), total)
			}
			all = append(all, l...)
		}
		slices.Sort(all)
		pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))]) / 1000 }
		p50s, p99s, maxs = append(p50s, pct(0.5)), append(p99s, pct(0.99)), append(maxs, pct(1))
	}
	med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	b.ReportMetric(med(p50s), "p50-ms")
	b.ReportMetric(med(p99s), "p99-ms")
	b.ReportMetric(med(maxs), "max-ms")
	b.ReportMetric(med(cpus), "cpu-ns/delivery")
}
