package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/bridge"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// The live fan-out. Each SSE subscriber owns a cursor (the last sequence it sent) and pulls
// events after it: from the in-memory ring of its session's recent commits when the cursor is
// inside it, otherwise from the store. A commit only appends to the ring and wakes the
// subscribers with a non-blocking signal, so writers never wait for readers and a slow reader
// only delays itself. Because every event is in the store before it reaches the ring, and a
// cursor only moves forward by what was sent, there is no gap and no repeat at the seam
// between history and live tail.
//
// The ring holds each event already encoded as an SSE block, the blocks of consecutive
// sequences back to back in one byte slab, so that a subscriber sends any run of them with a
// single Write of a sub-slice: the encoding is done once per event, not once per subscriber,
// and nothing is copied per subscriber. The publisher (the store's commit callback) builds an
// immutable ringView and swaps it in atomically, so subscribers read the ring without taking a
// lock; it wakes them all at once by closing the previous view's changed channel.
// Slab and offsets are append-only: a new view may extend the arrays an older view points
// into, but only beyond the older view's length, and trimming copies into new arrays, so a
// view never changes once published.

type hub struct {
	ringSize int
	mu       sync.Mutex
	topics   map[string]*topic
}

type topic struct {
	mu   sync.Mutex // serialises publishers; subscribers only load view
	view atomic.Pointer[ringView]
	subs int // guarded by hub.mu
}

// ringView is one published state of a topic's ring. It never changes after it is stored.
type ringView struct {
	first int64  // sequence of the first block in slab (when ends is not empty)
	ends  []int  // ends[i] is the end offset in slab of the block of sequence first+i
	slab  []byte // SSE blocks, back to back
	// decoded[i] is the event of sequence first+i as the protocol bridges read it, decoded
	// by the first bridge stream that needs it and shared by the others.
	decoded []*decodedEvent
	head    int64 // last sequence known committed (-1 unknown/empty)
	// changed is closed when a newer view replaces this one.
	changed chan struct{}
}

func newHub(ringSize int) *hub {
	return &hub{ringSize: ringSize, topics: map[string]*topic{}}
}

// publish is the store's commit callback: it must not block.
func (h *hub) publish(c store.Commit) {
	h.mu.Lock()
	t := h.topics[c.SessionID]
	h.mu.Unlock()
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.view.Load()
	nv := &ringView{first: old.first, ends: old.ends, slab: old.slab, decoded: old.decoded, head: old.head, changed: make(chan struct{})}
	if c.LastSequence > nv.head {
		nv.head = c.LastSequence
	}
	cells := make([]decodedEvent, len(c.Events))
	for i, e := range c.Events {
		if n := len(nv.ends); n > 0 && e.Sequence != nv.first+int64(n) {
			// Not contiguous (a commit seen out of order): start afresh, in new arrays.
			nv.ends, nv.slab, nv.decoded = nil, nil, nil
		}
		if len(nv.ends) == 0 {
			nv.first = e.Sequence
		}
		nv.slab = appendSSE(nv.slab, e)
		nv.ends = append(nv.ends, len(nv.slab))
		nv.decoded = append(nv.decoded, &cells[i])
	}
	if over := len(nv.ends) - h.ringSize; over > 0 {
		// Drop the oldest quarter at once so trimming is amortised; copy into new arrays,
		// because older views still point into the current ones.
		drop := min(over+h.ringSize/4, len(nv.ends))
		cut := nv.ends[drop-1]
		ends := make([]int, len(nv.ends)-drop, h.ringSize)
		for i, e := range nv.ends[drop:] {
			ends[i] = e - cut
		}
		nv.slab = append(make([]byte, 0, 2*(len(nv.slab)-cut)), nv.slab[cut:]...)
		nv.ends = ends
		nv.decoded = append(make([]*decodedEvent, 0, h.ringSize), nv.decoded[drop:]...)
		nv.first += int64(drop)
	}
	t.view.Store(nv)
	close(old.changed)
}

func (h *hub) join(sessionID string) *topic {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[sessionID]
	if t == nil {
		t = &topic{}
		t.view.Store(&ringView{head: -1, changed: make(chan struct{})})
		h.topics[sessionID] = t
	}
	t.subs++
	return t
}

func (h *hub) leave(sessionID string, t *topic) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t.subs--
	if t.subs == 0 && h.topics[sessionID] == t {
		delete(h.topics, sessionID)
	}
}

