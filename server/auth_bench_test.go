package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/auth"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
)

// What authentication costs (issue 14: at most 5% on HTTP append throughput and stream
// fan-out), auth off and on side by side in one run:
//
//	go test -run '^$' -bench 'AuthOverhead' -benchtime 1x -count 5 ./server/
//
// With auth on, every request carries a key of one project ("bench"): the key is verified
// (cached, a SHA-256 and a constant-time compare), the route's scope checked, the session's
// project checked (cached) and the last use remembered for the batched write.

// authBundle is setup's bundle with authentication on and a key of project "bench" with every
// scope, or without authentication when on is false.
func authBundle(b *testing.B, on bool) *bundle {
	// No lease expirer: nothing runs in the background of BenchmarkAuthCheck, whose
	// instruction counts (callgrind) would count it.
	bd := setup(b, server.Options{Auth: on}, session.Options{LeaseExpiryInterval: -1})
	if on {
		key, _, err := auth.NewKeyring(bd.st, auth.KeyringOptions{}).Create(context.Background(), auth.KeySpec{Project: "bench", Scopes: auth.AllScopes})
		if err != nil {
			b.Fatal(err)
		}
		bd.authz = "Bearer " + key
	}
	return bd
}

// BenchmarkAuthOverhead/append: BenchmarkHTTPAppend with 8 clients, auth off and on.
// BenchmarkAuthOverhead/fanout: 200 subscribers each open a stream of one session (each open
// authenticated when on), then a writer appends 2,000 events in batches of 20; one op ends
// when every subscriber has every event. deliveries/s is subscribers × events / time.
func BenchmarkAuthOverhead(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("append/auth=%v", on), func(b *testing.B) {
			benchHTTPAppend(b, authBundle(b, on), 8)
		})
	}
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("fanout/auth=%v", on), func(b *testing.B) {
			benchAuthFanout(b, authBundle(b, on))
		})
	}
}

func benchAuthFanout(b *testing.B, bd *bundle) {
	const subscribers, events, batch = 200, 2000, 20
	raiseOpenFiles(b, 2*subscribers+256)
	hc := &http.Client{Transport: benchTransport(subscribers)}
	defer hc.CloseIdleConnections()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		sid := fmt.Sprintf("S-fan-%d", keySeq.Add(1))
		bd.createSession(b, sid)
		var ready, done sync.WaitGroup
		ready.Add(subscribers)
		done.Add(subscribers)
		errs := make(chan error, subscribers)
		ctx, cancel := context.WithCancel(context.Background())
		for range subscribers {
			go func() {
				defer done.Done()
				req, _ := http.NewRequestWithContext(ctx, "GET", bd.ts.URL+"/v1/sessions/"+sid+"/events/stream?after=-1", nil)
				if bd.authz != "" {
					req.Header.Set("Authorization", bd.authz)
				}
				resp, err := hc.Do(req)
				ready.Done()
				if err != nil || resp.StatusCode != 200 {
					errs <- fmt.Errorf("stream: %v %v", err, resp)
					return
				}
				defer resp.Body.Close()
				sc := bufio.NewScanner(resp.Body)
				n := 0
				for sc.Scan() {
					if strings.HasPrefix(sc.Text(), "data: ") {
						if n++; n == events {
							return
						}
					}
				}
				errs <- fmt.Errorf("stream ended after %d events: %v", n, sc.Err())
			}()
		}
		ready.Wait()
		start := time.Now()
		var body []byte
		for j := 0; j < events; j += batch {
			body = body[:0]
			base := keySeq.Add(batch) - batch
			for k := int64(0); k < batch; k++ {
				body = benchEvent(body, sid, base+k, "fan")
				body = append(body, '\n')
			}
			req, _ := http.NewRequest("POST", bd.ts.URL+"/v1/sessions/"+sid+"/events", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/x-ndjson")
			if bd.authz != "" {
				req.Header.Set("Authorization", bd.authz)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != http.StatusCreated {
				b.Fatalf("append: %v %v", err, resp)
			}
			resp.Body.Close()
		}
		done.Wait()
		total += time.Since(start)
		cancel()
		select {
		case err := <-errs:
			b.Fatal(err)
		default:
		}
	}
	b.ReportMetric(float64(subscribers*events*b.N)/total.Seconds(), "deliveries/s")
}

// BenchmarkAuthCheck measures what authentication adds to one request, in process (no
// network, no load from other goroutines): GET /v1/sessions/{id} through ServeHTTP, auth off
// and on (a key of the session's project; key and project cached, as after the first
// request), and GET /v1/whoami, whose handler does almost nothing, so that the difference of
// ns/op is the per-request cost of auth.
func BenchmarkAuthCheck(b *testing.B) {
	for _, c := range []struct{ name, path string }{{"session", "/v1/sessions/S-check"}, {"whoami", "/v1/whoami"}} {
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/auth=%v", c.name, on), func(b *testing.B) {
				bd := authBundle(b, on)
				bd.createSession(b, "S-check")
				req := httptestRequest("GET", c.path, bd.authz)
				w := &discardWriter{h: http.Header{}}
				bd.srv.ServeHTTP(w, req)
				if w.code != 200 {
					b.Fatalf("GET: %d", w.code)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					w.code = 0
					clear(w.h)
					bd.srv.ServeHTTP(w, req)
				}
			})
		}
	}
}

func httptestRequest(method, path, authz string) *http.Request {
	req, _ := http.NewRequest(method, "http://sessiond"+path, nil)
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	return req
}

// discardWriter is a ResponseWriter that keeps only the status.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = 200
	}
	return len(p), nil
}
func (w *discardWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
