//go:build unix

package main

// Docs as tests: the README's tours, docs/runtime.md's walk-through and every ```sh block of
// docs/api.md, docs/forks.md and docs/deploy.md (docpages_test.go) are run exactly as written,
// and what they claim to print is checked, so that the documentation cannot drift from what
// the binary does.
//
// Extraction rules (kept simple on purpose, so that a writer knows what the test does):
//
//   - A document section starts at a heading line ("# …", "## …", outside code fences) and
//     ends at the next heading. Every ```sh block of the section is run, in order. A test that
//     runs a whole document runs every ```sh block of it, in order.
//   - In a block, a line that starts in column 0 and not with '#' starts a command. A line that
//     starts with a space or a tab continues the command above (sh reads it as the rest of a
//     quoted string or of a line ended with '\'); the lines are joined with newlines, so sh
//     sees the command as written. A trailing "# comment" is left to sh, which ignores it.
//   - "# → TEXT" is an expectation about the output (stdout and stderr) of the command above.
//     A line that starts with '#' and two spaces right after an expectation continues it (its
//     text is appended without the '#' and the surrounding spaces). Other '#' lines are prose.
//     TEXT may elide with "...": its pieces must appear in the output in order. Several
//     expectations of one command must hold in order too.
//   - A command ending in '&' runs in the background until the document is done, and so does
//     a "sessiond serve" (a person runs it in a terminal of its own). Its expectations must
//     hold by then (the test waits up to 15 s for them); it is then interrupted.
//   - Every other command must exit with status 0 within 30 s, and its expectations must hold.
//     Two retries stand in for a person at the keyboard: a read-only command (sessiond view,
//     read, get, validate; curl without a request body) whose expectations do not hold yet is
//     run again for up to 15 s (the example agent works at its own pace); a sessiond cmd
//     answered SEQUENCE_CONFLICT is sent again (docs/runtime.md §5 says to read the head again
//     and resend).
//
// Substitutions, the only differences from a person typing the commands:
//
//   - "go run ./cmd/sessiond" and "go run ./examples/echoagent" are the binaries built from
//     this checkout (what go run would build and run); "sessiond" is that binary too (it is
//     first on the commands' PATH, as if installed).
//   - "go build -o NAME ./PKG" is run from the checkout's root with NAME put in the working
//     directory of the commands.
//   - "serve" listens on a free port: "--addr 127.0.0.1:0" is added, or replaces the --addr
//     the document gives; the commands after it wait until it listens. Their
//     "localhost:7420", "127.0.0.1:7420" and the document's --addr become that address, and
//     SESSIOND_SERVER names it for the CLI and the example agent, whose commands name none.
//   - A test may rewrite what names an outside resource (docs/deploy.md's database: see
//     TestDeployDoc), and says how in its comment.
//
// Each document runs in a fresh temporary working directory. The README's CLI tour runs "in
// the repository's root": there, examples/ is a link to the checkout's examples/ directory.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testenv"
)

// docCommand is one command of a ```sh block of a document.
type docCommand struct {
	line       int      // where it starts in the document (1-based)
	text       string   // as sh reads it: continuation lines joined with newlines
	background bool     // it ended with '&' (removed from text)
	expect     []string // its "# →" expectations
}

func (c docCommand) String() string { return fmt.Sprintf("line %d: %s", c.line, c.text) }

// backgroundSuffix is a trailing '&' (not "&&"), with an optional comment after it.
var backgroundSuffix = regexp.MustCompile(`(^|[^&])&[ \t]*(#[^\n]*)?$`)