// since returns the SSE blocks of at most max ring events after cursor (in one slice) and the
// sequence of the last of them, if the ring covers cursor+1; ok is false when the caller must
// read from the store instead.
func (v *ringView) since(cursor int64, max int) (blocks []byte, last int64, ok bool) {
	n := len(v.ends)
	if n == 0 || v.first > cursor+1 {
		return nil, cursor, false
	}
	i := int(cursor + 1 - v.first)
	if i >= n {
		return nil, cursor, true
	}
	j := min(i+max, n) // blocks i .. j-1
	start := 0
	if i > 0 {
		start = v.ends[i-1]
	}
	return v.slab[start:v.ends[j-1]], v.first + int64(j-1), true
}

// events returns up to max ring events after cursor, read back from their SSE blocks
// (the sequence and the stored JSON only: not the event type or the run id, which the
// bridges read from the JSON), if the ring covers cursor+1; ok is false when the caller
// must read from the store instead. The data slices point into
// the ring, which never changes once published.
func (v *ringView) events(cursor int64, max int, out []store.StoredEvent) (evs []store.StoredEvent, ok bool) {
	n := len(v.ends)
	if n == 0 || v.first > cursor+1 {
		return out[:0], false
	}
	i := int(cursor + 1 - v.first)
	out = out[:0]
	for ; i < n && len(out) < max; i++ {
		start := 0
		if i > 0 {
			start = v.ends[i-1]
		}
		block := v.slab[start:v.ends[i]]
		// "id: N\nevent: ev.TYPE\ndata: JSON\n\n" (appendSSE)
		e := store.StoredEvent{Sequence: v.first + int64(i)}
		j := bytes.Index(block, []byte("\ndata: "))
		if j < 0 || len(block) < j+len("\ndata: ")+2 {
			return out[:0], false
		}
		e.Data = block[j+len("\ndata: ") : len(block)-2]
		out = append(out, e)
	}
	return out, true
}

// decodedEvent holds a ring event as the protocol bridges read it (nil until a bridge stream
// decodes it). Two streams may decode the same event at once; both results are equal and
// either is kept.
type decodedEvent struct{ e atomic.Pointer[bridge.Event] }

// bridgeEvent returns the event se, read from this view (events), decoded for the protocol
// bridges: the first bridge stream to need it decodes it, the others share that decoding.
func (v *ringView) bridgeEvent(se store.StoredEvent) (*bridge.Event, error) {
	i := se.Sequence - v.first
	if i < 0 || i >= int64(len(v.decoded)) {
		return bridge.Decode(se.Data)
	}
	cell := v.decoded[i]
	if e := cell.e.Load(); e != nil {
		return e, nil
	}
	e, err := bridge.Decode(se.Data)
	if err == nil {
		cell.e.Store(e)
	}
	return e, err
}

const streamBatch = 512

// handleStream serves GET /v1/sessions/{id}/events/stream as Server-Sent Events.
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx := r.Context()
	last, err := s.svc.LastSequence(ctx, id)
	if err != nil {
		writeError(w, apiError(err, id))
		return
	}
	cursor := int64(-1)
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < -1 {
			writeError(w, api.Errorf(contract.CodeMalformed, "Last-Event-ID %s must be a sequence number (an integer >= -1)", quote(v)))
			return
		}
		cursor = n
	} else if r.URL.Query().Has("after") {
		n, aerr := queryInt(r, "after", -1, -1, contract.MaxSafeInteger)
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		cursor = n
	} else if r.URL.Query().Has("tail") {
		switch t := r.URL.Query().Get("tail"); t {
		case "true", "1":
			cursor = last
		case "false", "0":
		default:
			writeError(w, api.Errorf(contract.CodeMalformed, "query parameter tail=%s must be true or false (true: only events appended from now on)", quote(t)))
			return
		}
	}

	st := s.joinSession(id)
	defer st.leave()
	sw, ok := s.openSSE(w, r, cursor)
	defer sw.end()
	if !ok {
		return
	}
	s.follow(ctx, sw, &logTail{sessionTail: st, cursor: cursor, last: last, head: last})
}

func appendSSE(buf []byte, e store.StoredEvent) []byte {
	buf = append(buf, "id: "...)
	buf = strconv.AppendInt(buf, e.Sequence, 10)
	buf = append(buf, "\nevent: "+api.SSEEventPrefix...)
	buf = append(buf, e.EventType...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, e.Data...)
	return append(buf, "\n\n"...)
}

