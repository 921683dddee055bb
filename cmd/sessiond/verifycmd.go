package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
)

func init() {
	commands["verify"] = command{summary: "check an exported log's hash chain offline", args: "<file|->",
		about: `Reads a file written by sessiond export (or stdin for -) and checks its hash chain without
a server: each event line's bytes, as they are, hashed into the chain, the sequences without a
gap, and the trailer's counts, marks and head. A problem names its line and sequence; a
broken chain is located between two marks (1,024 events apart).
Exit 0: the chain holds; 1: it does not (each problem listed); 2: usage or I/O error.`, run: runVerify}
}

func runVerify(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cl := newCommandLine("verify", stdout, stderr)
	asJSON := cl.fs.Bool("json", false, "print the result as one JSON object")
	pos, code, ok := cl.parse(args)
	if !ok {
		return code
	}
	in, name := stdin, "stdin"
	if len(pos) == 1 && pos[0] != "-" {
		name = pos[0]
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(stderr, "sessiond verify: %v\nhint: give the file sessiond export wrote: sessiond export S-1 > S-1.jsonl && sessiond verify S-1.jsonl\n", err)
			return 2
		}
		defer f.Close()
		in = f
	}
	_, res, err := verifyExport(name, in)
	if err != nil {
		fmt.Fprintf(stderr, "sessiond verify: %v\n", err)
		return 2
	}
	if *asJSON {
		printJSON(stdout, res)
	} else if res.Valid {
		fmt.Fprintf(stdout, "%s: the chain holds: %s of session %s (sequences %d to %d), head %s\n", name, pluralEvents(res.Events), res.SessionID, res.First, res.Last, res.Head)
	} else {
		fmt.Fprintf(stdout, "%s: the chain does not hold (%s read)\n", name, pluralEvents(res.Events))
		for _, p := range res.Problems {
			fmt.Fprintf(stdout, "  %s\n", p)
		}
	}
	if !res.Valid {
		return 1
	}
	return 0
}

// pluralEvents is "1 event" or "n events".
func pluralEvents(n int64) string {
	if n == 1 {
		return "1 event"
	}
	return fmt.Sprintf("%d events", n)
}

// runExportChain writes session id's log as sessiond export does: each event's stored bytes on a
// line, then the chain trailer (chainfile.go).
func runExportChain(ctx context.Context, c *client.Client, id string, stdout io.Writer) error {
	sess, err := c.GetSession(ctx, id)
	if err != nil {
		return err
	}
	rec := sess.Record
	req := &api.CreateSessionRequest{AgentID: rec.AgentID, Role: rec.Role, Snapshot: sess.Snapshot}
	if p := rec.Project.Get(); p != "" {
		req.Project = &p
	}
	if m := rec.Mode.Get(); m != "" {
		req.Mode = &m
	}
	// One streamed answer (Client.Export), resumed by itself after a dropped connection.
	cw := newChainWriter(stdout, id, req)
	for ev, err := range c.Export(ctx, id, -1) {
		if err != nil {
			return err
		}
		if err := cw.event(ev.Data); err != nil {
			return pageDecodeError{err}
		}
	}
	return cw.close()
}

// importResult is what "sessiond import --format sessiond --json" prints for a file.
type importResult struct {
	File      string          `json:"file"`
	SessionID string          `json:"sessionId"`
	Events    int64           `json:"events"`
	Accepted  int             `json:"accepted"`
	Duplicate int             `json:"duplicate"`
	Problems  []verifyProblem `json:"problems,omitempty"`
	Error     string          `json:"error,omitempty"`
}

// importBatchBytes bounds the body of one append of an imported export.
const importBatchBytes = 1 << 20

// importExport imports one file written by sessiond export: it verifies the chain first (a
// file that does not verify is refused whole), creates the session from the trailer (an
// existing one is appended to: its events come back as duplicates), and appends the event
// lines as they are, in order, in batches that expect the log to end where the previous one
// left it, so that each event gets the sequence it had. The server stores each event's
// canonical bytes, which are the line's: exporting the session again gives the same lines.
func importExport(ctx context.Context, c *client.Client, path string) importResult {
	res := importResult{File: path}
	f, err := os.Open(path)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	tr, v, err := verifyExport(path, f)
	f.Close()
	switch {
	case err != nil:
		res.Error = err.Error()
		return res
	case !v.Valid:
		res.Problems, res.Error = v.Problems, "the file's chain does not hold (sessiond verify lists why); nothing was imported"
		return res
	case tr.Session == nil:
		res.Error = "the trailer names no session to create; export the session again with this sessiond"
		return res
	case tr.Events > 0 && tr.First != 0:
		res.Error = fmt.Sprintf("the export starts at sequence %d (its log was compacted before it was exported): only a whole log can be imported with its sequences", tr.First)
		return res
	}
	res.SessionID, res.Events = tr.SessionID, tr.Events
	req := *tr.Session
	req.SessionID = tr.SessionID
	_, err = c.CreateSession(ctx, req)
	var ae *api.Error
	if err != nil && !(errors.As(err, &ae) && ae.Code == contract.CodeSessionExists) {
		res.Error = fmt.Sprintf("create session %s: %v", tr.SessionID, err)
		return res
	}
	f, err = os.Open(path)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer f.Close()
	var body []byte
	n, last := 0, int64(-1)
	flush := func() error {
		if n == 0 {
			return nil
		}
		expected := last
		out, err := c.AppendNDJSONWith(ctx, tr.SessionID, body, client.AppendOptions{Expected: &expected, Multitask: contract.MultitaskEnqueue})
		if err != nil {
			return err
		}
		for _, r := range out.Results {
			if r.Status == api.Duplicate {
				res.Duplicate++
			} else {
				res.Accepted++
			}
		}
		last += int64(n)
		body, n = body[:0], 0
		return nil
	}
	err = eachLine(f, func(line []byte) error {
		if isChainTrailer(line) {
			return nil
		}
		if n == 1000 || (n > 0 && len(body)+len(line) > importBatchBytes) {
			if err := flush(); err != nil {
				return err
			}
		}
		body = append(append(body, line...), '\n')
		n++
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		res.Error = fmt.Sprintf("append to session %s after sequence %d: %v", tr.SessionID, last, err)
	}
	return res
}

// eachLine calls fn with each line of r (without its newline), whatever its length.
func eachLine(r io.Reader, fn func([]byte) error) error {
	br := newLineReader(r)
	for {
		line, err := br.next()
		if line != nil {
			if ferr := fn(line); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
