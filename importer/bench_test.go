package importer_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/importer"
)

// benchCopies makes copies transcripts from a real fixture, each its turns repeated turns
// times (ids made unique per repetition) and with a session id of its own, as on a disk full
// of sessions.
func benchCopies(b *testing.B, name, id string, copies, turns int) [][]byte {
	b.Helper()
	src, err := os.ReadFile(name)
	if err != nil {
		b.Fatal(err)
	}
	out := make([][]byte, copies)
	for i := range out {
		var file bytes.Buffer
		for k := range turns {
			rep := src
			if k > 0 {
				for _, prefix := range []string{`"msg_`, `"tool_`, `"call_`} {
					rep = bytes.ReplaceAll(rep, []byte(prefix), []byte(fmt.Sprintf("%sr%d_", prefix, k)))
				}
			}
			file.Write(rep)
		}
		out[i] = bytes.ReplaceAll(file.Bytes(), []byte(id), []byte(fmt.Sprintf("%s-%d-%d", id, time.Now().UnixNano(), i)))
	}
	return out
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkImport parses and writes real transcripts (the fixtures, each copy a new session)
// into a server on SQLite (in this process) through the HTTP API, as `sessiond import` does.
// It reports source lines per second of wall time, and per second of the process's CPU time
// (what a loaded machine cannot take away).
func BenchmarkImport(b *testing.B) {
	for _, tc := range []struct {
		format, file, id string
		turns            int
	}{
		{"codex", "testdata/codex/rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl", "019c8a4d-8f45-7010-8b5d-7fad920aa6f9", 1},
		{"claude-code", "testdata/claude-code/representative_messages.jsonl", "test_session", 40},
	} {
		b.Run(tc.format, func(b *testing.B) {
			cl := startServer(b)
			w := &importer.Writer{Client: cl}
			lines := 0
			var elapsed, cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				files := benchCopies(b, tc.file, tc.id, 10, tc.turns)
				b.StartTimer()
				start, cpu0 := time.Now(), cpuTime()
				var all []*importer.Transcript
				for i, data := range files {
					var ts []*importer.Transcript
					var rep *importer.Report
					var err error
					name := fmt.Sprintf("copy-%d.jsonl", i)
					if tc.format == "codex" {
						ts, rep, err = importer.ParseCodex(bytes.NewReader(data), name)
					} else {
						ts, rep, err = importer.ParseClaudeCode(bytes.NewReader(data), name)
					}
					if err != nil {
						b.Fatal(err)
					}
					lines += rep.Lines
					all = append(all, ts...)
				}
				if _, errs := w.Write(context.Background(), all); len(errs) > 0 {
					b.Fatal(errs[0])
				}
				elapsed += time.Since(start)
				cpu += cpuTime() - cpu0
			}
			b.ReportMetric(float64(lines)/elapsed.Seconds(), "lines/s")
			b.ReportMetric(float64(lines)/cpu.Seconds(), "lines/cpu-s")
		})
	}
}
