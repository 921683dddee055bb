package importer

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
)

// ParseFile reads one transcript file of format ("claude-code" or "codex"). The report is
// never nil; an error says the file could not be read.
func ParseFile(format, name string) ([]*Transcript, *Report, error) {
	var parse func(io.Reader, string) ([]*Transcript, *Report, error)
	switch format {
	case "codex":
		parse = ParseCodex
	case "claude-code":
		parse = ParseClaudeCode
	default:
		return nil, &Report{Path: name, Format: format}, fmt.Errorf("%s: unknown format %q", name, format)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, &Report{Path: name, Format: format}, err // names the file and the operation
	}
	defer f.Close()
	return parse(f, name)
}

// FileImport is what [Writer.Import] did with one file.
type FileImport struct {
	// Report accounts for the file's lines; its Sessions are what each of the file's
	// transcripts became, in the file's order (a transcript that failed too, with what was
	// written of it), and its Error is why the file could not be read.
	Report *Report
	// Err is why the file could not be read (nothing of it was written).
	Err error
	// Errs are the file's transcripts that could not be written, in the file's order.
	Errs []error
}

// Import reads the files with ParseFile, as many at once as there are processors, and writes
// each file's transcripts as soon as it is read, as [Writer.Write] does (Concurrency
// sessions at a time; a continuation after the session it branches from): reading and
// writing overlap, and a file is held in memory only until its transcripts are written,
// except a continuation waiting for its parent. A reader waits while Concurrency transcripts
// are being written. A continuation whose parent is in a file not read yet waits for it, held
// in memory (a set of files listing many sub-agents before their parents holds them all); one
// whose parent is in none of the files is written as a session of its own after the last file
// is read. Progress's total grows as files are
// read. Import returns what it did with each file, in the order of names.
func (w *Writer) Import(ctx context.Context, format string, names []string) []FileImport {
	out := make([]FileImport, len(names))
	failed := make([][]error, len(names))
	s := w.schedule(ctx)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(names)) {
		wg.Go(func() {
			for i := range next {
				ts, rep, err := ParseFile(format, names[i])
				out[i] = FileImport{Report: rep, Err: err}
				if err != nil {
					rep.Error = err.Error()
					continue
				}
				if len(ts) == 0 {
					continue
				}
				for _, t := range ts {
					s.expect(t)
				}
				rep.Sessions = make([]SessionResult, len(ts))
				failed[i] = make([]error, len(ts))
				for k, t := range ts {
					s.add(&job{t: t, res: &rep.Sessions[k], err: &failed[i][k]})
				}
			}
		})
	}
	for i := range names {
		next <- i
	}
	close(next)
	wg.Wait()
	s.finish()
	for i := range out {
		out[i].Errs = compact(failed[i])
	}
	return out
}

// lineScanner reads r's lines of up to 256 MiB. Its buffer starts at 64 KiB and grows only
// for a longer line: a file of short lines does not cost a large buffer to allocate and clear.
func lineScanner(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 256<<20)
	return sc
}
