package importer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestParseFixturesAccountForEveryLine(t *testing.T) {
	for _, tc := range []struct {
		dir   string
		parse func(f *os.File, name string) ([]*Transcript, *Report, error)
	}{
		{"testdata/claude-code", func(f *os.File, name string) ([]*Transcript, *Report, error) { return ParseClaudeCode(f, name) }},
		{"testdata/codex", func(f *os.File, name string) ([]*Transcript, *Report, error) { return ParseCodex(f, name) }},
	} {
		files, _ := filepath.Glob(filepath.Join(tc.dir, "*.jsonl"))
		for _, name := range files {
			f, err := os.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			ts, rep, err := tc.parse(f, name)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Accounted() {
				t.Errorf("%s: lines not accounted: %+v", name, rep)
			}
			for _, tr := range ts {
				t.Logf("%s: %s (%s, %s) %d events, parent %+v forks %+v", name, tr.SessionID, tr.AgentID, tr.ModelID, len(tr.Events), tr.Parent, tr.Forks)
			}
			t.Logf("%s: %d lines, %d mapped, %d merged, skipped %v, notes %v", name, rep.Lines, rep.Mapped, rep.Merged, rep.Skipped, rep.Notes)
		}
	}
}

// TestTextPartBytes: a text part has the bytes earlier imports wrote (json.Marshal of the map
// of its two keys), so that importing a file again after an upgrade finds duplicates.
func TestTextPartBytes(t *testing.T) {
	for _, s := range []string{"", "plain", "a<b>&c\"\\\n\t\u2028\u2029", "\xff\xfe invalid UTF-8", "日本語 🙂"} {
		want, err := json.Marshal(map[string]string{"type": "text", "text": s})
		if err != nil {
			t.Fatal(err)
		}
		if got := textPart(s); string(got) != string(want) {
			t.Errorf("textPart(%q) = %s, want %s", s, got, want)
		}
	}
}
