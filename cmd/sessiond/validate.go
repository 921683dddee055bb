package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/contract"
)

func init() {
	commands["validate"] = command{
		summary: "check NDJSON documents (events by default) against the contract",
		args:    "[file|-]",
		about: "Reads NDJSON (one JSON document per line) from file, or stdin when file is - or absent,\n" +
			"and checks each line against the contract. Events: the chain trailer of a file sessiond export\n" +
			"wrote ({\"sessiondChain\":...}, checked by sessiond verify) is skipped.\n" +
			"Exit 0: all valid; 1: some invalid; 2: usage or I/O error.",
		run: runValidate,
	}
}

// validateKinds are the document kinds "sessiond validate --kind" accepts.
var validateKinds = []string{
	contract.KindEvent, contract.KindCommand, contract.KindCommandResult,
	contract.KindRun, contract.KindView, contract.KindSession,
}

// lineResult is the --json output for one input line.
type lineResult struct {
	Line   int                `json:"line"`
	Valid  bool               `json:"valid"`
	Errors []contract.Problem `json:"errors,omitempty"`
}

// runValidate implements "sessiond validate [file|-] [--kind K] [--json]". It reads one JSON
// document per line (blank lines are skipped but counted) and reports each line. Exit code: 0
// when every document is valid, 1 when any is invalid, 2 on a usage or I/O error.
func runValidate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cl := newCommandLine("validate", stdout, stderr)
	fs := cl.fs
	kind := fs.String("kind", contract.KindEvent, "document kind: "+strings.Join(validateKinds, ", "))
	asJSON := fs.Bool("json", false, "print one JSON object per input line and nothing else")
	maxBytes := fs.Int("max-bytes", contract.DefaultMaxBytes, "largest accepted line in bytes")
	pos, code, ok := cl.parse(args)
	if !ok {
		return code
	}
	if !slices.Contains(validateKinds, *kind) {
		fmt.Fprintf(stderr, "sessiond validate: unknown kind %q\nhint: --kind is one of %s\n", *kind, strings.Join(validateKinds, ", "))
		return 2
	}
	if *maxBytes <= 0 {
		fmt.Fprintf(stderr, "sessiond validate: --max-bytes must be positive, not %d\nhint: the default is %d (1 MiB)\n", *maxBytes, contract.DefaultMaxBytes)
		return 2
	}
	in, name := stdin, "stdin"
	if len(pos) == 1 && pos[0] != "-" {
		name = pos[0]
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(stderr, "sessiond validate: %v\nhint: check the path, or pipe the documents in: cat events.jsonl | sessiond validate\n", err)
			return 2
		}
		defer f.Close()
		in = f
	}

	out := bufio.NewWriter(stdout)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	lim := contract.Limits{MaxBytes: *maxBytes}
	r := bufio.NewReaderSize(in, 64<<10)
	var buf []byte
	valid, invalid, trailers := 0, 0, 0
	for lineNo := 1; ; lineNo++ {
		line, size, err := readLine(r, buf[:0], *maxBytes)
		buf = line
		if err != nil && !errors.Is(err, io.EOF) {
			out.Flush()
			fmt.Fprintf(stderr, "sessiond validate: read %s at line %d: %v\nhint: check that the input is a readable file or pipe\n", name, lineNo, err)
			return 2
		}
		if size == 0 && errors.Is(err, io.EOF) {
			break // end of input (no partial last line)
		}
		if *kind == contract.KindEvent && size <= *maxBytes && isChainTrailer(line) {
			trailers++ // an export's chain trailer: sessiond verify's, not the contract's
		} else if len(bytes.TrimSpace(line)) > 0 || size > len(line) {
			var problems []contract.Problem
			if size > *maxBytes {
				problems = []contract.Problem{{Rule: "maxBytes", Layer: contract.LayerJSON,
					Message: fmt.Sprintf("line is longer than the limit of %d bytes (--max-bytes)", *maxBytes)}}
			} else if verr := contract.Validate(*kind, line, lim); verr != nil {
				var ve *contract.ValidationError
				if !errors.As(verr, &ve) {
					out.Flush()
					fmt.Fprintf(stderr, "sessiond validate: %v\n", verr)
					return 2
				}
				problems = ve.Problems
			}
			if problems == nil {
				valid++
			} else {
				invalid++
			}
			report(out, enc, *asJSON, lineNo, problems)
			if r.Buffered() == 0 {
				out.Flush() // about to wait for input: let a streaming reader see the results so far
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if !*asJSON {
		fmt.Fprintf(out, "%d valid, %d invalid", valid, invalid)
		if trailers > 0 {
			fmt.Fprintf(out, " (%d export chain trailer skipped: sessiond verify checks it)", trailers)
		}
		fmt.Fprintln(out)
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintf(stderr, "sessiond validate: write: %v\n", err)
		return 2
	}
	if invalid > 0 {
		return 1
	}
	return 0
}

// report prints the result of one line.
func report(out *bufio.Writer, enc *json.Encoder, asJSON bool, line int, problems []contract.Problem) {
	if asJSON {
		enc.Encode(lineResult{Line: line, Valid: problems == nil, Errors: problems})
		return
	}
	if problems == nil {
		fmt.Fprintf(out, "line %d: ok\n", line)
		return
	}
	fmt.Fprintf(out, "line %d: invalid\n", line)
	for _, p := range problems {
		path := p.Path
		if path == "" {
			path = "/"
		}
		fmt.Fprintf(out, "  %s: %s (%s)\n", path, p.Message, p.Rule)
	}
}

// readLine reads one line (without its "\n" or "\r\n") into buf. It keeps at most limit+2
// bytes of it and returns the line's full length in size, so that an over-long line is
// consumed whole and reported without holding it in memory. At the end of input it returns
// io.EOF, with the last line when that line had no newline.
func readLine(r *bufio.Reader, buf []byte, limit int) (line []byte, size int, err error) {
	var last2 [2]byte // the last two bytes read
	for {
		chunk, err := r.ReadSlice('\n')
		size += len(chunk)
		if room := limit + 2 - len(buf); room > 0 {
			buf = append(buf, chunk[:min(room, len(chunk))]...)
		}
		for _, c := range chunk[max(0, len(chunk)-2):] {
			last2[0], last2[1] = last2[1], c
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if size >= 1 && last2[1] == '\n' {
			size--
			if size >= 1 && last2[0] == '\r' {
				size--
			}
		}
		if len(buf) > size {
			buf = buf[:size]
		}
		return buf, size, err
	}
}
