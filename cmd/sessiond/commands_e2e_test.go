package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// runEvent is an event of run r1 of session sid, as a runtime appends it; n numbers its ids.
func runEvent(sid string, n int, eventType, header, payload string) string {
	if header != "" {
		header = "," + header
	}
	return fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"rt-%d","sessionId":%q,"sequence":0,"idempotencyKey":"rt-%d","occurredAt":"2026-03-01T12:00:%02dZ","eventType":%q%s,"payload":%s}`+"\n",
		n, sid, n, n, eventType, header, payload)
}

// startRun creates session sid with the CLI (the work preset: steering included) and appends
// a user message and run r1 running.
func startRun(t *testing.T, url, sid string) {
	t.Helper()
	if out, errOut, code := runCLI(t, "", "create", "--server", url, "--id", sid, "--agent", "agent-1"); code != 0 {
		t.Fatalf("create: %d %s %s", code, out, errOut)
	}
	nd := runEvent(sid, 1, "message", "", `{"messageId":"m1","role":"user","operation":"append","parts":["go"]}`) +
		runEvent(sid, 2, "status", `"runId":"r1","sourceMessageId":"m1"`, `{"status":"running","startedAt":"2026-03-01T12:00:02Z"}`)
	if out, errOut, code := runCLI(t, nd, "append", "--server", url, sid); code != 0 {
		t.Fatalf("append: %d %s %s", code, out, errOut)
	}
}

// eventCount is the number of events in the session's log, read with the CLI.
func eventCount(t *testing.T, url, sid string) int {
	t.Helper()
	out, errOut, code := runCLI(t, "", "read", sid, "--server", url, "--json")
	if code != 0 {
		t.Fatalf("read: %d %s", code, errOut)
	}
	return strings.Count(out, "\n")
}

// commandResult is the part of an AgentSessionCommandResult the tests look at.
type commandResult struct {
	IdempotencyKey string   `json:"idempotencyKey"`
	Outcome        string   `json:"outcome"`
	ResultEventIDs []string `json:"resultEventIds"`
	Termination    string   `json:"termination"`
	Error          *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// TestFlagsAfterArgumentsEndToEnd runs the real binary against a real server: flags given
// after the positional arguments take effect, the safety flag --expected-sequence included.
func TestFlagsAfterArgumentsEndToEnd(t *testing.T) {
	url, _, _ := startServer(t, filepath.Join(t.TempDir(), "data"))
	startRun(t, url, "S-flags")

	// read --json after the id prints JSON, one event per line.
	out, errOut, code := runCLI(t, "", "read", "S-flags", "--json", "--server", url)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !json.Valid([]byte(lines[0])) || !strings.HasPrefix(lines[1], `{"contract":"AgentSessionEvent"`) {
		t.Fatalf("read S-flags --json: %d %q %s", code, out, errOut)
	}
	// --limit after the id.
	if out, _, _ := runCLI(t, "", "read", "S-flags", "--server", url, "--json", "--limit", "1"); strings.Count(out, "\n") != 1 {
		t.Errorf("read --limit 1 after the id printed %q", out)
	}
	// A wrong --expected-sequence after the positional arguments makes the command conditional:
	// refused, nothing appended.
	out, errOut, code = runCLI(t, "", "cmd", "steer", "S-flags", "r1", "be", "brief", "--expected-sequence", "0", "--server", url)
	if code != 1 || !strings.Contains(errOut, "SEQUENCE_CONFLICT") || !strings.Contains(errOut, "expectedSequence is 0 but the log ends at 1") {
		t.Fatalf("steer with a stale --expected-sequence after the arguments: %d %q %q", code, out, errOut)
	}
	if n := eventCount(t, url, "S-flags"); n != 2 {
		t.Fatalf("the refused command appended: %d events", n)
	}
	// The right one is accepted, and the text stops at the flags.
	out, errOut, code = runCLI(t, "", "cmd", "steer", "S-flags", "r1", "be", "brief", "--expected-sequence", "1", "--server", url, "--json")
	var res commandResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Outcome != "accepted" {
		t.Fatalf("steer with the right --expected-sequence: %d %q %q", code, out, errOut)
	}
	last, _, _ := runCLI(t, "", "read", "S-flags", "--after", "1", "--json", "--server", url)
	if !strings.Contains(last, `"text":"be brief"`) {
		t.Errorf("steer event: %s", last)
	}
	// Text that looks like a flag goes after --.
	if out, errOut, code := runCLI(t, "", "cmd", "steer", "S-flags", "r1", "--server", url, "--", "-v", "is", "too", "verbose"); code != 0 {
		t.Fatalf("steer after --: %d %q %q", code, out, errOut)
	}
	if last, _, _ := runCLI(t, "", "read", "S-flags", "--after", "2", "--json", "--server", url); !strings.Contains(last, `"text":"-v is too verbose"`) {
		t.Errorf("steer after --: %s", last)
	}
	// An unknown flag after the arguments sends nothing.
	if _, errOut, code := runCLI(t, "", "cmd", "stop", "S-flags", "r1", "--server", url, "--force"); code != 2 || !strings.Contains(errOut, "flag provided but not defined: -force") {
		t.Errorf("unknown flag: %d %q", code, errOut)
	}
	if n := eventCount(t, url, "S-flags"); n != 4 {
		t.Errorf("%d events, want 4", n)
	}
}

// resendHint finds the command line a hint says to run ("  sessiond cmd ... --key K") and
// returns its arguments after "sessiond".
func resendHint(t *testing.T, stderr string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^  sessiond (.*)$`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no command line to resend in %q", stderr)
	}
	var args []string
	for _, w := range strings.Fields(m[1]) {
		if strings.ContainsAny(w, `'"\`) {
			t.Fatalf("the test cannot split quoted words: %q", m[1])
		}
		args = append(args, w)
	}
	return args
}

// TestCommandResendWithKey checks --key and the printed key: the same command twice with the
// same key answers the same result and appends once; a stop --wait that times out prints the
// command line to resend it with its key, and that line, run as printed, waits again and
// reports the stop confirmed without a second stop event.
func TestCommandResendWithKey(t *testing.T) {
	url, _, _ := startServer(t, filepath.Join(t.TempDir(), "data"))
	startRun(t, url, "S-key")

	var first, second commandResult
	out, errOut, code := runCLI(t, "", "cmd", "steer", "S-key", "r1", "focus", "--key", "steer-1", "--server", url, "--json")
	if code != 0 || json.Unmarshal([]byte(out), &first) != nil || first.Outcome != "accepted" || first.IdempotencyKey != "steer-1" {
		t.Fatalf("first steer: %d %q %q", code, out, errOut)
	}
	out, errOut, code = runCLI(t, "", "cmd", "steer", "S-key", "r1", "focus", "--key", "steer-1", "--server", url, "--json")
	if code != 0 || json.Unmarshal([]byte(out), &second) != nil || second.Outcome != "duplicate" ||
		strings.Join(second.ResultEventIDs, ",") != strings.Join(first.ResultEventIDs, ",") {
		t.Fatalf("the same steer again: %d %q %q; first %+v", code, out, errOut, first)
	}
	if n := eventCount(t, url, "S-key"); n != 3 {
		t.Fatalf("%d events after the same steer twice, want 3 (one steer event)", n)
	}

	// stop --wait: the runtime does not confirm in time. The command prints its key and the
	// line that resends it.
	out, errOut, code = runCLI(t, "", "cmd", "stop", "S-key", "r1", "--wait", "200ms", "--server", url)
	if code != 1 || !strings.Contains(errOut, "STOP_TIMEOUT") || !strings.Contains(errOut, "hint: send the same command again with its idempotency key ") {
		t.Fatalf("stop --wait: %d %q %q", code, out, errOut)
	}
	resend := resendHint(t, errOut)
	if !strings.Contains(strings.Join(resend, " "), "cmd stop S-key r1 --wait 200ms --server "+url+" --key ") {
		t.Fatalf("resend line %q", resend)
	}
	stopEvents := eventCount(t, url, "S-key")
	// The runtime confirms; the resend, as printed, reports it and appends nothing.
	nd := runEvent("S-key", 3, "status", `"runId":"r1","sourceMessageId":"m1"`, `{"status":"stopped","startedAt":"2026-03-01T12:00:02Z","stoppedAt":"2026-03-01T12:00:03Z","durationMs":1000}`)
	if _, errOut, code := runCLI(t, nd, "append", "S-key", "--server", url); code != 0 {
		t.Fatalf("runtime's stopped: %s", errOut)
	}
	out, errOut, code = runCLI(t, "", append(resend, "--json")...)
	var stopped commandResult
	if code != 0 || json.Unmarshal([]byte(out), &stopped) != nil || stopped.Outcome != "duplicate" || stopped.Termination != "confirmed" {
		t.Fatalf("resend as printed: %d %q %q", code, out, errOut)
	}
	if n := eventCount(t, url, "S-key"); n != stopEvents+1 {
		t.Errorf("%d events after the resend, want %d (the runtime's stopped only)", n, stopEvents+1)
	}
}

// TestCommandTimeoutPrintsKey sends a command through a proxy that forwards it to the server
// but then answers too late, or with a server error: the CLI does not know whether the command
// was applied, prints its key (and, with --json, a JSON object holding it), and the printed
// line, run as is, gets the first result as a duplicate without applying it again.
func TestCommandTimeoutPrintsKey(t *testing.T) {
	url, _, _ := startServer(t, filepath.Join(t.TempDir(), "data"))
	for i, tc := range []struct {
		name    string
		lose    func(w http.ResponseWriter, r *http.Request) // how the proxy loses the first answer
		code    int
		wantErr string
	}{
		{"answer too late", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}, 2, "context deadline exceeded"},
		{"server error", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, `{"error":{"code":"INTERNAL","message":"the upstream connection broke"}}`)
		}, 1, "sessiond cmd: INTERNAL: the upstream connection broke"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sid := fmt.Sprintf("S-lost-%d", i)
			startRun(t, url, sid)
			var commands atomic.Int64
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				req, _ := http.NewRequest(r.Method, url+r.URL.RequestURI(), bytes.NewReader(body))
				req.Header = r.Header.Clone()
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadGateway)
					return
				}
				defer resp.Body.Close()
				answer, _ := io.ReadAll(resp.Body)
				if strings.HasSuffix(r.URL.Path, "/commands") && commands.Add(1) == 1 {
					tc.lose(w, r) // the first command is applied, but its answer is lost
					return
				}
				w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
				w.WriteHeader(resp.StatusCode)
				w.Write(answer)
			}))
			defer proxy.Close()

			out, errOut, code := runCLI(t, "", "cmd", "steer", sid, "r1", "hurry", "--server", proxy.URL, "--timeout", "500ms", "--json")
			var lost unanswered
			if code != tc.code || json.Unmarshal([]byte(out), &lost) != nil || lost.IdempotencyKey == "" || !strings.Contains(lost.Resend, "--key "+lost.IdempotencyKey) {
				t.Fatalf("lost answer: exit %d (want %d) %q %q", code, tc.code, out, errOut)
			}
			if !strings.Contains(errOut, tc.wantErr) || !strings.Contains(errOut, "it used idempotency key "+lost.IdempotencyKey) {
				t.Errorf("stderr: %q", errOut)
			}
			resend := resendHint(t, errOut)
			if got := "sessiond " + strings.Join(resend, " "); got != lost.Resend {
				t.Errorf("stderr's line %q differs from the JSON's %q", got, lost.Resend)
			}
			if n := eventCount(t, url, sid); n != 3 {
				t.Fatalf("%d events: the command should have been applied once", n)
			}
			out, errOut, code = runCLI(t, "", resend...)
			var dup commandResult
			if code != 0 || json.Unmarshal([]byte(out), &dup) != nil || dup.Outcome != "duplicate" || dup.IdempotencyKey != lost.IdempotencyKey {
				t.Fatalf("resend as printed: %d %q %q", code, out, errOut)
			}
			if n := eventCount(t, url, sid); n != 3 {
				t.Errorf("%d events after the resend, want 3", n)
			}
		})
	}
}
