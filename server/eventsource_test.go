package server_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/internal/testenv"
	"github.com/sessiond/sessiond/server"
)

// browserExample returns the one ```js block of docs/api.md: the EventSource example.
func browserExample(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(doc), "\n```js\n")
	if len(blocks) != 2 {
		t.Fatalf("docs/api.md has %d ```js blocks; want exactly one, the EventSource example", len(blocks)-1)
	}
	js, _, ok := strings.Cut(blocks[1], "\n```\n")
	if !ok {
		t.Fatal("the ```js block of docs/api.md is not closed")
	}
	return js
}

// eventSourcePackage lays out a directory where Node finds the eventsource package pinned by
// testdata/eventsource's lockfile.
func eventSourcePackage(t *testing.T) string {
	t.Helper()
	return testenv.NpmPackages(t, "testdata/eventsource")
}

// prelude gives the example what a browser page would: an EventSource, resolving the
// example's relative URL against the page's origin (here the test server's).
const prelude = `import { EventSource as NodeEventSource } from "eventsource";
globalThis.EventSource = class EventSource extends NodeEventSource {
  constructor(url, init) { super(new URL(url, process.env.SESSIOND_URL), init); }
};
`

// TestEventSourceExample runs docs/api.md's browser example as written, under Node with the
// eventsource package, against a session with one event of every kind: it must print every
// event, in order, with its kind (the contract's error event among them, not taken for a
// connection error), then the stream's final message when the server shuts down, and only
// then EventSource's own connection errors.
func TestEventSourceExample(t *testing.T) {
	node := testenv.Need(t, "node", "it runs the browser example of docs/api.md", "")
	js := browserExample(t)
	dir := eventSourcePackage(t)
	script := filepath.Join(dir, "example.mjs")
	if err := os.WriteFile(script, []byte(prelude+js), 0o644); err != nil {
		t.Fatal(err)
	}

	b := setup(t, server.Options{})
	b.createSession(t, "S-demo")
	b.everyKind(t, "S-demo")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "SESSIOND_URL="+b.ts.URL)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the example ended early: %v\n%s", cmd.Wait(), stderr.String())
			}
			return l
		case <-time.After(15 * time.Second):
			t.Fatalf("the example printed nothing for 15 s\n%s", stderr.String())
		}
		return ""
	}

	for i, kind := range contract.EventTypes {
		if got, want := next(), fmt.Sprintf("event %d %s e-%s", i, kind, kind); got != want {
			t.Fatalf("line %d: %q, want %q", i, got, want)
		}
	}
	b.srv.Close()
	if got := next(); !strings.HasPrefix(got, "stream ended: SHUTTING_DOWN: ") || !strings.Contains(got, "Last-Event-ID: 16") {
		t.Fatalf("after shutdown: %q, want the stream's final message", got)
	}
	// The connection drops, EventSource retries, the closing server refuses: its own errors.
	if got := next(); got != "connection lost, reconnecting" {
		t.Fatalf("after the final message: %q, want EventSource's own error", got)
	}
	if got := next(); got != "connection closed" {
		t.Fatalf("after the refused reconnect: %q", got)
	}
	for l := range lines {
		t.Errorf("unexpected line %q", l)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
}
