package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestSessionLifecycleEndToEnd runs the real binary: two servers with their own data
// directories, a session warmed, assessed, archived with --compact on the first, and restored
// from the file on the second with the same log.
func TestSessionLifecycleEndToEnd(t *testing.T) {
	urlA, _, _ := startServer(t, t.TempDir())
	urlB, _, _ := startServer(t, t.TempDir())
	cli := func(wantCode int, stdin string, args ...string) string {
		t.Helper()
		out, errOut, code := runCLI(t, stdin, args...)
		if code != wantCode {
			t.Fatalf("sessiond %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, wantCode, out, errOut)
		}
		return out + errOut
	}
	cli(0, "", "create", "--server", urlA, "--id", "S-life", "--agent", "agent-7", "--project", "demo")
	cli(0, cliEvent("S-life", 1)+"\n"+cliEvent("S-life", 2)+"\n", "append", "--server", urlA, "S-life")
	before := cli(0, "", "read", "--server", urlA, "--json", "S-life")

	out := cli(0, "", "session", "warm", "--server", urlA, "S-life", "--hours", "3")
	if !strings.Contains(out, "window started") {
		t.Errorf("warm: %s", out)
	}
	var st struct {
		Recommendation string `json:"recommendation"`
		Window         struct {
			HoursLeft float64 `json:"hoursLeft"`
		} `json:"window"`
	}
	if err := json.Unmarshal([]byte(cli(0, "", "session", "status", "--server", urlA, "--json", "S-life")), &st); err != nil || st.Recommendation != "ok" || st.Window.HoursLeft < 2.9 {
		t.Errorf("status --json: %+v, %v", st, err)
	}
	if out := cli(0, "", "session", "assess", "--server", urlA, "--task", "- one\n- two", "S-life"); !strings.Contains(out, "insufficient history") {
		t.Errorf("assess: %s", out)
	}
	var ar struct {
		Archive struct {
			Name, Path string
		} `json:"archive"`
		Compacted int `json:"compacted"`
	}
	out = cli(0, "", "session", "archive", "--server", urlA, "--json", "--compact", "--done", "two messages", "--next", "more", "S-life")
	if err := json.Unmarshal([]byte(out), &ar); err != nil || ar.Compacted != 2 || !strings.HasPrefix(ar.Archive.Name, "RC-") {
		t.Fatalf("archive --json: %s (%v)", out, err)
	}
	if filepath.Base(filepath.Dir(ar.Archive.Path)) != "p-demo" {
		t.Errorf("archive written to %s", ar.Archive.Path)
	}
	if out := cli(0, "", "session", "restore", "--server", urlA, "--list", "--project", "demo"); !strings.Contains(out, ar.Archive.Name) {
		t.Errorf("restore --list: %s", out)
	}
	if out := cli(1, "", "session", "archive", "--server", urlA, "S-life"); !strings.Contains(out, "INVALID_SESSION_STATE") {
		t.Errorf("archiving twice: %s", out)
	}

	// The other host: restore from the file; the log is the same, byte for byte.
	if out := cli(0, "", "session", "restore", "--server", urlB, "--file", ar.Archive.Path); !strings.Contains(out, "restored S-life") {
		t.Errorf("restore --file: %s", out)
	}
	if after := cli(0, "", "read", "--server", urlB, "--json", "S-life"); after != before {
		t.Errorf("restored log differs:\n%s\nwant\n%s", after, before)
	}
	if out := cli(1, "", "session", "restore", "--server", urlB, "--project", "demo"); !strings.Contains(out, "RESTORE_CONFLICT") {
		t.Errorf("restoring twice: %s", out)
	}
	// Back on the first host, in place over the compacted session.
	if out := cli(0, "", "session", "restore", "--server", urlA, ar.Archive.Name); !strings.Contains(out, "over its compacted copy") {
		t.Errorf("restore in place: %s", out)
	}
	if after := cli(0, "", "read", "--server", urlA, "--json", "S-life"); after != before {
		t.Errorf("log restored in place differs")
	}
	if out := cli(0, "", "session", "heartbeat", "--server", urlA, "S-life"); !strings.Contains(out, "status paused") {
		t.Errorf("heartbeat: %s", out)
	}
	if out := cli(2, "", "session", "bogus"); !strings.Contains(out, "unknown verb") {
		t.Errorf("unknown verb: %s", out)
	}
}
