package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/store"
)

// The exported log (sessiond export): one event per line, each line the event's stored bytes
// exactly as the server stored and serves them, then one trailer line that carries the log's
// hash chain (store/chain.go) beside the events, so the events themselves stay plain contract
// events:
//
//	{"sessiondChain":{"version":1,"sessionId":"S-1","first":0,"last":2,"events":3,
//	  "base":"<64 hex digits>","head":"<64 hex digits>","every":1024,"marks":["<64 hex>",...],
//	  "session":{...}}}
//
// first and last are the sequences of the first and last event line; base is the hash the
// first event chains to (32 zero bytes, the chain's genesis; an export of a log compacted
// before it starts its chain there too, at its first exported event); head is the hash of
// the last event; marks are the hashes after every every-th event (after events 1024, 2048, ...)
// so that a verifier can say where the chain breaks; session is what `sessiond import` needs to
// create the session again (its agent, role, project, mode and snapshot). `sessiond verify`
// checks the chain by hashing each line's bytes as they are, without parsing them;
// `sessiond validate` skips the trailer.

// chainTrailerPrefix starts the trailer line, and no event line.
const chainTrailerPrefix = `{"sessiondChain":`

// chainMarkEvery is how many events apart the trailer's marks are.
const chainMarkEvery = 1024

// exportTrailer is the trailer line.
type exportTrailer struct {
	Chain exportChain `json:"sessiondChain"`
}

// exportChain is the trailer's content.
type exportChain struct {
	Version   int                       `json:"version"`
	SessionID string                    `json:"sessionId"`
	First     int64                     `json:"first"`
	Last      int64                     `json:"last"`
	Events    int64                     `json:"events"`
	Base      string                    `json:"base"`
	Head      string                    `json:"head"`
	Every     int64                     `json:"every"`
	Marks     []string                  `json:"marks"`
	Session   *api.CreateSessionRequest `json:"session,omitempty"`
}

// isChainTrailer reports whether a line is an export's trailer.
func isChainTrailer(line []byte) bool { return bytes.HasPrefix(line, []byte(chainTrailerPrefix)) }

// chainWriter writes an export: each event line, then the trailer.
type chainWriter struct {
	w  *bufio.Writer
	ch *store.Chainer
	tr exportChain
}

func newChainWriter(w io.Writer, sessionID string, session *api.CreateSessionRequest) *chainWriter {
	g := store.ChainGenesis
	return &chainWriter{w: bufio.NewWriterSize(w, 256<<10), ch: store.NewChainer(g),
		tr: exportChain{Version: 1, SessionID: sessionID, First: -1, Last: -1, Base: hex.EncodeToString(g[:]), Every: chainMarkEvery, Marks: []string{}, Session: session}}
}

// event writes one event line: the event's bytes as served.
func (cw *chainWriter) event(raw []byte) error {
	seq, ok := lineSequence(raw)
	if !ok {
		return fmt.Errorf("event %d of the log has no sequence", cw.tr.Events)
	}
	if cw.tr.First < 0 {
		cw.tr.First = seq
	}
	cw.tr.Last = seq
	h := cw.ch.Add(raw)
	cw.tr.Events++
	if cw.tr.Events%chainMarkEvery == 0 {
		cw.tr.Marks = append(cw.tr.Marks, hex.EncodeToString(h[:]))
	}
	cw.w.Write(raw)
	return cw.w.WriteByte('\n')
}

// close writes the trailer and flushes.
func (cw *chainWriter) close() error {
	h := cw.ch.Head()
	cw.tr.Head = hex.EncodeToString(h[:])
	line, err := json.Marshal(exportTrailer{Chain: cw.tr})
	if err != nil {
		return err
	}
	cw.w.Write(line)
	cw.w.WriteByte('\n')
	return cw.w.Flush()
}

// lineSequence finds the top-level sequence of an event line without decoding it: the first
// `"sequence":` of a compact JSON object is its key (a string holding those bytes would have
// its quotes escaped), and the contract's canonical order puts it before the payload.
func lineSequence(line []byte) (int64, bool) {
	const key = `"sequence":`
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return 0, false
	}
	j := i + len(key)
	k := j
	for k < len(line) && line[k] >= '0' && line[k] <= '9' {
		k++
	}
	n, err := strconv.ParseInt(string(line[j:k]), 10, 64)
	return n, err == nil && k > j
}

// lineReader reads lines of any length.
type lineReader struct {
	br   *bufio.Reader
	long []byte
}

func newLineReader(r io.Reader) *lineReader { return &lineReader{br: bufio.NewReaderSize(r, 1<<20)} }