// sseWriter writes a stream's blocks, each write bounded by the write timeout.
//
// On HTTP/1.1 it takes the connection over from net/http (Hijack) and writes each flush as
// one chunk with a single writev: through the ResponseWriter, a run of blocks larger than the
// connection's 4 KiB buffer costs three writes (the buffer, the rest, the chunk's CRLF), and
// on loopback each of them also wakes the reader. With 1,000 subscribers per commit those
// syscalls were most of the fan-out's CPU. The taken-over connection is closed when the
// stream ends, after the chunked body's terminator, as net/http would have done; a reader
// goroutine notices the client going away (the request context no longer does). Other
// protocols (HTTP/2, HTTP/1.0) and ResponseWriters that cannot be hijacked use the
// ResponseWriter.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	conn    net.Conn      // set when the connection was taken over
	gone    chan struct{} // closed when the client closes a taken-over connection
	hdr     [20]byte
	timeout time.Duration
	setAt   time.Time // when the write deadline was last moved
	done    func()
	metrics *Metrics     // counts the stream's end when the server ends it
	watch   *streamWatch // the stream's credential (revocation.go); nil when not watched
	// broken is set when a write failed: a chunk may have gone out in part, so no more bytes
	// (not even the body's terminator, which would complete the cut chunk) may follow.
	broken bool
}

var crlf = []byte("\r\n")

// await waits, on a stream at its head, until changed is closed (there is more to send) or a
// keep-alive is due (sent here). It reports false when the stream is over: the client left,
// the request ended, the keep-alive could not be written, the server is shutting down or the
// stream's credential lapsed (the final message, with the cursor to resume from, is sent for
// these two).
func (s *Server) await(ctx context.Context, sw *sseWriter, changed <-chan struct{}, keepAlive <-chan time.Time, cursor int64) bool {
	select {
	case <-changed:
		return true
	case <-keepAlive:
		return sw.flush([]byte(": keep-alive\n\n"))
	case <-ctx.Done():
		return false
	case <-sw.gone:
		return false
	case <-s.shutdown:
		s.shuttingDown(sw, cursor)
		return false
	case <-sw.lapsed():
		sw.credentialLapsed(cursor)
		return false
	}
}

// interrupted reports, without waiting, whether a stream that has more to send must end
// first (a long replay never waits in await): the client left, the server is shutting down
// or the stream's credential lapsed (the final message is sent for these two).
func (s *Server) interrupted(sw *sseWriter, cursor int64) bool {
	select {
	case <-s.shutdown:
		s.shuttingDown(sw, cursor)
		return true
	case <-sw.gone:
		return true
	case <-sw.lapsed():
		sw.credentialLapsed(cursor)
		return true
	default:
		return false
	}
}

// shuttingDown sends the final block of a stream the server ends because it shuts down.
func (s *Server) shuttingDown(sw *sseWriter, cursor int64) {
	sw.finalMessage(contract.CodeShuttingDown, fmt.Sprintf("the server is shutting down; reconnect with Last-Event-ID: %d", cursor))
}

// openSSE starts an event stream (startSSE) and sends its opening block: the reconnect delay
// and the starting cursor as an id without data, so clients (and browsers' EventSource) that
// drop before the first block resume from there. ok is false when the client is gone; the
// caller calls end on sw in either case.
func (s *Server) openSSE(w http.ResponseWriter, r *http.Request, cursor int64) (sw *sseWriter, ok bool) {
	opening := make([]byte, 0, 64)
	opening = append(opening, "retry: 1000\nid: "...)
	opening = strconv.AppendInt(opening, cursor, 10)
	opening = append(opening, "\n\n"...)
	sw = s.startSSE(w, r)
	return sw, sw.flush(opening)
}

