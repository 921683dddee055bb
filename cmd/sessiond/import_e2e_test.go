//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"os"
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
	if len(lines) != first.Files[0].Sessions[0].Events+1 || !isChainTrailer([]byte(lines[len(lines)-1])) {
		t.Errorf("export wrote %d lines, the session has %d events (and the chain trailer)", len(lines), first.Files[0].Sessions[0].Events)
	}
	out, errOut, code = runCLI(t, out, "validate", "--kind", "event")
	if code != 0 {
		t.Errorf("the export does not validate: %d %s %s", code, out, errOut)
	}
}

// TestExportVerifyImportRoundTrip: a session's export verifies offline (sessiond verify, text
// and --json) and validates (the chain trailer skipped); imported into another server
// (import --format sessiond) and exported from there, its event lines are byte for byte the
// same and its chain head too. An event line rewritten into another valid event (same ids) is
// reported by verify, naming its line, with exit 1, and import refuses that file.
func TestExportVerifyImportRoundTrip(t *testing.T) {
	urlA, _, _ := startServer(t, filepath.Join(t.TempDir(), "a"))
	urlB, _, _ := startServer(t, filepath.Join(t.TempDir(), "b"))
	out, errOut, code := runCLI(t, "", "import", "--server", urlA, "--format", "codex", "--json", filepath.Join("..", "..", "importer", "testdata", "codex"))
	if code != 0 {
		t.Fatalf("import: %d %s %s", code, out, errOut)
	}
	var sum importSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	sid := sum.Files[0].Sessions[0].SessionID
	dir := t.TempDir()
	exported, errOut, code := runCLI(t, "", "export", "--server", urlA, sid)
	if code != 0 {
		t.Fatalf("export: %d %s", code, errOut)
	}
	file := filepath.Join(dir, "a.jsonl")
	if err := os.WriteFile(file, []byte(exported), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runCLI(t, "", "verify", file); code != 0 || !strings.Contains(out, "the chain holds") {
		t.Fatalf("verify: %d %s %s", code, out, errOut)
	}
	out, _, code = runCLI(t, "", "verify", "--json", file)
	var res verifyResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || !res.Valid || res.SessionID != sid || res.Events != int64(sum.Files[0].Sessions[0].Events) {
		t.Fatalf("verify --json: %d %s (%v)", code, out, err)
	}
	if out, errOut, code := runCLI(t, exported, "validate"); code != 0 || !strings.Contains(out, "1 export chain trailer skipped") {
		t.Errorf("validate of the export: %d %s %s", code, out, errOut)
	}

	out, errOut, code = runCLI(t, "", "import", "--server", urlB, "--format", "sessiond", file)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d accepted, 0 duplicate", res.Events)) {
		t.Fatalf("import --format sessiond: %d %s %s", code, out, errOut)
	}
	again, errOut, code := runCLI(t, "", "export", "--server", urlB, sid)
	if code != 0 {
		t.Fatalf("export from the second server: %d %s", code, errOut)
	}
	a, b := strings.Split(exported, "\n"), strings.Split(again, "\n")
	if len(a) != len(b) {
		t.Fatalf("the second export has %d lines, the first %d", len(b), len(a))
	}
	for i := range a {
		if isChainTrailer([]byte(a[i])) {
			var ta, tb exportTrailer
			if json.Unmarshal([]byte(a[i]), &ta) != nil || json.Unmarshal([]byte(b[i]), &tb) != nil || ta.Chain.Head != tb.Chain.Head || ta.Chain.Events != tb.Chain.Events {
				t.Errorf("trailers differ:\n%s\n%s", a[i], b[i])
			}
			continue
		}
		if a[i] != b[i] {
			t.Errorf("line %d differs after export, import and export:\n%s\n%s", i+1, a[i], b[i])
		}
	}
	// Importing the same file again: every event is a duplicate.
	if out, errOut, code := runCLI(t, "", "import", "--server", urlB, "--format", "sessiond", file); code != 0 || !strings.Contains(out, fmt.Sprintf("0 accepted, %d duplicate", res.Events)) {
		t.Errorf("second import: %d %s %s", code, out, errOut)
	}

	// An event rewritten into another valid event, ids unchanged.
	lines := strings.Split(exported, "\n")
	target := -1
	for i, l := range lines {
		if strings.Contains(l, `"occurredAt":"`) && !isChainTrailer([]byte(l)) && i > 0 {
			target = i
			break
		}
	}
	if target < 0 {
		t.Fatal("no event line to rewrite")
	}
	at := strings.Index(lines[target], `"occurredAt":"`) + len(`"occurredAt":"`)
	digit := lines[target][at+3] // the year's last digit: 2026 -> 2027
	lines[target] = lines[target][:at+3] + string(rune(digit+1)) + lines[target][at+4:]
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runCLI(t, strings.Join(lines[:len(lines)-2], "\n")+"\n", "validate"); code != 0 {
		t.Fatalf("the rewritten event does not validate, the test rewrote it badly: %s %s", out, errOut)
	}
	out, _, code = runCLI(t, "", "verify", bad)
	if code != 1 || !strings.Contains(out, "line 1 (sequence 0): the chain breaks between line 1 and line "+fmt.Sprint(res.Events)) {
		t.Errorf("verify of a rewritten export: %d\n%s", code, out)
	}
	out, _, code = runCLI(t, "", "verify", "--json", bad)
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 1 || res.Valid || len(res.Problems) != 1 || res.Problems[0].Line != 1 {
		t.Errorf("verify --json of a rewritten export: %d %s", code, out)
	}
	if out, errOut, code := runCLI(t, "", "import", "--server", urlB, "--format", "sessiond", bad); code != 1 || !strings.Contains(errOut, "chain does not hold") {
		t.Errorf("import of a rewritten export: %d %s %s", code, out, errOut)
	}
	// Cut short: the trailer gone.
	if out, _, code := runCLI(t, strings.Join(lines[:3], "\n")+"\n", "verify", "-"); code != 1 || !strings.Contains(out, "no chain trailer") {
		t.Errorf("verify of a cut export: %d %s", code, out)
	}
}
