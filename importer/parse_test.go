package importer

import (
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