// startSSE sends the response header of an event stream and returns its writer. The caller
// must call end when the stream is over. extra, when its name is not empty, is one more
// response header (name, value): the AI SDK's protocol version header.
func (s *Server) startSSE(w http.ResponseWriter, r *http.Request, extra ...[2]string) *sseWriter {
	var extraHdr string
	for _, h := range extra {
		if h[0] != "" {
			extraHdr += h[0] + ": " + h[1] + "\r\n"
		}
	}
	sw := &sseWriter{w: w, rc: http.NewResponseController(w), timeout: s.opt.WriteTimeout, metrics: s.opt.Metrics}
	sw.watch, _ = r.Context().Value(streamWatchKey{}).(*streamWatch)
	if r.ProtoMajor == 1 && r.ProtoMinor == 1 && s.addStream() {
		conn, brw, err := sw.rc.Hijack()
		if err == nil && brw.Reader.Buffered() == 0 {
			sw.conn, sw.gone, sw.done = conn, make(chan struct{}), s.streams.Done
			// A read deadline left from the http.Server's ReadTimeout would end the stream.
			_ = conn.SetReadDeadline(time.Time{})
			go func() {
				// Nothing more is expected from the client: any byte or error ends the stream.
				var b [1]byte
				conn.Read(b[:])
				close(sw.gone)
			}()
			// The header net/http would have sent is written here: X-Request-Id, set by
			// ServeHTTP on w, included.
			hdr := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n" +
				"X-Accel-Buffering: no\r\n" + requestIDHeader + ": " + w.Header().Get(requestIDHeader) + "\r\n" + extraHdr + "Date: " + time.Now().UTC().Format(http.TimeFormat) + "\r\n" +
				"Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
			sw.setDeadline()
			if _, err := io.WriteString(conn, hdr); err != nil {
				conn.Close()
			}
			return sw
		}
		s.streams.Done()
		if err == nil {
			// Pipelined bytes after the request: not for an event stream.
			conn.Close()
			sw.gone = make(chan struct{})
			close(sw.gone)
			return sw
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	for _, x := range extra {
		if x[0] != "" {
			h.Set(x[0], x[1])
		}
	}
	w.WriteHeader(http.StatusOK)
	return sw
}

// addStream counts a stream that takes its connection over, unless the server is closing.
func (s *Server) addStream() bool {
	s.streamMu.Lock()
	defer s.streamMu.Unlock()
	if s.closing.Load() {
		return false
	}
	s.streams.Add(1)
	return true
}

// setDeadline moves the write deadline, unless it was moved less than an eighth of the
// timeout ago (moving it costs a timer update): every write still gets at least 7/8 of the
// timeout, a stuck one at most all of it.
func (sw *sseWriter) setDeadline() {
	if now := time.Now(); now.Sub(sw.setAt) >= sw.timeout/8 {
		if sw.conn != nil {
			_ = sw.conn.SetWriteDeadline(now.Add(sw.timeout))
		} else {
			_ = sw.rc.SetWriteDeadline(now.Add(sw.timeout))
		}
		sw.setAt = now
	}
}

// flush writes b and flushes it within the write timeout; false means the subscriber is gone
// or too slow to take a write, and the stream ends.
func (sw *sseWriter) flush(b []byte) bool {
	if sw.broken {
		return false
	}
	sw.setDeadline()
	if sw.conn != nil {
		hdr := strconv.AppendInt(sw.hdr[:0], int64(len(b)), 16)
		hdr = append(hdr, "\r\n"...)
		bufs := net.Buffers{hdr, b, crlf}
		if _, err := bufs.WriteTo(sw.conn); err != nil {
			sw.broken = true
			sw.failed(err)
			return false
		}
		return true
	}
	if _, err := sw.w.Write(b); err != nil {
		sw.failed(err)
		return false
	}
	if err := sw.rc.Flush(); err != nil {
		sw.failed(err)
		return false
	}
	return true
}

// failed counts a write that timed out: the subscriber could not take it and is cut off.
func (sw *sseWriter) failed(err error) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		sw.metrics.streamEnded("write_timeout")
	}
}

// end finishes a taken-over connection: the chunked body's terminator, then close.
func (sw *sseWriter) end() {
	if sw.conn == nil {
		return
	}
	if !sw.broken {
		sw.setAt = time.Time{}
		sw.setDeadline()
		io.WriteString(sw.conn, "0\r\n\r\n")
	}
	sw.conn.Close()
	sw.done()
}

// finalMessage sends the api.SSEStreamError block that tells the subscriber why the stream
// ends and how to resume.
func (sw *sseWriter) finalMessage(code contract.ErrorCode, msg string) {
	sw.metrics.streamEnded(string(code))
	b, _ := contract.Marshal(api.Error{Code: code, Message: msg})
	out := append([]byte("event: "+api.SSEStreamError+"\ndata: "), b...)
	sw.flush(append(out, "\n\n"...))
}
