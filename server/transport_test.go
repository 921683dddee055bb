package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/sqlite"
)

// served is a server on a real listener, with the http.Server settings and the listener sessiond
// serve uses (Server.HTTPServer, Server.Listener), unlike httptest's.
type served struct {
	st   store.Store
	srv  *server.Server
	addr string
	url  string
	cl   *client.Client
}

// serveReal serves opt over a fresh SQLite store on 127.0.0.1. With validate, every exchange
// is checked against api/openapi.json (validated); the tests of stalled bodies cannot be, as
// the validator reads each body whole before the server does.
func serveReal(t *testing.T, opt server.Options, validate bool) *served {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, st, opt)
	hs := srv.HTTPServer()
	if validate {
		hs.Handler = validated(t, srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(srv.Listener(ln))
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
		st.Close()
	})
	u := "http://" + ln.Addr().String()
	return &served{st: st, srv: srv, addr: ln.Addr().String(), url: u, cl: client.New(u, http.DefaultClient)}
}

// rawResponse sends raw bytes on a new connection and reads one response.
func rawResponse(t *testing.T, addr, req string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	go io.WriteString(c, req) // the server may answer before it has read everything
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response to %.80q: %v", req, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// TestNetHTTPRefusalsAreJSON: the requests net/http refuses before any handler runs are
// answered with the API's error shape and a 4xx status, over a raw TCP connection (no client
// would send them). Before, they got plain text, and a Transfer-Encoding: gzip a 501.
func TestNetHTTPRefusalsAreJSON(t *testing.T) {
	s := serveReal(t, server.Options{}, true)
	huge := strings.Repeat("a", server.MaxHeaderBytes+4096)
	cases := []struct {
		name, req string
		status    int
		code      contract.ErrorCode
	}{
		{"bad percent-escape in the path", "GET /v1/sessions/%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400, api.CodeMalformed},
		{"headers over the limit", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + huge + "\r\n\r\n", 431, api.CodeHeadersTooLarge},
		{"transfer-encoding gzip", "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400, api.CodeMalformed},
		{"unsupported HTTP version", "GET /healthz HTTP/3.0\r\nHost: x\r\n\r\n", 400, api.CodeMalformed},
		{"header line without a colon", "GET /healthz HTTP/1.1\r\nHost: x\r\nnocolon\r\n\r\n", 400, api.CodeMalformed},
		{"two Content-Lengths", "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400, api.CodeMalformed},
		{"no Host header", "GET /healthz HTTP/1.1\r\n\r\n", 400, api.CodeMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := rawResponse(t, s.addr, tc.req)
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			var eb api.ErrorBody
			if err := json.Unmarshal([]byte(body), &eb); err != nil || eb.Error == nil {
				t.Fatalf("body is not the API's error shape: %q (%v)", body, err)
			}
			if eb.Error.Code != tc.code || api.HTTPStatus(eb.Error.Code) != resp.StatusCode || eb.Error.Message == "" {
				t.Errorf("error %+v with status %d, want code %s", eb.Error, resp.StatusCode, tc.code)
			}
		})
	}
	// A handler's answers pass through untouched, on the same kind of connection.
	resp, body := rawResponse(t, s.addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 200 || !strings.Contains(body, `"ok"`) {
		t.Errorf("healthz over the wrapped listener: %d %s", resp.StatusCode, body)
	}
}

// TestStalledBodyTimesOut: a request whose body stops arriving is answered 408
// REQUEST_TIMEOUT once the body timeout passes, and its connection is closed; before, nothing
// timed it out (300 stalled connections locked every client out).
func TestStalledBodyTimesOut(t *testing.T) {
	s := serveReal(t, server.Options{BodyTimeout: 300 * time.Millisecond}, false)
	s.createSession(t, "S-stall")
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	body := event("S-stall", 1)
	fmt.Fprintf(c, "POST /v1/sessions/S-stall/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:10])
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || errorBody(t, string(data)).Code != api.CodeRequestTimeout {
		t.Fatalf("stalled body: %d %s; want 408 REQUEST_TIMEOUT", resp.StatusCode, data)
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Errorf("answered after %v, before the body timeout", took)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("the connection is still open after the timed-out body")
	}
	if n := s.lastSequence(t, "S-stall"); n != -1 {
		t.Errorf("the log ends at %d; nothing should have been written", n)
	}
}

// TestIdleConnectionClosed: a keep-alive connection without a request is closed after the idle
// timeout; before, it stayed open for ever.
func TestIdleConnectionClosed(t *testing.T) {
	s := serveReal(t, server.Options{IdleTimeout: 300 * time.Millisecond}, true)
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	start := time.Now()
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: read %v, want EOF (closed by the server)", err)
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Errorf("closed after %v, before the idle timeout", took)
	}
}

// TestStreamOutlivesTimeouts: an event stream lives on past the body, idle and header timeouts
// (they are not a global deadline), and gets its events.
func TestStreamOutlivesTimeouts(t *testing.T) {
	const d = 200 * time.Millisecond
	s := serveReal(t, server.Options{BodyTimeout: d, IdleTimeout: d, HeaderTimeout: d, KeepAlive: 50 * time.Millisecond}, false)
	s.createSession(t, "S-live")
	resp, err := http.Get(s.url + "/v1/sessions/S-live/events/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	time.Sleep(5 * d)
	if r := s.post(t, "/v1/sessions/S-live/events", event("S-live", 1)); r.StatusCode != http.StatusCreated {
		t.Fatalf("append: %d", r.StatusCode)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended; the timeouts cut it off")
			}
			if strings.HasPrefix(l, "data:") && strings.Contains(l, `"ev-1"`) {
				return
			}
		case <-timeout:
			t.Fatal("the event never came on the stream")
		}
	}
}

// TestBodyBudget: request bodies in flight are bounded: while one takes the whole budget (its
// body arriving slowly), another waits BodyQueueWait and is answered 503 OVERLOADED with
// Retry-After, nothing written; once the first ends, the same request goes through. Before,
// every request read its body into memory at once (32 concurrent 14 MiB appends took 2.1 GiB).
func TestBodyBudget(t *testing.T) {
	s := serveReal(t, server.Options{MaxInflightBodyBytes: 4000, MaxInflightBodyBytesPerClient: 4000, BodyQueueWait: 50 * time.Millisecond}, false)
	s.createSession(t, "S-budget")
	hog, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	// Declares 4000 bytes and sends a few: its handler holds the whole budget, reading.
	fmt.Fprintf(hog, "POST /v1/sessions/S-budget/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n[")
	// Probe with a body the handler would refuse (422) until the hog's handler has started
	// and taken the budget: then the probe is refused before its body is read.
	var last *http.Response
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		last = s.post(t, "/v1/sessions/S-budget/events", `{"not":"an event"}`)
		if last.StatusCode != http.StatusUnprocessableEntity {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if last.StatusCode != http.StatusServiceUnavailable || last.Header.Get("Retry-After") == "" {
		t.Fatalf("append while the budget is taken: %d (Retry-After %q); want 503 with Retry-After", last.StatusCode, last.Header.Get("Retry-After"))
	}
	if r := s.post(t, "/v1/sessions/S-budget/events", event("S-budget", 1)); r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a valid append while the budget is taken: %d, want 503", r.StatusCode)
	}
	if n := s.lastSequence(t, "S-budget"); n != -1 {
		t.Errorf("the log ends at %d; the refused append wrote", n)
	}
	hog.Close()
	for {
		r := s.post(t, "/v1/sessions/S-budget/events", event("S-budget", 1))
		if r.StatusCode == http.StatusCreated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the budget was not given back: %d", r.StatusCode)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSlowloris: 100 connections sending their headers a byte a second do not delay a normal
// request by 100 ms: the median latency of a normal request with the attack on is compared with
// the median without it, measured alternately in rounds so that the machine's load weighs on
// both alike. The server closes the attackers' connections once the header timeout passes.
func TestSlowloris(t *testing.T) {
	if testing.Short() {
		t.Skip("takes seconds")
	}
	s := serveReal(t, server.Options{HeaderTimeout: 3 * time.Second}, true)
	s.createSession(t, "S-normal")
	measure := func(n int) []time.Duration {
		var out []time.Duration
		for range n {
			start := time.Now()
			r := s.get(t, "/v1/sessions/S-normal")
			if r.StatusCode != 200 {
				t.Fatalf("normal request: %d", r.StatusCode)
			}
			out = append(out, time.Since(start))
		}
		return out
	}
	median := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	before := measure(20)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	closed := make(chan time.Duration, 100)
	for range 100 {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			start := time.Now()
			req := "GET /v1/sessions/S-normal HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 100)
			for i := 0; i < len(req); i++ {
				if _, err := c.Write([]byte{req[i]}); err != nil {
					closed <- time.Since(start)
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
			}
		}()
	}
	during := measure(20)
	cancelled := false
	defer func() {
		if !cancelled {
			cancel()
		}
		wg.Wait()
	}()
	mb, md := median(before), median(during)
	t.Logf("median latency of a normal request: %v without the attack, %v with 100 slowloris connections", mb, md)
	if md-mb > 100*time.Millisecond {
		t.Errorf("the attack delayed a normal request by %v (median %v → %v); want under 100ms", md-mb, mb, md)
	}
	// The server hangs up on every attacker once the header timeout passes.
	for i := range 100 {
		select {
		case took := <-closed:
			if took < 2*time.Second {
				t.Fatalf("an attacker was cut off after %v, before the header timeout", took)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("only %d of 100 attackers were cut off", i)
		}
	}
	cancel()
	cancelled = true
}

func (s *served) post(t *testing.T, path, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(s.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp
}

func (s *served) get(t *testing.T, path string) *http.Response {
	t.Helper()
	resp, err := http.Get(s.url + path)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp
}

func (s *served) createSession(t *testing.T, id string) {
	t.Helper()
	if r := s.post(t, "/v1/sessions", fmt.Sprintf(createBody, id)); r.StatusCode != http.StatusCreated {
		t.Fatalf("create %s: %d", id, r.StatusCode)
	}
}

func (s *served) lastSequence(t *testing.T, id string) int64 {
	t.Helper()
	sess, err := s.cl.GetSession(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return sess.LastSequence
}

// TestLongRequestOutlivesBodyTimeout: the body deadline is lifted once the body is read, so a
// request that works longer than the body timeout afterwards (a claim waiting for a run) is
// not cut off by it.
func TestLongRequestOutlivesBodyTimeout(t *testing.T) {
	s := serveReal(t, server.Options{BodyTimeout: 200 * time.Millisecond}, true)
	start := time.Now()
	r := s.post(t, "/v1/runs/claim", `{"wait":"1s"}`)
	if r.StatusCode != http.StatusNoContent {
		t.Fatalf("claim waiting 1s with a 200ms body timeout: %d, want 204 after the wait", r.StatusCode)
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Errorf("the claim answered after %v, before its wait", took)
	}
}
