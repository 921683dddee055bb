package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
)

// appendPattern is the route of appends, whose refusals the metrics count by code.
const appendPattern = "POST /v1/sessions/{id}/events"

// handleAppend appends one event, a JSON array of events, or NDJSON
// (Content-Type: application/x-ndjson) to a session's log, all or nothing.
func (s *Server) handleAppend(w http.ResponseWriter, r *http.Request) {
	// Its refusals are counted by ServeHTTP (requestlog.go), those of the guard included.
	id := r.PathValue("id")
	m := s.opt.Metrics
	q := r.URL.Query() // the guard has refused unknown and repeated parameters; queryInt parses again only when expectedSequence is given
	var expected *int64
	if q.Has("expectedSequence") {
		n, aerr := queryInt(r, "expectedSequence", -1, -1, contract.MaxSafeInteger)
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		expected = &n
	}
	lease, aerr := leaseHeader(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	multitask := q.Get("multitask")
	if q.Has("multitask") && !contract.ValidMultitask(multitask) {
		writeError(w, api.Errorf(api.CodeMalformed, "multitask is %s; it must be reject, enqueue or interrupt (or leave it out for the session's default)", quote(multitask)))
		return
	}
	// The guard has checked the media type (the route table declares which ones append takes).
	mt := mediaType(r)
	ndjson := mt == "application/x-ndjson" || mt == "application/ndjson"
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var (
		events []*contract.EncodedEvent
		probs  []contract.Problem
	)
	if ndjson {
		events, probs = s.parseNDJSON(body)
	} else {
		events, probs = s.parseJSONEvents(body)
	}
	if len(probs) > 0 {
		writeError(w, validationError("events", probs))
		return
	}
	if len(events) == 0 {
		writeError(w, api.Errorf(api.CodeMalformed, "no events in the request body; send one event, a JSON array or NDJSON"))
		return
	}
	if len(events) > store.MaxBatchEvents {
		writeError(w, api.Errorf(api.CodeTooLarge, "batch has %d events; at most %d are allowed per request, split it", len(events), store.MaxBatchEvents))
		return
	}
	// The append is not tied to the request's context: once the body is read, a client that
	// disconnects gets its batch either fully committed or not at all, never half.
	// Every append from the runtime is a heartbeat, recorded in the append's transaction.
	start := time.Now()
	res, err := s.svc.AppendWith(context.WithoutCancel(r.Context()), id, events, session.AppendParams{Expected: expected, Lease: lease, Multitask: multitask})
	m.appendTook(time.Since(start))
	if err != nil {
		writeError(w, storeError(err, id))
		return
	}
	m.duplicates(res.Results)
	out := api.AppendResponse{Results: appendResults(res.Results), LastSequence: res.LastSequence}
	if res.Interrupted != nil {
		out.Interrupted = &api.Interruption{RunID: res.Interrupted.RunID, Results: appendResults(res.Interrupted.Results)}
	}
	status := http.StatusOK // only duplicates
	if res.Added {
		status = http.StatusCreated
	}
	// Encoded without reflection (api.AppendResponse.AppendJSON): every append is answered so.
	writeJSONBytes(w, status, append(out.AppendJSON(make([]byte, 0, 64+80*len(out.Results))), '\n'))
}

// appendResults are the wire form of an append's results.
func appendResults(res []store.AppendResult) []api.AppendResult {
	out := make([]api.AppendResult, len(res))
	for i, a := range res {
		st := api.Accepted
		if a.Duplicate {
			st = api.Duplicate
		}
		out[i] = api.AppendResult{EventID: a.EventID, Sequence: a.Sequence, Status: st}
	}
	return out
}

// prefixProblems puts a batch index in front of each problem's path.
func prefixProblems(probs []contract.Problem, index int, line int) []contract.Problem {
	for i := range probs {
		probs[i].Path = "/" + strconv.Itoa(index) + probs[i].Path
		if line > 0 {
			probs[i].Message = fmt.Sprintf("line %d: %s", line, probs[i].Message)
		}
	}
	return probs
}

// parseJSONEvents reads a body holding one event object or an array of them.
func (s *Server) parseJSONEvents(body []byte) ([]*contract.EncodedEvent, []contract.Problem) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		// The array adds one level of nesting; each event keeps the full depth allowance.
		v, err := contract.Parse(body, contract.Limits{MaxBytes: int(s.opt.MaxBodyBytes), MaxDepth: contract.DefaultMaxDepth + 1})
		if err != nil {
			return nil, []contract.Problem{syntaxToProblem(err)}
		}
		var (
			events []*contract.EncodedEvent
			probs  []contract.Problem
		)
		for i := range v.Elems {
			if len(v.Elems[i].Raw) > s.opt.MaxEventBytes {
				probs = append(probs, contract.Problem{Path: "/" + strconv.Itoa(i), Rule: "maxBytes", Layer: contract.LayerJSON,
					Message: fmt.Sprintf("event is %d bytes; the limit is %d", len(v.Elems[i].Raw), s.opt.MaxEventBytes)})
				continue
			}
			ev, p := contract.CheckEventValue(&v.Elems[i])
			if len(p) > 0 {
				probs = append(probs, prefixProblems(p, i, 0)...)
				continue
			}
			events = append(events, ev)
		}
		return events, probs
	}
	ev, err := contract.CheckEvent(body, contract.Limits{MaxBytes: s.opt.MaxEventBytes})
	if err != nil {
		return nil, problemsOf(err)
	}
	return []*contract.EncodedEvent{ev}, nil
}

