package acp_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/acp"
	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/server/servertest"
)

// slowStreams is a proxy to the server at url that delivers the events of every event stream
// one at a time, each delay after the one before (a recorder that reads the session's stream
// slowly), and passes everything else as it is. It returns the proxy's URL.
func slowStreams(t *testing.T, url string, delay time.Duration) string {
	t.Helper()
	target, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	p := httputil.NewSingleHostReverseProxy(target)
	p.FlushInterval = -1
	p.ModifyResponse = func(resp *http.Response) error {
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			resp.Body = &slowBody{r: bufio.NewReader(resp.Body), c: resp.Body, delay: delay}
		}
		return nil
	}
	ts := httptest.NewServer(p)
	t.Cleanup(ts.Close)
	return ts.URL
}

// slowBody reads an event stream one block (up to a blank line) at a time, delay apart.
type slowBody struct {
	r     *bufio.Reader
	c     io.Closer
	delay time.Duration
	left  []byte
}

func (b *slowBody) Read(p []byte) (int, error) {
	if len(b.left) == 0 {
		var block []byte
		for {
			line, err := b.r.ReadBytes('\n')
			block = append(block, line...)
			if err != nil {
				if len(block) == 0 {
					return 0, err
				}
				break
			}
			if len(line) == 1 {
				break
			}
		}
		time.Sleep(b.delay)
		b.left = block
	}
	n := copy(p, b.left)
	b.left = b.left[n:]
	return n, nil
}

func (b *slowBody) Close() error { return b.c.Close() }

// recordSDKAgent starts the SDK test agent under a Recorder on a new session of a real server,
// and returns the server's URL, a client, and the number of session/prompt requests the
// recorder sent so far. The recorder, a client of the server through slowStreams when
// slow > 0, stops with stop (or when the test ends).
func recordSDKAgent(t *testing.T, ctx context.Context, sid string, slow time.Duration) (url string, cl *client.Client, prompts *atomic.Int64, stop func() error) {
	t.Helper()
	node, script, _ := sdkAgent(t)
	url = servertest.Start(t, server.Options{})
	cl = client.New(url, nil)
	recURL := url
	if slow > 0 {
		recURL = slowStreams(t, url, slow)
	}
	if _, err := cl.CreateSession(ctx, api.CreateSessionRequest{SessionID: sid, AgentID: "sdk-test-agent", Role: "implementer",
		Snapshot: contract.Snapshot{Mode: "work", ModelID: "test"}}); err != nil {
		t.Fatal(err)
	}
	prompts = new(atomic.Int64)
	rec := &acp.Recorder{Client: client.New(recURL, nil), SessionID: sid, Root: t.TempDir(), Log: t.Logf, Tap: func(d acp.Direction, frame []byte) {
		if d == acp.Sent && bytes.Contains(frame, []byte(`"method":"session/prompt"`)) {
			prompts.Add(1)
		}
	}}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rec.Run(runCtx, acp.Agent{Path: node, Args: []string{script}}) }()
	var stopped bool
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-done
	}
	t.Cleanup(func() { _ = stop() })
	return url, cl, prompts, stop
}

// waitRuns polls the session's runs until ok accepts them.
func waitRuns(t *testing.T, ctx context.Context, cl *client.Client, sid string, ok func([]contract.Run) bool) []contract.Run {
	t.Helper()
	for {
		runs, err := cl.Runs(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if ok(runs) {
			return runs
		}
		if ctx.Err() != nil {
			t.Fatalf("the runs never became what the test waits for: %+v", runs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRecorderPromptsFrontEndMessagesOnce sends 60 messages from a chat front end (the AI
// SDK bridge's POST, which appends each message with its queued run in one append) while the
// recorder reads the session's stream slowly (each event 15 ms after the one before, so that
// it reads a message before the run that follows it): each is prompted exactly once, under the
// bridge's run id, and no run of the recorder's own (acp-<id>) appears.
func TestRecorderPromptsFrontEndMessagesOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const sid, n = "S-acp-front", 60
	url, cl, prompts, _ := recordSDKAgent(t, ctx, sid, 15*time.Millisecond)
	for i := range n {
		body := fmt.Sprintf(`{"id":%q,"messages":[{"id":"m%d","role":"user","parts":[{"type":"text","text":"hello %d"}]}],"trigger":"submit-message"}`, sid, i, i)
		req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/sessions/"+sid+"/chat", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		stream, _ := io.ReadAll(resp.Body) // the run's stream: it ends when the run does
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(stream), `"finishReason":"stop"`) {
			t.Fatalf("message %d: %d %s", i, resp.StatusCode, stream)
		}
	}
	runs := waitRuns(t, ctx, cl, sid, func(runs []contract.Run) bool { return len(runs) >= n })
	for _, r := range runs {
		if !strings.HasPrefix(r.RunID, "run-m") || r.Status != contract.RunStatusCompleted {
			t.Errorf("run %s (message %s) is %s: each message is prompted once, as the bridge's run", r.RunID, r.SourceMessageID, r.Status)
		}
	}
	if len(runs) != n || prompts.Load() != n {
		t.Fatalf("%d messages: %d runs, %d session/prompt requests", n, len(runs), prompts.Load())
	}
}

// TestRecorderRefusalAndInterrupt: a turn the agent refuses fails with an error event saying
// so; a turn in progress when sessiond acp is interrupted (Ctrl-C) is stopped with that
// reason, not failed as if the agent had not answered.
func TestRecorderRefusalAndInterrupt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const sid = "S-acp-refuse"
	_, cl, _, stop := recordSDKAgent(t, ctx, sid, 0)
	say := func(id, text string) {
		t.Helper()
		if _, err := cl.AppendEvents(ctx, sid, []contract.Event{userMessage(sid, id, text)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	say("r1", "refuse")
	waitRuns(t, ctx, cl, sid, func(runs []contract.Run) bool { return len(runs) == 1 && contract.IsTerminal(runs[0].Status) })
	say("w1", "wait")
	waitRuns(t, ctx, cl, sid, func(runs []contract.Run) bool { return len(runs) == 2 && runs[1].Status == contract.RunStatusRunning })
	if err := stop(); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("the recorder ended with %v, want the interruption", err)
	}
	page, err := cl.ReadEvents(ctx, sid, -1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var refused, blamed, statuses []string
	for _, raw := range page.Events {
		var e contract.Event
		if err := e.UnmarshalJSON(raw); err != nil {
			t.Fatal(err)
		}
		switch p := e.Payload.(type) {
		case *contract.ErrorPayload:
			if e.RunID == "acp-r1" && p.Code == "AGENT_REFUSED" {
				refused = append(refused, p.Message)
			}
			if e.RunID == "acp-w1" {
				blamed = append(blamed, p.Message)
			}
		case *contract.StatusPayload:
			if e.RunID == "acp-w1" {
				s := p.Status
				if p.Detail != nil {
					s += " (" + *p.Detail + ")"
				}
				statuses = append(statuses, s)
			}
		}
	}
	runs, err := cl.Runs(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if runs[0].Status != contract.RunStatusFailed || len(refused) != 1 {
		t.Errorf("refused turn: run %s, error events %q; want failed with one AGENT_REFUSED", runs[0].Status, refused)
	}
	want := "running stopping (sessiond acp was interrupted) stopped"
	if runs[1].Status != contract.RunStatusStopped || len(blamed) != 0 || strings.Join(statuses, " ") != want {
		t.Errorf("interrupted turn: run %s, statuses %q (want %q), errors %q", runs[1].Status, statuses, want, blamed)
	}
}
