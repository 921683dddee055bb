package interop

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testenv"
)

// TestRealClients starts the real sessiond binary and three example workers (echoagent, which
// asks for approval before its tool call; one claiming the sessions of agent "echoquick" with
// --skip-approval; one claiming "echoslow", which asks and then streams for seconds), then
// runs the Node tests of this directory with node --test: the AI SDK's DefaultChatTransport
// and readUIMessageStream of both majors (ai 6 as ai, ai 7 as ai7), and AG-UI's HttpAgent,
// unmodified; differential.test.mjs runs 200 generated sessions per bridge
// (SESSIOND_DIFF_SESSIONS sets another number) whose live, resumed and history views must agree.
func TestRealClients(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes and Node: skipped with -short")
	}
	node := testenv.Need(t, "node", "it runs the AI SDK and AG-UI clients", "apt-get install nodejs npm")
	pkgs := testenv.NpmPackages(t, ".")
	files := []string{"aisdk.test.mjs", "agui.test.mjs", "differential.test.mjs"}
	for _, f := range append(files, "helpers.mjs") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkgs, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := t.TempDir()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH to build sessiond with: %v", err)
	}
	for _, pkg := range []string{"./cmd/sessiond", "./examples/echoagent"} {
		build := exec.Command(goBin, "build", "-o", bin, pkg)
		build.Dir = ".."
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	url, serverLog := startServe(t, filepath.Join(bin, "sessiond"), "--data", filepath.Join(t.TempDir(), "data"))
	agentLog := &syncBuffer{}
	for _, args := range [][]string{
		{"--agent", "echoagent", "--tick", "20ms", "--chunks", "5"},
		{"--agent", "echoquick", "--skip-approval", "--tick", "50ms", "--chunks", "60"},
		{"--agent", "echoslow", "--tick", "50ms", "--chunks", "40"},
	} {
		cmd := exec.Command(filepath.Join(bin, "echoagent"), append([]string{"--server", url}, args...)...)
		cmd.Stderr = agentLog
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	test := exec.CommandContext(ctx, node, append([]string{"--test", "--test-concurrency=1"}, files...)...)
	test.Dir = pkgs
	test.Env = append(os.Environ(), "SESSIOND_URL="+url)
	out, err := test.CombinedOutput()
	if err != nil {
		t.Errorf("node --test: %v\n%s\nsessiond:\n%s\nechoagent:\n%s", err, out, serverLog.String(), agentLog.String())
		return
	}
	t.Logf("node --test:\n%s", out)
}

// startServe runs "sessiond serve" on a free loopback port and returns its URL; the process
// is killed when the test ends.
func startServe(t *testing.T, bin string, args ...string) (string, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("server did not start: %v\n%s", err, stderr.String())
	}
	var u string
	if _, err := fmt.Sscanf(line, "sessiond listening on %s", &u); err != nil {
		t.Fatalf("unexpected first line %q", line)
	}
	return u, stderr
}

// syncBuffer is a bytes.Buffer safe for os/exec's copier and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