// parseNDJSON reads one event per line; blank lines are skipped.
func (s *Server) parseNDJSON(body []byte) ([]*contract.EncodedEvent, []contract.Problem) {
	var (
		events []*contract.EncodedEvent
		probs  []contract.Problem
	)
	line, index := 0, 0
	for len(body) > 0 {
		line++
		var l []byte
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			l, body = body[:i], body[i+1:]
		} else {
			l, body = body, nil
		}
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		ev, err := contract.CheckEvent(l, contract.Limits{MaxBytes: s.opt.MaxEventBytes})
		if err != nil {
			probs = append(probs, prefixProblems(problemsOf(err), index, line)...)
		} else {
			events = append(events, ev)
		}
		index++
	}
	return events, probs
}

func problemsOf(err error) []contract.Problem {
	var ve *contract.ValidationError
	if errors.As(err, &ve) {
		return ve.Problems
	}
	return []contract.Problem{syntaxToProblem(err)}
}

func syntaxToProblem(err error) contract.Problem {
	var se *contract.SyntaxError
	if errors.As(err, &se) {
		return contract.Problem{Path: se.Path, Rule: se.Rule, Layer: contract.LayerJSON, Message: fmt.Sprintf("%s (at byte %d)", se.Msg, se.Offset)}
	}
	return contract.Problem{Rule: "json", Layer: contract.LayerJSON, Message: err.Error()}
}

// handleReadEvents returns the log in order: ?after=N (default -1) and ?limit=M (default 1000,
// at most 10000).
func (s *Server) handleReadEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	after, aerr := queryInt(r, "after", -1, -1, contract.MaxSafeInteger)
	if aerr == nil {
		var limit int64
		limit, aerr = queryInt(r, "limit", 1000, 1, 10000)
		if aerr == nil {
			s.writeEvents(w, r, id, after, int(limit))
			return
		}
	}
	writeError(w, aerr)
}

func (s *Server) writeEvents(w http.ResponseWriter, r *http.Request, id string, after int64, limit int) {
	// The events' stored bytes are copied by the store straight into the response buffer,
	// which is recycled (eventsBufs).
	bp := getEventsBuf()
	defer putEventsBuf(bp)
	buf := append((*bp)[:0], `{"events":[`...)
	buf, last, err := s.svc.AppendEventsJSON(r.Context(), id, after, limit, buf)
	if err != nil {
		writeError(w, storeError(err, id))
		return
	}
	buf = append(buf, `],"lastSequence":`...)
	buf = strconv.AppendInt(buf, last, 10)
	buf = append(buf, "}\n"...)
	*bp = buf
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(buf)))
	w.Write(buf)
}

// eventsBufs recycles the buffers writeEvents builds its responses in: a page of 10,000
// events is about 5 MB, which a new allocation would zero (and grow to) for every page read.
// It keeps at most keptEventsBufs buffers, each of at most maxPooledEventsBuf bytes, across
// garbage collections (a sync.Pool empties at every other collection, and reading a log makes
// garbage, the driver's copy of each row: pages then allocated and zeroed their buffers again,
// 0.35 s of the store's 1.26 s of reading in a profile of W5); a buffer past
// maxPooledEventsBuf, or one more than it keeps, is left to the collector.
var eventsBufs = make(chan *[]byte, keptEventsBufs)

