package interop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
	url, serverLog := testenv.Serve(t, filepath.Join(bin, "sessiond"), "--data", filepath.Join(t.TempDir(), "data"))
	agentLog := &testenv.SyncBuffer{}
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
