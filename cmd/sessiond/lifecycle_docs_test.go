package main

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/server/servertest"
	"github.com/sessiond/sessiond/session"
)

// docsServer serves a real server with an archive directory, its clock at 13:00 on the day of
// the examples (set moves it), holding session S-demo with one event; the CLI reaches it
// through SESSIOND_SERVER, so the documents' commands run as written.
func docsServer(t *testing.T) (url string, set func(time.Time)) {
	t.Helper()
	var clock atomic.Int64
	set = func(at time.Time) { clock.Store(at.UnixNano()) }
	set(time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC))
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	url = servertest.Start(t, server.Options{}, session.Options{ArchiveDir: t.TempDir(), Clock: session.ClockFunc(now)})
	t.Setenv("SESSIOND_SERVER", url)
	var out, errb bytes.Buffer
	if code := run([]string{"create", "--id", "S-demo", "--agent", "demo-agent"}, nil, &out, &errb); code != 0 {
		t.Fatalf("create: %s", errb.String())
	}
	if code := run([]string{"append", "S-demo"}, strings.NewReader(cliEvent("S-demo", 1)+"\n"), &out, &errb); code != 0 {
		t.Fatalf("append: %s", errb.String())
	}
	return url, set
}

// section returns the part of a document from the heading that starts with title to the next
// heading of the same or a higher level (a line in a code fence, such as a "# →" expectation,
// is no heading).
func section(t *testing.T, doc, title string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", doc))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, title)
	if i < 0 {
		t.Fatalf("%s has no heading %q", doc, title)
	}
	level := strings.Count(title[:strings.Index(title, " ")], "#")
	rest := text[i+len(title):]
	heading := regexp.MustCompile(`^#{1,6} `)
	inFence := false
	for at := 0; at < len(rest); {
		line, _, _ := strings.Cut(rest[at:], "\n")
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		} else if h := heading.FindString(line); h != "" && !inFence && len(h)-1 <= level {
			return rest[:at]
		}
		at += len(line) + 1
	}
	return rest
}

// TestLifecycleDocWayOutExample runs the example of docs/lifecycle.md "Every refusal names a way
// on" line by line, as written, and checks each answer is the one its comment gives.
func TestLifecycleDocWayOutExample(t *testing.T) {
	_, set := docsServer(t)
	sec := section(t, "lifecycle.md", "### Every refusal names a way on")
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(sec)
	if block == nil {
		t.Fatal("no sh block in the section")
	}
	lines := strings.Split(strings.TrimSpace(block[1]), "\n")
	want := []struct {
		code int
		out  []string
	}{
		{0, []string{"archived S-demo"}},
		{1, []string{"INVALID_SESSION_STATE", "restore it first (sessiond session restore RC-20260301T130000.000Z-S-demo.json"}},
		{0, []string{"reactivated (its log was still in the store)", "status paused"}},
		{0, []string{"archived S-demo"}},
	}
	if len(lines) != len(want) {
		t.Fatalf("the example has %d commands, the test knows %d: update both", len(lines), len(want))
	}
	for i, line := range lines {
		cmd, comment, _ := strings.Cut(line, "#")
		args := strings.Fields(cmd)
		if args[0] != "sessiond" {
			t.Fatalf("line %d is not a sessiond command: %s", i+1, line)
		}
		set(time.Date(2026, 3, 1, 13, i, 0, 0, time.UTC)) // a minute a line: archives get names of their own
		var out, errb bytes.Buffer
		code := run(args[1:], nil, &out, &errb)
		got := out.String() + errb.String()
		for _, w := range want[i].out {
			if code != want[i].code || !strings.Contains(got, w) {
				t.Errorf("%s: exit %d, output %q; want exit %d and %q (the comment says %q)", cmd, code, got, want[i].code, w, strings.TrimSpace(comment))
			}
		}
	}
}

// TestPatchDocExamples runs every `sessiond patch` command that docs/api.md and
// docs/lifecycle.md show, and every curl PATCH of docs/api.md's PATCH section, against a real
// server: each must succeed.
func TestPatchDocExamples(t *testing.T) {
	url, _ := docsServer(t)
	file := filepath.Join(t.TempDir(), "snapshot.json")
	os.WriteFile(file, []byte(`{"mode":"work","modelId":"m","capabilities":{"approval":true}}`), 0o600)
	var cmds []string
	for _, doc := range []string{"api.md", "lifecycle.md"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "docs", doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile("`(sessiond patch [^`]*)`").FindAllStringSubmatch(string(b), -1) {
			cmds = append(cmds, m[1])
		}
	}
	if len(cmds) < 3 {
		t.Fatalf("found %d sessiond patch examples: %q", len(cmds), cmds)
	}
	for _, c := range cmds {
		args := strings.Fields(strings.ReplaceAll(c, "FILE", file))
		var out, errb bytes.Buffer
		if code := run(args[1:], nil, &out, &errb); code != 0 {
			t.Errorf("%s: exit %d: %s", c, code, errb.String())
		}
	}
	sec := section(t, "api.md", "### `PATCH /v1/sessions/{id}`")
	curls := regexp.MustCompile(`(?m)^curl -s -X PATCH localhost:7420(\S+) --json '([^']*)'$`).FindAllStringSubmatch(sec, -1)
	if len(curls) < 2 {
		t.Fatalf("found %d curl PATCH examples", len(curls))
	}
	for _, c := range curls {
		req, _ := http.NewRequest("PATCH", url+c[1], strings.NewReader(c[2]))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("curl PATCH %s %s: %d", c[1], c[2], resp.StatusCode)
		}
	}
}