// parseSection returns the commands of each ```sh block of the document's section that starts
// at the heading line heading (of the whole document when heading is empty), following the
// rules at the top of this file.
func parseSection(doc, heading string) ([][]docCommand, error) {
	lines := strings.Split(doc, "\n")
	var blocks [][]docCommand
	whole := heading == ""
	inSection, inFence, inSh := whole, false, false
	var block []docCommand
	inExpect := false
	found := whole
	for i, l := range lines {
		n := i + 1
		if strings.HasPrefix(l, "```") {
			switch {
			case !inFence:
				inFence, inSh = true, inSection && strings.TrimSpace(l) == "```sh"
				block, inExpect = nil, false
			default:
				if inSh {
					blocks = append(blocks, block)
				}
				inFence, inSh = false, false
			}
			continue
		}
		if !inFence {
			if strings.HasPrefix(l, "#") && !whole {
				if inSection {
					break
				}
				if strings.TrimSpace(l) == heading {
					inSection, found = true, true
				}
			}
			continue
		}
		if !inSh {
			continue
		}
		last := len(block) - 1
		switch {
		case strings.TrimSpace(l) == "":
			inExpect = false
		case strings.HasPrefix(l, "# → "):
			if last < 0 {
				return nil, fmt.Errorf("line %d: an expectation before any command", n)
			}
			block[last].expect = append(block[last].expect, strings.TrimSpace(strings.TrimPrefix(l, "# → ")))
			inExpect = true
		case inExpect && strings.HasPrefix(l, "#  "):
			e := &block[last].expect[len(block[last].expect)-1]
			*e += strings.TrimSpace(l[1:])
		case strings.HasPrefix(l, "#"):
			inExpect = false
		case l[0] == ' ' || l[0] == '\t':
			if last < 0 || inExpect {
				return nil, fmt.Errorf("line %d: an indented line that continues no command", n)
			}
			block[last].text += "\n" + l
		default:
			block = append(block, docCommand{line: n, text: l})
			inExpect = false
		}
	}
	if !found {
		return nil, fmt.Errorf("no heading %q", heading)
	}
	if inFence {
		return nil, errors.New("a code fence is not closed")
	}
	for _, b := range blocks {
		for i := range b {
			if m := backgroundSuffix.FindStringSubmatchIndex(b[i].text); m != nil {
				b[i].text = strings.TrimRight(b[i].text[:m[3]], " \t")
				b[i].background = true
			}
		}
	}
	return blocks, nil
}

// holds reports whether the expectations hold for out: each one's "..."-separated pieces
// appear in out in order, and each expectation after the one before.
func holds(out string, expect []string) bool {
	pos := 0
	for _, e := range expect {
		for _, piece := range strings.Split(e, "...") {
			i := strings.Index(out[pos:], piece)
			if i < 0 {
				return false
			}
			pos += i + len(piece)
		}
	}
	return true
}

func TestParseSection(t *testing.T) {
	doc := "# Title\n\n```sh\nnot this\n```\n\n## The tour\n\nText.\n\n```sh\n" +
		"# prose\n" +
		"curl -s x --json '{\"a\":1,\n  \"b\":2}'\n" +
		"# → {\"ok\":...,\n#      \"b\":2}\n" +
		"# → second\n" +
		"# prose again\n" +
		"#  not a continuation\n" +
		"tail -f log &   # follows\n" +
		"echo a && echo b\n" +
		"echo '#' \\\n  | cat\n" +
		"```\n\n```json\n{}\n```\n\n```sh\necho two\n```\n\n## Next\n\n```sh\nnot this either\n```\n"
	got, err := parseSection(doc, "## The tour")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]docCommand{{
		{line: 13, text: "curl -s x --json '{\"a\":1,\n  \"b\":2}'", expect: []string{`{"ok":...,"b":2}`, "second"}},
		{line: 20, text: "tail -f log", background: true},
		{line: 21, text: "echo a && echo b"},
		{line: 22, text: "echo '#' \\\n  | cat"},
	}, {
		{line: 31, text: "echo two"},
	}}
	if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
		t.Errorf("parseSection:\n got %#v\nwant %#v", got, want)
	}
	all, err := parseSection(doc, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 || all[0][0].text != "not this" || all[3][0].text != "not this either" {
		t.Errorf("parseSection of the whole document: %#v, want its 4 ```sh blocks", all)
	}
	for _, tc := range []struct{ doc, heading, err string }{
		{doc, "## Missing", "no heading"},
		{"## H\n```sh\n# → early\n```\n", "## H", "expectation before any command"},
		{"## H\n```sh\n  indented\n```\n", "## H", "continues no command"},
		{"## H\n```sh\necho\n", "## H", "not closed"},
	} {
		if _, err := parseSection(tc.doc, tc.heading); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("parseSection(%q): %v, want an error with %q", tc.doc, err, tc.err)
		}
	}
}

