package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testenv"
)

// The end-to-end tests run the real binary: this test binary re-executes itself as sessiond
// when SESSIOND_AS_MAIN is set.
func TestMain(m *testing.M) {
	if os.Getenv("SESSIOND_AS_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func sessiond(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "SESSIOND_AS_MAIN=1")
	return cmd
}

// startServer runs "sessiond serve" with its data in dir on a free loopback port and returns
// its URL (see startServe).
func startServer(t *testing.T, data string) (string, *exec.Cmd, *testenv.SyncBuffer) {
	t.Helper()
	return startServe(t, "--data", data)
}

func runCLI(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := sessiond(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func cliEvent(sid string, n int) string {
	return fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"e%d","sessionId":%q,"sequence":0,"idempotencyKey":"k%d","occurredAt":"2026-03-01T12:00:00Z","eventType":"message","payload":{"messageId":"m%d","role":"user","operation":"append","parts":["line %d"]}}`, n, sid, n, n, n)
}

func TestServeAndClientEndToEnd(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	url, srv, srvErr := startServer(t, data)

	out, errOut, code := runCLI(t, "", "create", "--server", url, "--id", "S-e2e", "--agent", "agent-7", "--json")
	if code != 0 || !strings.Contains(out, `"session_id":"S-e2e"`) {
		t.Fatalf("create: %d %s %s", code, out, errOut)
	}
	var ndjson strings.Builder
	for i := 0; i < 3; i++ {
		ndjson.WriteString(cliEvent("S-e2e", i) + "\n")
	}
	out, errOut, code = runCLI(t, ndjson.String(), "append", "--server", url, "S-e2e")
	if code != 0 || !strings.Contains(out, "3 accepted, 0 duplicate; last sequence 2") {
		t.Fatalf("append: %d %q %s", code, out, errOut)
	}
	// Appending the same lines again is safe: all duplicates.
	out, _, code = runCLI(t, ndjson.String(), "append", "--server", url, "S-e2e")
	if code != 0 || !strings.Contains(out, "0 accepted, 3 duplicate") {
		t.Fatalf("append again: %d %q", code, out)
	}
	// A bad event: exit 1 and the problem's pointer on stderr; nothing written.
	bad := strings.Replace(cliEvent("S-e2e", 9), `"role":"user"`, `"role":"nobody"`, 1)
	_, errOut, code = runCLI(t, bad, "append", "--server", url, "S-e2e")
	if code != 1 || !strings.Contains(errOut, "CONTRACT_VIOLATION") || !strings.Contains(errOut, "/0/payload/role") {
		t.Fatalf("bad append: %d %q", code, errOut)
	}
	out, _, code = runCLI(t, "", "read", "--server", url, "--json", "S-e2e")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 {
		t.Fatalf("read: %d %q", code, out)
	}
	for i, l := range lines {
		var e struct{ Sequence int64 }
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Sequence != int64(i) {
			t.Errorf("read line %d: %s", i, l)
		}
	}
	out, _, _ = runCLI(t, "", "read", "--server", url, "S-e2e")
	if !strings.Contains(out, "message") || !strings.Contains(out, "user: line 1") {
		t.Errorf("human read output: %q", out)
	}

	// tail follows the live stream until interrupted.
	tail := sessiond(context.Background(), "tail", "--server", url, "--json", "S-e2e")
	var tailOut testenv.SyncBuffer
	tail.Stdout = &tailOut
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	runCLI(t, cliEvent("S-e2e", 3)+"\n", "append", "--server", url, "S-e2e")
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(tailOut.String(), "\n") < 4 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	tail.Process.Signal(syscall.SIGINT)
	if err := tail.Wait(); err != nil {
		t.Errorf("tail exit: %v", err)
	}
	if n := strings.Count(tailOut.String(), "\n"); n != 4 {
		t.Errorf("tail printed %d events, want 4:\n%s", n, tailOut.String())
	}

	// Graceful shutdown on SIGTERM, then a restart on the same data keeps everything.
	srv.Process.Signal(syscall.SIGTERM)
	if err := srv.Wait(); err != nil {
		t.Fatalf("serve exit: %v\n%s", err, srvErr)
	}
	if !strings.Contains(srvErr.String(), "stopped") {
		t.Errorf("no shutdown log: %s", srvErr)
	}
	url, _, _ = startServer(t, data)
	out, _, code = runCLI(t, "", "get", "--server", url, "S-e2e")
	if code != 0 || !strings.Contains(out, "last sequence 3") {
		t.Errorf("after restart: %d %q", code, out)
	}
}

func TestServeRefusesNonLoopback(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--addr", "0.0.0.0:0"}, "hint: pass --auth and make a key with sessiond keys create"},
		{[]string{"--addr", "0.0.0.0:0", "--auth"}, "over plain HTTP\nhint: serve TLS (--tls-cert, --tls-key), or put a TLS-terminating proxy in front and pass --insecure-http"},
		{[]string{"--metrics-addr", "0.0.0.0:0", "--auth"}, "the metrics and admin listeners have no authentication"},
		{[]string{"--oidc-issuer", "https://idp.example"}, "--oidc-issuer and --oidc-audience go together"},
		{[]string{"--oidc-issuer", "https://idp.example", "--oidc-audience", "s"}, "--oidc-issuer needs --auth"},
		{[]string{"--cors-origin", "https://app.example/x"}, "is not an origin"},
	} {
		_, errOut, code := runCLI(t, "", append([]string{"serve", "--data", t.TempDir()}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("serve %v: %d %q, want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

func TestClientWithoutServer(t *testing.T) {
	_, errOut, code := runCLI(t, "", "get", "--server", "http://127.0.0.1:1", "S-x")
	if code != 2 || !strings.Contains(errOut, "hint:") {
		t.Fatalf("no server: %d %q", code, errOut)
	}
	_, errOut, code = runCLI(t, "", "nonsense")
	if code != 2 || !strings.Contains(errOut, "sessiond help") {
		t.Fatalf("unknown command: %d %q", code, errOut)
	}
}
