//go:build unix

package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportJSONAndExport: `sessiond import --json` accounts for every line of every file (the
// totals are the files' sums; a second import is all duplicates), and `sessiond export`
// writes the session's events back, one per line, valid contract events.
func TestImportJSONAndExport(t *testing.T) {
	url, _, _ := startServer(t, filepath.Join(t.TempDir(), "data"))
	dir := filepath.Join("..", "..", "importer", "testdata", "codex")
	var first importSummary
	for round := 0; round < 2; round++ {
		out, errOut, code := runCLI(t, "", "import", "--server", url, "--format", "codex", "--json", dir)
		if code != 0 {
			t.Fatalf("import: %d %s %s", code, out, errOut)
		}
		var sum importSummary
		if err := json.Unmarshal([]byte(out), &sum); err != nil {
			t.Fatalf("import --json: %v\n%s", err, out)
		}
		lines, skipped := 0, 0
		for _, f := range sum.Files {
			if !f.Accounted() || len(f.Sessions) != 1 {
				t.Errorf("%s: %+v", f.Path, f)
			}
			lines += f.Lines
		}
		for _, n := range sum.Skipped {
			skipped += n
		}
		if len(sum.Files) != 3 || sum.Lines != lines || sum.Sessions != 3 || skipped == 0 || len(sum.Errors) != 0 {
			t.Errorf("summary: %+v", sum)
		}
		if round == 0 {
			first = sum
			if sum.Accepted == 0 || sum.Duplicate != 0 {
				t.Errorf("first import: %d accepted, %d duplicate", sum.Accepted, sum.Duplicate)
			}
		} else if sum.Accepted != 0 || sum.Duplicate != first.Accepted {
			t.Errorf("second import: %d accepted, %d duplicate; the first accepted %d", sum.Accepted, sum.Duplicate, first.Accepted)
		}
	}
	sid := first.Files[0].Sessions[0].SessionID
	out, errOut, code := runCLI(t, "", "export", "--server", url, sid)
	if code != 0 {
		t.Fatalf("export: %d %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != first.Files[0].Sessions[0].Events {
		t.Errorf("export wrote %d lines, the session has %d events", len(lines), first.Files[0].Sessions[0].Events)
	}
	out, errOut, code = runCLI(t, out, "validate", "--kind", "event")
	if code != 0 {
		t.Errorf("the export does not validate: %d %s %s", code, out, errOut)
	}
}