func TestHolds(t *testing.T) {
	out := `{"record":{"session_id":"S-1","status":"running"},"lastSequence":0}` + "\nid: 0\ndata: {}\n"
	for _, tc := range []struct {
		expect []string
		want   bool
	}{
		{[]string{`{"record":{...,"status":"running"},...}`}, true},
		{[]string{`"status":"idle"`}, false},
		{[]string{`"lastSequence":0`, "id: 0", "data: {}"}, true},
		{[]string{"id: 0", `"lastSequence":0`}, false}, // out of order
		{[]string{`"status":"running"...,"session_id"`}, false},
		{nil, true},
	} {
		if got := holds(out, tc.expect); got != tc.want {
			t.Errorf("holds(%q) = %v, want %v", tc.expect, got, tc.want)
		}
	}
}

// docRun runs the commands of one document in its working directory.
type docRun struct {
	t       *testing.T
	name    string // the document, for messages
	repo    string // the checkout's root
	dir     string // the working directory
	bins    map[string]string
	binDir  string   // where the binaries are: first on the commands' PATH
	addr    string   // host:port of the server, once one listens
	aliases []string // the addresses the document gives the server, besides localhost:7420
	env     []string // more environment for the commands (a test's, e.g. libpq's PG* variables)
	rewrite func(string) string
	started []*bgCommand
}

// bgCommand is a command running in the background.
type bgCommand struct {
	c    docCommand
	cmd  *exec.Cmd
	out  *testenv.SyncBuffer
	done chan struct{} // closed when it has exited
}

func newDocRun(t *testing.T, name string) *docRun {
	t.Helper()
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	r := &docRun{t: t, name: name, repo: repo, dir: t.TempDir(), bins: map[string]string{}, binDir: bin}
	for _, pkg := range []string{"./cmd/sessiond", "./examples/echoagent"} {
		r.bins[pkg] = filepath.Join(bin, filepath.Base(pkg))
		r.goBuild(r.bins[pkg], pkg)
	}
	t.Cleanup(r.stopAll)
	return r
}

// goBuild builds pkg of the checkout into out.
func (r *docRun) goBuild(out, pkg string) {
	r.t.Helper()
	// go test puts its own GOROOT/bin first on the PATH of the test binary.
	goBin, err := exec.LookPath("go")
	if err != nil {
		r.t.Fatalf("no go command on PATH to build %s with (%v): run this test with go test, or put $(go env GOROOT)/bin on PATH", pkg, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", out, pkg)
	cmd.Dir = r.repo
	if b, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("go build -o %s %s: %v\n%s", out, pkg, err, b)
	}
}

var (
	goBuildLine = regexp.MustCompile(`^go build -o (\S+) (\./\S+)$`)
	serveAddr   = regexp.MustCompile(`--addr[= ](\S+)`)
	serveWord   = regexp.MustCompile(`sessiond'? serve`)
)

// expand applies the substitutions listed at the top of this file.
func (r *docRun) expand(c docCommand) string {
	s := c.text
	if r.rewrite != nil {
		s = r.rewrite(s)
	}
	for _, pkg := range []string{"./cmd/sessiond", "./examples/echoagent"} {
		s = strings.ReplaceAll(s, "go run "+pkg, shellQuote(r.bins[pkg]))
	}
	if isSessiondCmd(c.text, "serve") {
		if m := serveAddr.FindStringSubmatchIndex(s); m != nil {
			r.aliases = append(r.aliases, s[m[2]:m[3]])
			s = s[:m[2]] + "127.0.0.1:0" + s[m[3]:]
		} else if m := serveWord.FindStringIndex(s); m != nil {
			s = s[:m[1]] + " --addr 127.0.0.1:0" + s[m[1]:]
		}
	}
	if r.addr != "" {
		_, port, _ := strings.Cut(r.addr, ":")
		s = strings.ReplaceAll(s, "localhost:7420", "localhost:"+port)
		s = strings.ReplaceAll(s, "127.0.0.1:7420", r.addr)
		for _, a := range r.aliases {
			s = strings.ReplaceAll(s, a, r.addr)
		}
	}
	if strings.Contains(s, "go run ") || strings.Contains(s, "go build ") {
		r.t.Fatalf("%s %s: a go command the test does not know how to run", r.name, c)
	}
	return s
}

func (r *docRun) shell(ctx context.Context, text string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "sh", "-c", text)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "PATH="+r.binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, r.env...)
	if r.addr != "" {
		cmd.Env = append(cmd.Env, "SESSIOND_SERVER=http://"+r.addr)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// run runs one command of the document.
func (r *docRun) run(c docCommand) {
	r.t.Helper()
	r.t.Logf("%s %s", r.name, c)
	if m := goBuildLine.FindStringSubmatch(c.text); m != nil {
		r.goBuild(filepath.Join(r.dir, m[1]), m[2])
		return
	}
	text := r.expand(c)
	if c.background || isSessiondCmd(c.text, "serve") {
		r.start(c, text)
		return
	}
	deadline := time.Now().Add(15 * time.Second)
	for attempt := 1; ; attempt++ {
		out, err := r.once(text)
		switch {
		case err == nil && holds(out, c.expect):
			return
		case strings.Contains(out, "SEQUENCE_CONFLICT") && isSessiondCmd(c.text, "cmd") && attempt < 10:
			continue
		case err == nil && readOnly(c.text) && time.Now().Before(deadline):
			time.Sleep(100 * time.Millisecond)
			continue
		case err != nil:
			r.t.Fatalf("%s %s\nfailed (attempt %d): %v\n%s", r.name, c, attempt, err, out)
		default:
			r.t.Fatalf("%s %s\nprinted (attempt %d):\n%s\nwhich does not match the expectations:\n%s", r.name, c, attempt, out, strings.Join(c.expect, "\n"))
		}
	}
}

// once runs a foreground command: its combined output, and an error unless it exited 0 in time.
func (r *docRun) once(text string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := r.shell(ctx, text)
	var out testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second // a leftover child holding the output open
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("still running after 30 s: %w", err)
	}
	return out.String(), err
}