// keptEventsBufs is how many buffers eventsBufs keeps: as many pages being read at once
// reuse their buffers; more allocate theirs. What they hold stays allocated: 4 × 5 MB
// once four pages of 10,000 events of 500 bytes were read at once, 4 × 16 MiB at most.
const keptEventsBufs = 4

// maxPooledEventsBuf is the largest buffer eventsBufs keeps: a full page of 1.6 KB events.
const maxPooledEventsBuf = 16 << 20

// getEventsBuf returns a kept buffer, or a new one when none is free.
func getEventsBuf() *[]byte {
	select {
	case bp := <-eventsBufs:
		return bp
	default:
		b := make([]byte, 0, 32<<10)
		return &b
	}
}

// putEventsBuf keeps bp for the next page, unless it is too large or enough are kept.
func putEventsBuf(bp *[]byte) {
	if cap(*bp) > maxPooledEventsBuf {
		return
	}
	*bp = (*bp)[:0]
	select {
	case eventsBufs <- bp:
	default:
	}
}

// exportPattern is the route of the streamed read of a whole log.
const exportPattern = "GET /v1/sessions/{id}/events/export"

// exportChunkEvents is how many events the export reads from the store and writes to the
// connection at a time: about 1 MB of typical events per write, large enough that the writes,
// flushes and store queries cost little per event, small enough that the client decodes one
// chunk while the server reads the next.
const exportChunkEvents = 2048

// handleExport serves GET /v1/sessions/{id}/events/export: the log from a starting point to its
// last sequence when the read began, as NDJSON, each line an event's stored bytes, written in
// large chunks straight from the store (no decoding or encoding). The starting point is the
// stream's: Last-Event-ID, else ?after, else the start of the log. Sessiond-Last-Sequence says
// where the body ends; a body cut short (the store failed part way, the connection dropped)
// ends without the chunked encoding's last chunk, so a client never takes a partial log for a
// whole one and resumes with after = the last sequence it received.
func (s *Server) handleExport(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx := r.Context()
	after := int64(-1)
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < -1 || n > contract.MaxSafeInteger {
			writeError(w, api.Errorf(api.CodeMalformed, "Last-Event-ID %s must be a sequence number (an integer from -1 to %d)", quote(v), int64(contract.MaxSafeInteger)))
			return
		}
		after = n
	} else {
		n, aerr := queryInt(r, "after", -1, -1, contract.MaxSafeInteger)
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		after = n
	}
	last, err := s.svc.LastSequence(ctx, id)
	if err != nil {
		writeError(w, storeError(err, id))
		return
	}
	bp := getEventsBuf()
	defer putEventsBuf(bp)
	// The first chunk is read before the answer starts: a failure there is answered as one.
	buf, n, err := s.svc.AppendEventLines(ctx, id, after, int(min(exportChunkEvents, max(last-after, 1))), (*bp)[:0])
	if err != nil {
		writeError(w, storeError(err, id))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-store")
	h.Set(api.LastSequenceHeader, strconv.FormatInt(last, 10))
	if after+int64(n) >= last {
		// All of it in one chunk: a plain answer with its length.
		*bp = buf
		h.Set("Content-Length", strconv.Itoa(len(buf)))
		w.WriteHeader(http.StatusOK)
		w.Write(buf)
		return
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for {
		_ = rc.SetWriteDeadline(time.Now().Add(s.opt.WriteTimeout))
		if _, err := w.Write(buf); err != nil {
			*bp = buf
			return // the client is gone
		}
		if err := rc.Flush(); err != nil {
			*bp = buf
			return
		}
		after += int64(n)
		if after >= last {
			*bp = buf
			return
		}
		buf, n, err = s.svc.AppendEventLines(ctx, id, after, int(min(exportChunkEvents, last-after)), buf[:0])
		if err == nil && n == 0 {
			err = fmt.Errorf("the log ends at sequence %d, before its last sequence %d", after, last)
		}
		if err != nil {
			*bp = buf
			if ctx.Err() == nil {
				s.requestLogger(w).Error("export cut short", "session", id, "after", after, "err", err)
			}
			// End the connection without the last chunk: the client sees a cut body.
			panic(http.ErrAbortHandler)
		}
	}
}
