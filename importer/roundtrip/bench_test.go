package roundtrip_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/sessiond/sessiond/importer"
	"github.com/sessiond/sessiond/internal/testenv"
)

// copyIDs matches the start of the ids that benchCopies makes unique per repetition: a string
// that starts msg_, tool_ or call_ and a digit (msg_001, tool_001), and not the names that
// share those prefixes ("tool_use", "tool_result", "tool_use_id"), which must stay as they are.
var copyIDs = regexp.MustCompile(`"(msg|tool|call)_([0-9])`)

// benchCopies writes copies transcripts made from the fixture f into dir, each its turns
// repeated f.turns times (ids made unique per repetition) and with a session id of its own, as
// on a disk full of sessions, and returns their paths.
func benchCopies(b *testing.B, dir string, f benchFile, copies int) []string {
	b.Helper()
	id := f.id
	src, err := os.ReadFile(f.file)
	if err != nil {
		b.Fatal(err)
	}
	if !bytes.HasSuffix(src, []byte("\n")) {
		src = append(src, '\n') // a last line without its newline must not run into the next copy's first
	}
	out := make([]string, copies)
	for i := range out {
		var file bytes.Buffer
		for k := range f.turns {
			rep := src
			if k > 0 {
				rep = copyIDs.ReplaceAll(rep, []byte(fmt.Sprintf("\"${1}_r%d_${2}", k)))
			}
			file.Write(rep)
		}
		out[i] = filepath.Join(dir, fmt.Sprintf("copy-%d-%d.jsonl", time.Now().UnixNano(), i))
		data := bytes.ReplaceAll(file.Bytes(), []byte(id), []byte(fmt.Sprintf("%s-%d-%d", id, time.Now().UnixNano(), i)))
		if err := os.WriteFile(out[i], data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	faithful(b, f, out[0])
	return out
}

// faithful fails b unless the copy maps to turns times the events of each type, and the runs,
// that the fixture maps to: making ids unique must not change what a line means. (Renaming
// every "tool_ once turned "tool_use" and "tool_result" into block types the importer does not
// know, and the benchmarks measured 2.41 events and 0.50 runs per line instead of the
// fixture's 2.08 and 0.33.)
func faithful(b *testing.B, f benchFile, copy string) {
	b.Helper()
	count := func(name string) map[string]int {
		ts, _, err := importer.ParseFile(f.format, name)
		if err != nil {
			b.Fatal(err)
		}
		n := map[string]int{}
		for _, t := range ts {
			runs := map[string]bool{}
			for _, e := range t.Events {
				n[e.EventType]++
				if e.RunID != "" {
					runs[e.RunID] = true
				}
			}
			n["runs"] += len(runs)
		}
		return n
	}
	want, got := count(f.file), count(copy)
	for k := range want {
		want[k] *= f.turns
	}
	if !maps.Equal(want, got) {
		b.Fatalf("%s maps to %v, want %d times %s's: %v", copy, got, f.turns, f.file, want)
	}
}

// benchFile is a fixture the import benchmarks copy: its format, path and session id, and how
// many times a copy repeats its turns.
type benchFile struct {
	format, file, id string
	turns            int
}

// benchFiles are the fixtures the import benchmarks copy: a real Codex rollout as it is, and
// a Claude Code session's 12 lines repeated 40 times.
var benchFiles = []benchFile{
	{"codex", "../testdata/codex/rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl", "019c8a4d-8f45-7010-8b5d-7fad920aa6f9", 1},
	{"claude-code", "../testdata/claude-code/representative_messages.jsonl", "test_session", 40},
}

// BenchmarkImport reads real transcripts from files (the fixtures, each copy a new session)
// and writes them into a server on SQLite (in this process) through the HTTP API, as
// `sessiond import` does (importer.Writer.Import: the files read concurrently, each written as
// soon as it is read). It reports source lines per second of wall time, and per second of the
// process's CPU time (what a loaded machine cannot take away), and the events written per
// source line.
func BenchmarkImport(b *testing.B) {
	for _, tc := range benchFiles {
		b.Run(tc.format, func(b *testing.B) {
			cl := startServer(b)
			w := &importer.Writer{Client: cl}
			dir := b.TempDir()
			lines, events := 0, 0
			var elapsed, cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				files := benchCopies(b, dir, tc, 10)
				b.StartTimer()
				start, cpu0 := time.Now(), testenv.ProcessCPU()
				imported := w.Import(context.Background(), tc.format, files)
				elapsed += time.Since(start)
				cpu += testenv.ProcessCPU() - cpu0
				for _, fi := range imported {
					if fi.Err != nil {
						b.Fatal(fi.Err)
					}
					if len(fi.Errs) > 0 {
						b.Fatal(fi.Errs[0])
					}
					rep := fi.Report
					if !rep.Accounted() || rep.Skipped["not a JSON object"] > 0 {
						b.Fatalf("%s: %+v", rep.Path, rep)
					}
					lines += rep.Lines
					for _, r := range rep.Sessions {
						if r.Accepted != r.Events {
							b.Fatalf("%+v: not every event accepted", r)
						}
						events += r.Events
					}
				}
			}
			b.ReportMetric(float64(lines)/elapsed.Seconds(), "lines/s")
			b.ReportMetric(float64(lines)/cpu.Seconds(), "lines/cpu-s")
			b.ReportMetric(float64(events)/float64(lines), "events/line")
		})
	}
}

// BenchmarkParse reads the same copies as BenchmarkImport from files, without writing them:
// the importer's own share of an import's CPU time.
func BenchmarkParse(b *testing.B) {
	for _, tc := range benchFiles {
		b.Run(tc.format, func(b *testing.B) {
			files := benchCopies(b, b.TempDir(), tc, 10)
			lines := 0
			cpu0 := testenv.ProcessCPU()
			for b.Loop() {
				for _, name := range files {
					_, rep, err := importer.ParseFile(tc.format, name)
					if err != nil {
						b.Fatal(err)
					}
					lines += rep.Lines
				}
			}
			b.ReportMetric(float64(lines)/(testenv.ProcessCPU()-cpu0).Seconds(), "lines/cpu-s")
		})
	}
}