// start runs a background command; a server's is waited for until it listens.
func (r *docRun) start(c docCommand, text string) {
	r.t.Helper()
	cmd := r.shell(context.Background(), text)
	out := &testenv.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("%s %s: %v", r.name, c, err)
	}
	b := &bgCommand{c: c, cmd: cmd, out: out, done: make(chan struct{})}
	go func() { cmd.Wait(); close(b.done) }()
	r.started = append(r.started, b)
	if !isSessiondCmd(c.text, "serve") {
		return
	}
	listening := regexp.MustCompile(`sessiond listening on https?://(127\.0\.0\.1:\d+)`)
	for deadline := time.Now().Add(30 * time.Second); ; {
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			r.addr = m[1]
			return
		}
		select {
		case <-b.done:
			r.t.Fatalf("%s %s: the server exited:\n%s", r.name, c, out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s %s: the server does not listen after 30 s:\n%s", r.name, c, out)
		}
	}
}

// finish checks the background commands' expectations (waiting for them up to 15 s), then
// interrupts them, the latest first.
func (r *docRun) finish() {
	r.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for _, b := range r.started {
		for !holds(b.out.String(), b.c.expect) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if !holds(b.out.String(), b.c.expect) {
			r.t.Errorf("%s %s (in the background)\nprinted:\n%s\nwhich does not match the expectations:\n%s", r.name, b.c, b.out, strings.Join(b.c.expect, "\n"))
		}
	}
	r.stopAll()
}

func (r *docRun) stopAll() {
	for i := len(r.started) - 1; i >= 0; i-- {
		b := r.started[i]
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-b.done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
			<-b.done
			r.t.Errorf("%s %s: still running 10 s after an interrupt", r.name, b.c)
		}
	}
	r.started = nil
}

// isSessiondCmd reports whether the command runs the sessiond CLI's sub-command sub.
func isSessiondCmd(text, sub string) bool {
	f := strings.Fields(text)
	for i := range f {
		var rest []string
		switch {
		case f[i] == "./sessiond" || f[i] == "sessiond":
			rest = f[i+1:]
		case f[i] == "go" && i+2 < len(f) && f[i+1] == "run" && f[i+2] == "./cmd/sessiond":
			rest = f[i+3:]
		default:
			continue
		}
		return len(rest) > 0 && rest[0] == sub
	}
	return false
}

// readOnly reports whether running the command again changes nothing.
func readOnly(text string) bool {
	f := strings.Fields(text)
	if len(f) > 0 && f[0] == "curl" {
		return !slices.ContainsFunc(f, func(a string) bool {
			return a == "--json" || a == "-d" || strings.HasPrefix(a, "--data") || a == "-X" || a == "--request"
		})
	}
	for _, sub := range []string{"view", "read", "get", "validate"} {
		if isSessiondCmd(text, sub) {
			return true
		}
	}
	return false
}