// next returns the next line without its newline (valid until the next call; nil at the end)
// and io.EOF after the last one.
func (lr *lineReader) next() ([]byte, error) {
	for {
		line, err := lr.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			lr.long = append(lr.long, line...)
			continue
		}
		if lr.long != nil {
			line = append(lr.long, line...)
			lr.long = nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if len(line) == 0 {
			return nil, io.EOF
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}

// verifyProblem is one reason an exported log does not verify: where (the line, and the
// sequence when one is known) and what.
type verifyProblem struct {
	Line     int64  `json:"line"`
	Sequence *int64 `json:"sequence,omitempty"`
	Message  string `json:"message"`
}

func (p verifyProblem) String() string {
	if p.Sequence != nil {
		return fmt.Sprintf("line %d (sequence %d): %s", p.Line, *p.Sequence, p.Message)
	}
	return fmt.Sprintf("line %d: %s", p.Line, p.Message)
}

// verifyResult is what `sessiond verify --json` prints for a file.
type verifyResult struct {
	File      string          `json:"file"`
	Valid     bool            `json:"valid"`
	SessionID string          `json:"sessionId,omitempty"`
	Events    int64           `json:"events"`
	First     int64           `json:"first"`
	Last      int64           `json:"last"`
	Head      string          `json:"head,omitempty"`
	Problems  []verifyProblem `json:"problems"`
}

// maxVerifyProblems bounds the problems one verification lists.
const maxVerifyProblems = 100

// verifyExport checks an exported log read from r: every event line's bytes are hashed as
// they are into the chain from the trailer's base, the sequences run on from the trailer's
// first without a gap, the line count, first, last, marks and head are the trailer's. The
// lines are never decoded (only their sequence is looked up, lineSequence). It returns the
// trailer (nil when there is none) and the result; err is a read failure.
func verifyExport(name string, r io.Reader) (*exportChain, verifyResult, error) {
	res := verifyResult{File: name, First: -1, Last: -1, Problems: []verifyProblem{}}
	problem := func(line int64, seq *int64, format string, args ...any) {
		if len(res.Problems) < maxVerifyProblems {
			res.Problems = append(res.Problems, verifyProblem{Line: line, Sequence: seq, Message: fmt.Sprintf(format, args...)})
		}
	}
	lr := newLineReader(r)
	ch := store.NewChainer(store.ChainGenesis)
	var (
		tr       *exportChain
		trLine   int64
		marks    []store.ChainHash // the hashes after every chainMarkEvery-th event
		lineNo   int64
		next     int64 = -1
		afterEnd bool  // a line after the trailer
	)
	for {
		line, err := lr.next()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, res, fmt.Errorf("read %s: %w", name, err)
		}
		if line == nil {
			break
		}
		lineNo++
		switch {
		case tr != nil:
			if !afterEnd {
				problem(lineNo, nil, "a line after the chain trailer (line %d): the trailer must be the file's last line", trLine)
				afterEnd = true
			}
		case isChainTrailer(line):
			tr, trLine = new(exportChain), lineNo
			dec := json.NewDecoder(bytes.NewReader(line))
			dec.DisallowUnknownFields()
			var t exportTrailer
			if derr := dec.Decode(&t); derr != nil {
				problem(lineNo, nil, "the chain trailer does not decode: %v", derr)
			} else {
				*tr = t.Chain
			}
		default:
			seq, ok := lineSequence(line)
			switch {
			case !ok:
				problem(lineNo, nil, "not an event line (no sequence)")
			case next >= 0 && seq != next:
				problem(lineNo, &seq, "sequence %d follows sequence %d: events are missing, repeated or out of order", seq, next-1)
			}
			if ok {
				if res.First < 0 {
					res.First = seq
				}
				res.Last, next = seq, seq+1
			}
			h := ch.Add(line)
			res.Events++
			if res.Events%chainMarkEvery == 0 {
				marks = append(marks, h)
			}
		}
		if err != nil {
			break
		}
	}
	head := ch.Head()
	res.Head = hex.EncodeToString(head[:])
	if tr == nil {
		problem(lineNo, nil, "no chain trailer: the file does not end with the %s line that sessiond export writes (cut short, or not an export)", chainTrailerPrefix)
		res.Valid = false
		return nil, res, nil
	}
	res.SessionID = tr.SessionID
	checkTrailer(tr, trLine, &res, marks, head, problem)
	res.Valid = len(res.Problems) == 0
	return tr, res, nil
}

// checkTrailer compares what was read of the events with the trailer at line trLine.
func checkTrailer(tr *exportChain, trLine int64, res *verifyResult, marks []store.ChainHash, head store.ChainHash, problem func(int64, *int64, string, ...any)) {
	if tr.Version != 1 {
		problem(trLine, nil, "chain trailer version %d is not supported (this sessiond reads 1); upgrade sessiond", tr.Version)
		return
	}
	if base, err := store.ParseChainHash(tr.Base); err != nil || base != store.ChainGenesis {
		problem(trLine, nil, "the chain trailer's base is %q, not the chain's genesis (64 zeros)", tr.Base)
		return
	}
	if tr.Events != res.Events || (res.Events > 0 && (tr.First != res.First || tr.Last != res.Last)) {
		problem(trLine, nil, "the chain trailer says %d events, sequences %d to %d, but the file holds %d, sequences %d to %d: lines were added or removed", tr.Events, tr.First, tr.Last, res.Events, res.First, res.Last)
	}
	if tr.Every != chainMarkEvery {
		problem(trLine, nil, "the chain trailer's marks are every %d events; this sessiond writes and reads every %d", tr.Every, chainMarkEvery)
		return
	}
	// The first mark that differs bounds where the chain breaks.
	from := int64(1)
	for i, m := range marks {
		to := int64(i+1) * chainMarkEvery
		if i >= len(tr.Marks) {
			break
		}
		want, err := store.ParseChainHash(tr.Marks[i])
		if err != nil || want != m {
			problem(from, seqAt(res, from), "the chain breaks between line %d and line %d (sequences %d to %d): an event there was altered, added or removed after the export", from, to, res.First+from-1, res.First+to-1)
			return
		}
		from = to + 1
	}
	if want, err := store.ParseChainHash(tr.Head); err != nil || want != head {
		problem(from, seqAt(res, from), "the chain breaks between line %d and line %d (sequences %d to %d): the events hash to head %x, the trailer says %s", from, res.Events, res.First+from-1, res.Last, head[:8], tr.Head)
	}
}

// seqAt is the sequence of event line n (1-based) of a file whose lines run on without a gap.
func seqAt(res *verifyResult, n int64) *int64 {
	if res.First < 0 || n > res.Events {
		return nil
	}
	s := res.First + n - 1
	return &s
}
