package importer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/contract"
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

// TestLongLine: a line longer than the scanner's first buffer (64 KiB) is read whole, in both
// formats, and the lines after it are still read.
func TestLongLine(t *testing.T) {
	text := strings.Repeat("x", 300<<10)
	for _, tc := range []struct {
		format, lines string
	}{
		{"claude-code", `{"type":"user","sessionId":"long","uuid":"u1","timestamp":"2026-03-01T12:00:00.000Z","message":{"role":"user","content":"` + text + `"}}` + "\n" +
			`{"type":"user","sessionId":"long","uuid":"u2","timestamp":"2026-03-01T12:00:01.000Z","message":{"role":"user","content":"second"}}` + "\n"},
		{"codex", `{"timestamp":"2026-03-01T12:00:00.000Z","type":"session_meta","payload":{"id":"long","timestamp":"2026-03-01T12:00:00.000Z","cwd":"/"}}` + "\n" +
			`{"timestamp":"2026-03-01T12:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"` + text + `"}]}}` + "\n" +
			`{"timestamp":"2026-03-01T12:00:02.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"second"}]}}` + "\n"},
	} {
		name := filepath.Join(t.TempDir(), "long.jsonl")
		if err := os.WriteFile(name, []byte(tc.lines), 0o600); err != nil {
			t.Fatal(err)
		}
		ts, rep, err := ParseFile(tc.format, name)
		if err != nil {
			t.Fatalf("%s: %v", tc.format, err)
		}
		long, second := false, false
		for _, tr := range ts {
			for _, e := range tr.Events {
				if m, ok := e.Payload.(*contract.MessagePayload); ok {
					long = long || strings.Contains(string(m.Parts[0]), text)
					second = second || strings.Contains(string(m.Parts[0]), `"second"`)
				}
			}
		}
		if rep.Lines != strings.Count(tc.lines, "\n") || !rep.Accounted() || rep.Skipped["not a JSON object"] != 0 || !long || !second {
			t.Errorf("%s: %+v; long message read: %v, the next: %v", tc.format, rep, long, second)
		}
	}
}