func TestReadOnly(t *testing.T) {
	for _, tc := range []struct {
		text string
		want bool
	}{
		{"go run ./cmd/sessiond view S-demo   # waiting", true},
		{"./sessiond read S-cli", true},
		{"./sessiond append S-cli examples/events.ndjson", false},
		{"go run ./cmd/sessiond cmd approve S-demo run-m1 a", false},
		{"curl -s localhost:7420/v1/sessions/S-demo", true},
		{"curl -s localhost:7420/v1/sessions --json '{}'", false},
		{"curl -s -X DELETE localhost:7420/v1/x", false},
	} {
		if got := readOnly(tc.text); got != tc.want {
			t.Errorf("readOnly(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
	if !isSessiondCmd("go run ./cmd/sessiond serve &", "serve") || isSessiondCmd("go run ./cmd/sessiond create --id serve", "serve") {
		t.Error("isSessiondCmd does not find the sub-command")
	}
}

// needTool skips the test when the command tool is not installed, or fails it under CI=true.
func needTool(t *testing.T, tool, who string) {
	t.Helper()
	testenv.Need(t, tool, who+" needs it", "")
}

// readDoc reads a document of the checkout.
func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustSection(t *testing.T, doc, name, heading string) [][]docCommand {
	t.Helper()
	blocks, err := parseSection(doc, heading)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(blocks) == 0 {
		t.Fatalf("%s: no ```sh block under %q", name, heading)
	}
	return blocks
}

// TestREADMETours runs the README's serve command as written from a fresh working directory,
// then its tour with curl and its tour with the CLI.
func TestREADMETours(t *testing.T) {
	needTool(t, "curl", "the README's tour")
	doc := readDoc(t, "README.md")
	// The two commands: serve is run; "go test ./..." is what runs this test.
	var serve *docCommand
	for _, c := range mustSection(t, doc, "README.md", "## The two commands")[0] {
		switch {
		case strings.HasPrefix(c.text, "go run ./cmd/sessiond serve"):
			c.background = true
			serve = &c
		case strings.HasPrefix(c.text, "go test ./..."):
		default:
			t.Fatalf("README.md %s: a command this test does not run", c)
		}
	}
	if serve == nil {
		t.Fatal(`README.md: "## The two commands" has no "go run ./cmd/sessiond serve"`)
	}
	r := newDocRun(t, "README.md")
	r.run(*serve)
	// "data in ./sessiond-data (SQLite)"
	if _, err := os.Stat(filepath.Join(r.dir, "sessiond-data", "sessiond.db")); err != nil {
		t.Fatalf("README.md %s: no database in ./sessiond-data: %v", serve, err)
	}
	// The CLI tour runs in the repository's root.
	if err := os.Symlink(filepath.Join(r.repo, "examples"), filepath.Join(r.dir, "examples")); err != nil {
		t.Fatal(err)
	}
	blocks := mustSection(t, doc, "README.md", "## A 60-second tour with curl")
	if len(blocks) != 2 {
		t.Fatalf("README.md: the tour has %d ```sh blocks, want 2 (curl, then the CLI)", len(blocks))
	}
	for _, b := range blocks {
		for _, c := range b {
			r.run(c)
		}
	}
	r.finish()
}

// TestRuntimeWalkThrough runs docs/runtime.md's walk-through with examples/echoagent.
func TestRuntimeWalkThrough(t *testing.T) {
	doc := readDoc(t, "docs/runtime.md")
	r := newDocRun(t, "docs/runtime.md")
	for _, b := range mustSection(t, doc, "docs/runtime.md", "# The runtime protocol") {
		for _, c := range b {
			r.run(c)
		}
	}
	r.finish()
}

// TestExampleEvents checks that the events the README's CLI tour appends are valid, with the
// command the tour shows for it.
func TestExampleEvents(t *testing.T) {
	out, errOut, code := runCLI(t, "", "validate", "--kind", "event", filepath.Join("..", "..", "examples", "events.ndjson"))
	if code != 0 || !strings.Contains(out, "3 valid, 0 invalid") {
		t.Fatalf("validate examples/events.ndjson: exit %d\n%s%s", code, out, errOut)
	}
}
