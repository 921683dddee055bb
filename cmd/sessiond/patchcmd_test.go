package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/server/servertest"
)

// cliAgainstServer starts a server on a fresh SQLite store for the test and returns a runner of
// the CLI in process against it: the combined output and the exit code.
func cliAgainstServer(t *testing.T) func(stdin string, args ...string) (string, int) {
	t.Helper()
	url := servertest.Start(t, server.Options{})
	return func(stdin string, args ...string) (string, int) {
		var out, errb bytes.Buffer
		code := run(append([]string{args[0], "--server", url}, args[1:]...), strings.NewReader(stdin), &out, &errb)
		return out.String() + errb.String(), code
	}
}

// TestPatchCommand runs "sessiond patch" in process against a real server: each case runs the
// command and checks its exit code, what it prints, and the snapshot the server then holds.
func TestPatchCommand(t *testing.T) {
	cli := cliAgainstServer(t)
	if out, code := cli("", "create", "--id", "S-p", "--agent", "a", "--snapshot-mode", "chat"); code != 0 {
		t.Fatalf("create: %d %s", code, out)
	}
	file := filepath.Join(t.TempDir(), "snapshot.json")
	os.WriteFile(file, []byte(`{"mode":"work","modelId":"from-file","capabilities":{"steering":true}}`), 0o600)
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"mode":"work","modelId":"m","capabilities":{"flying":true}}`), 0o600)

	tests := []struct {
		name  string
		stdin string
		args  []string
		code  int
		out   string // printed (stdout and stderr)
		get   string // in `sessiond get --json` afterwards
	}{
		{"enable after the id", "", []string{"patch", "S-p", "--enable", "resume,threadForking"}, 0,
			"S-p: snapshot mode chat, model unknown-model, capabilities text,tools,mcp,skills,approval,usage,resume,threadForking,editAndRerun,summary", `"resume":true`},
		{"disable and model", "", []string{"patch", "--disable", "approval", "--model", "m-2", "S-p"}, 0, "model m-2", `"approval":false`},
		{"mode and profile", "", []string{"patch", "--mode", "work", "--permission-profile", "auto-approve", "S-p"}, 0, "snapshot mode work", `"permissionProfile":"auto-approve"`},
		{"whole snapshot from a file", "", []string{"patch", "--snapshot", file, "S-p"}, 0, "capabilities text,steering", `"modelId":"from-file"`},
		{"whole snapshot from stdin, JSON out", `{"mode":"chat","modelId":"stdin","capabilities":{"approval":true}}`, []string{"patch", "--json", "--snapshot", "-", "S-p"}, 0, `"modelId":"stdin"`, `"approval":true`},
		{"unknown capability", "", []string{"patch", "--enable", "flying", "S-p"}, 2, `unknown capability "flying"`, `"modelId":"stdin"`},
		{"invalid snapshot file", "", []string{"patch", "--snapshot", bad, "S-p"}, 2, "/capabilities/flying: unknown field", `"modelId":"stdin"`},
		{"server refuses the mode", "", []string{"patch", "--mode", "code", "S-p"}, 1, "/snapshot/mode", `"modelId":"stdin"`},
		{"nothing to change", "", []string{"patch", "S-p"}, 2, "say what to change", `"modelId":"stdin"`},
		{"file and edits", "", []string{"patch", "--snapshot", file, "--enable", "resume", "S-p"}, 2, "give it alone", `"modelId":"stdin"`},
		{"bad gate", "", []string{"patch", "--enable", "resume", "--gate", "boss", "S-p"}, 1, "/updated_by_gate", `"modelId":"stdin"`},
		{"unknown session", "", []string{"patch", "--enable", "resume", "S-none"}, 1, "SESSION_NOT_FOUND", `"modelId":"stdin"`},
		{"missing session", "", []string{"patch", "--enable", "resume"}, 2, "missing <session-id>", `"modelId":"stdin"`},
		{"multitask alone", "", []string{"patch", "S-p", "--multitask", "enqueue"}, 0, "S-p: multitask enqueue", `"multitask":"enqueue"`},
		{"multitask and model", "", []string{"patch", "S-p", "--multitask", "interrupt", "--model", "m-3"}, 0, "S-p: multitask interrupt (a run queued while another is active)\nS-p: snapshot mode chat, model m-3", `"multitask":"interrupt"`},
		{"multitask, JSON out", "", []string{"patch", "S-p", "--json", "--multitask", "reject"}, 0, `"multitask":"reject"`, `"modelId":"m-3"`},
		{"server refuses the strategy", "", []string{"patch", "S-p", "--multitask", "later"}, 1, "/multitask", `"multitask":"reject"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, code := cli(tc.stdin, tc.args...)
			if code != tc.code || !strings.Contains(out, tc.out) {
				t.Errorf("exit %d, output %q; want exit %d and %q", code, out, tc.code, tc.out)
			}
			if got, _ := cli("", "get", "--json", "S-p"); !strings.Contains(got, tc.get) {
				t.Errorf("session afterwards: %s; want %s in it", got, tc.get)
			}
		})
	}
}

// TestAppendMultitask runs "sessiond append --multitask" in process against a real server: the
// strategy goes with the append, the text output names an interrupted run, and --json prints
// the server's answer as it is.
func TestAppendMultitask(t *testing.T) {
	cli := cliAgainstServer(t)
	const sid = "S-m"
	if out, code := cli("", "create", "--id", sid, "--agent", "a"); code != 0 {
		t.Fatalf("create: %d %s", code, out)
	}
	turn := func(n int, runID string) string {
		mid := fmt.Sprintf("m%d", n)
		return runEvent(sid, 2*n, "message", "", `{"messageId":"`+mid+`","role":"user","operation":"append","parts":["go"]}`) +
			runEvent(sid, 2*n+1, "status", `"runId":"`+runID+`","sourceMessageId":"`+mid+`"`, `{"status":"queued"}`)
	}
	tests := []struct {
		name  string
		stdin string
		args  []string
		code  int
		out   []string // in the output, in order
	}{
		{"the first run", turn(1, "r1"), []string{"append", sid}, 0, []string{"2 accepted, 0 duplicate; last sequence 1"}},
		{"no strategy: rejected", turn(2, "r2"), []string{"append", sid}, 1, []string{"INVALID_SESSION_STATE", "?multitask=enqueue"}},
		{"unknown strategy", turn(2, "r2"), []string{"append", "--multitask", "later", sid}, 1, []string{"MALFORMED", "reject, enqueue or interrupt"}},
		{"enqueue", turn(2, "r2"), []string{"append", "--multitask", "enqueue", sid}, 0, []string{"2 accepted, 0 duplicate; last sequence 3"}},
		{"interrupt", turn(3, "r3"), []string{"append", "--multitask", "interrupt", sid}, 0, []string{"interrupted run r1 first (2 events)", "2 accepted, 0 duplicate; last sequence 7"}},
		{"interrupt, JSON out", turn(4, "r4"), []string{"append", "--json", "--multitask", "interrupt", sid}, 0,
			[]string{`{"results":[{"eventId":"rt-8","sequence":10,"status":"accepted"},`, `"lastSequence":11,"interrupted":{"runId":"r2","results":[`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, code := cli(tc.stdin, tc.args...)
			if code != tc.code || !holds(out, tc.out) {
				t.Errorf("exit %d, output %q; want exit %d and %q", code, out, tc.code, tc.out)
			}
		})
	}
}
