package importer

import (
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

// Parsed is one file read by ParseFiles.
type Parsed struct {
	Transcripts []*Transcript
	Report      *Report
	Err         error
}

// ParseFiles reads the files with ParseFile, as many at once as there are processors, and
// returns them in the order of names.
func ParseFiles(format string, names []string) []Parsed {
	out := make([]Parsed, len(names))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(names)) {
		wg.Go(func() {
			for i := range next {
				ts, rep, err := ParseFile(format, names[i])
				out[i] = Parsed{ts, rep, err}
			}
		})
	}
	for i := range names {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}
