package refdoc

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/contract"
)

var update = flag.Bool("update", false, "rewrite "+Path+" from the contract's tables")

// root is the repository root, from this package's directory.
const root = "../.."

// TestReferenceDoc regenerates docs/reference.md and fails when the committed page differs:
// the page is generated from the tables the server checks with, so it cannot drift. With
// -update it rewrites the page instead.
func TestReferenceDoc(t *testing.T) {
	got, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, Path)
	if *update {
		if err := rewrite(path); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v\nhint: generate it with: %s", err, RegenerateCommand)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		line := 0
		for line < len(gl) && line < len(wl) && gl[line] == wl[line] {
			line++
		}
		var g, w string
		if line < len(gl) {
			g = gl[line]
		}
		if line < len(wl) {
			w = wl[line]
		}
		t.Fatalf("%s is out of date: line %d is\n\t%q\nbut the tables give\n\t%q\nhint: regenerate it with: %s", Path, line+1, w, g, RegenerateCommand)
	}
	if !bytes.Contains(want, []byte(RegenerateCommand)) {
		t.Errorf("%s does not show the command that regenerates it", Path)
	}
}

// rewrite writes the generated page to path: what -update does.
func rewrite(path string) error {
	page, err := Generate()
	if err != nil {
		return err
	}
	return os.WriteFile(path, page, 0o644)
}

// TestRegenerateCommand: the command the page and the failure hint show is this package's
// test with a -run pattern that selects TestReferenceDoc and the -update flag, and what
// -update does gives back the committed page.
func TestRegenerateCommand(t *testing.T) {
	args := strings.Fields(RegenerateCommand)
	if len(args) != 6 || args[0] != "go" || args[1] != "test" || args[3] != "-run" || args[5] != "-update" {
		t.Fatalf("RegenerateCommand %q is not go test PKG -run PATTERN -update", RegenerateCommand)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(root)
	if rel, _ := filepath.Rel(abs, wd); "./"+filepath.ToSlash(rel) != args[2] {
		t.Errorf("RegenerateCommand tests %s; this package is ./%s", args[2], filepath.ToSlash(rel))
	}
	if ok, err := regexp.MatchString(args[4], "TestReferenceDoc"); !ok || err != nil {
		t.Errorf("-run %s does not select TestReferenceDoc", args[4])
	}
	if flag.Lookup(strings.TrimPrefix(args[5], "-")) == nil {
		t.Errorf("flag %s is not defined", args[5])
	}
	tmp := filepath.Join(t.TempDir(), "reference.md")
	if err := rewrite(tmp); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(tmp)
	want, err := os.ReadFile(filepath.Join(root, Path))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("-update writes a page other than the committed one; run %s", RegenerateCommand)
	}
}

// TestReferenceCoversEverything: the page has a section for every event type and command type
// with an example that the contract accepts, and names every capability and error code.
func TestReferenceCoversEverything(t *testing.T) {
	page, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	for _, et := range contract.EventTypes {
		if !strings.Contains(s, "### `"+et+"` event\n") {
			t.Errorf("no section for the %s event", et)
		}
	}
	for _, ct := range contract.CommandTypes {
		if !strings.Contains(s, "### `"+ct+"` command\n") {
			t.Errorf("no section for the %s command", ct)
		}
	}
	if n := strings.Count(s, "```json\n"); n != len(contract.EventTypes)+len(contract.CommandTypes)+1 {
		t.Errorf("%d examples; want one per event type, one per command type and a command result", n)
	}
	for _, c := range contract.CapabilityNames {
		if !strings.Contains(s, "| `"+c+"` |") {
			t.Errorf("capability %s is not in the table", c)
		}
	}
	for _, c := range contract.ErrorCodes {
		if !strings.Contains(s, "| `"+string(c)+"` |") {
			t.Errorf("error code %s is not in the table", c)
		}
	}
}

// TestGenerateRefusesBadExamples: an example that breaks the contract stops the generator with
// the reason, instead of landing in the page.
func TestGenerateRefusesBadExamples(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func() func()
		wantErr string
	}{
		{"event example", func() func() {
			old := eventExamples["usage"]
			eventExamples["usage"] = exampleEvent{old.envelope, `{"contextWindow":0}`}
			return func() { eventExamples["usage"] = old }
		}, "usage event breaks the contract"},
		{"command example", func() func() {
			old := commandExamples["steer"]
			commandExamples["steer"] = exampleCommand{old.runID, `{"targetRunId":"r-2","text":"x"}`}
			return func() { commandExamples["steer"] = old }
		}, "steer command breaks the contract"},
		{"missing example", func() func() {
			old := eventExamples["diff"]
			delete(eventExamples, "diff")
			return func() { eventExamples["diff"] = old }
		}, "event type diff has no example"},
		{"missing purpose", func() func() {
			old := commandPurposes["fork"]
			delete(commandPurposes, "fork")
			return func() { commandPurposes["fork"] = old }
		}, "command type fork has no purpose"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			restore := c.mutate()
			defer restore()
			_, err := Generate()
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("Generate: %v; want an error containing %q", err, c.wantErr)
			}
		})
	}
}

// TestContractPageListsEveryRule: the rules table of docs/contract.md, written by hand, names
// exactly the rules of the contract package's Rules table, for the kinds it says.
func TestContractPageListsEveryRule(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "docs", "contract.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "| rule | applies to | what it requires |")
	if !ok {
		t.Fatal("docs/contract.md has no rules table (| rule | applies to | what it requires |)")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	listed := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		listed[strings.Trim(strings.TrimSpace(cells[1]), "`")+" "+strings.TrimSpace(cells[2])] = true
	}
	want := map[string]bool{}
	for _, r := range contract.Rules {
		found := false
		for k := range listed {
			name, applies, _ := strings.Cut(k, " ")
			if name == r.Name && strings.Contains(applies, kindWord[r.Kind]) {
				found, want[k] = true, true
			}
		}
		if !found {
			t.Errorf("docs/contract.md's rules table lacks %s (%s)", r.Name, r.Kind)
		}
	}
	for k := range listed {
		if !want[k] {
			t.Errorf("docs/contract.md's rules table lists %q, which is not in contract.Rules", k)
		}
	}
}

// kindWord is how the rules table of docs/contract.md names each document kind.
var kindWord = map[string]string{
	contract.KindEvent: "event", contract.KindCommand: "command", contract.KindCommandResult: "command result",
	contract.KindRun: "run", contract.KindView: "view", contract.KindSession: "session record",
}
