package server

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sessiond/sessiond/api"
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

type hub struct {
	ringSize int
	mu       sync.Mutex
	topics   map[string]*topic
}

type topic struct {
	mu   sync.Mutex
	ring []store.StoredEvent // consecutive sequences, oldest first
	head int64               // last sequence known committed (-1 unknown/empty)
	subs map[*subscriber]struct{}
}

type subscriber struct {
	wake chan struct{}
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
	if c.LastSequence > t.head {
		t.head = c.LastSequence
	}
	for _, e := range c.Events {
		if n := len(t.ring); n > 0 && e.Sequence != t.ring[n-1].Sequence+1 {
			// Not contiguous (a commit seen out of order): start afresh. A new array, never
			// t.ring[:0], because subscribers may hold slices of the old one.
			t.ring = nil
		}
		t.ring = append(t.ring, e)
	}
	if over := len(t.ring) - h.ringSize; over > 0 {
		// Drop the oldest quarter at once so trimming is amortised.
		drop := over + h.ringSize/4
		if drop > len(t.ring) {
			drop = len(t.ring)
		}
		t.ring = append(t.ring[:0:0], t.ring[drop:]...)
	}
	for s := range t.subs {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	t.mu.Unlock()
}

func (h *hub) join(sessionID string) (*topic, *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[sessionID]
	if t == nil {
		t = &topic{head: -1, subs: map[*subscriber]struct{}{}}
		h.topics[sessionID] = t
	}
	s := &subscriber{wake: make(chan struct{}, 1)}
	t.mu.Lock()
	t.subs[s] = struct{}{}
	t.mu.Unlock()
	return t, s
}

func (h *hub) leave(sessionID string, t *topic, s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t.mu.Lock()
	delete(t.subs, s)
	empty := len(t.subs) == 0
	t.mu.Unlock()
	if empty && h.topics[sessionID] == t {
		delete(h.topics, sessionID)
	}
}

// since returns the ring's events after cursor, if the ring covers cursor+1; ok is false when
// the caller must read from the store instead.
func (t *topic) since(cursor int64, max int) (evs []store.StoredEvent, head int64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	head = t.head
	if len(t.ring) == 0 || t.ring[0].Sequence > cursor+1 {
		return nil, head, false
	}
	i := int(cursor + 1 - t.ring[0].Sequence)
	if i >= len(t.ring) {
		return nil, head, true
	}
	evs = t.ring[i:]
	if len(evs) > max {
		evs = evs[:max]
	}
	return evs, head, true
}

const streamBatch = 512

// handleStream serves GET /v1/sessions/{id}/events/stream as Server-Sent Events.
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx := r.Context()
	last, err := s.st.LastSequence(ctx, id)
	if err != nil {
		writeError(w, storeError(err, id))
		return
	}
	cursor := int64(-1)
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < -1 {
			writeError(w, api.Errorf(api.CodeMalformed, "Last-Event-ID %q must be a sequence number (an integer >= -1)", v))
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
	} else if t := r.URL.Query().Get("tail"); t == "true" || t == "1" {
		cursor = last
	}

	t, sub := s.hub.join(id)
	defer s.hub.leave(id, t, sub)

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, 0, 4096)
	// The opening block carries the starting cursor as an id without data: clients (and
	// browsers' EventSource) that drop before the first event resume from here.
	buf = append(buf, "retry: 1000\nid: "...)
	buf = strconv.AppendInt(buf, cursor, 10)
	buf = append(buf, "\n\n"...)
	if !s.flush(rc, w, buf) {
		return
	}
	keepAlive := time.NewTicker(s.opt.KeepAlive)
	defer keepAlive.Stop()
	head := last
	// caughtUp turns true once the subscriber has been at the head: only then does falling
	// MaxLag behind count as too slow (replaying a long history does not).
	caughtUp := false
	for {
		evs, h2, ok := t.since(cursor, streamBatch)
		if h2 > head {
			head = h2
		}
		if !ok {
			evs, err = s.st.ReadEvents(ctx, id, cursor, streamBatch)
			if err != nil {
				if ctx.Err() == nil {
					s.finalMessage(rc, w, "STREAM_FAILED", fmt.Sprintf("reading the log failed: %v; reconnect with Last-Event-ID: %d", err, cursor))
				}
				return
			}
		}
		if len(evs) > 0 {
			buf = buf[:0]
			for _, e := range evs {
				buf = appendSSE(buf, e)
			}
			cursor = evs[len(evs)-1].Sequence
			if !s.flush(rc, w, buf) {
				return
			}
			if caughtUp && head-cursor > s.opt.MaxLag {
				s.finalMessage(rc, w, "SUBSCRIBER_TOO_SLOW", fmt.Sprintf("this stream fell %d events behind the head; reconnect with Last-Event-ID: %d to resume without a gap", head-cursor, cursor))
				return
			}
			continue
		}
		caughtUp = true
		select {
		case <-sub.wake:
		case <-keepAlive.C:
			if !s.flush(rc, w, []byte(": keep-alive\n\n")) {
				return
			}
		case <-ctx.Done():
			return
		case <-s.shutdown:
			s.finalMessage(rc, w, "SHUTTING_DOWN", fmt.Sprintf("the server is shutting down; reconnect with Last-Event-ID: %d", cursor))
			return
		}
	}
}

func appendSSE(buf []byte, e store.StoredEvent) []byte {
	buf = append(buf, "id: "...)
	buf = strconv.AppendInt(buf, e.Sequence, 10)
	buf = append(buf, "\nevent: "...)
	buf = append(buf, e.EventType...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, e.Data...)
	return append(buf, "\n\n"...)
}

// flush writes b and flushes it within the write timeout; false means the subscriber is gone
// or too slow to take a write, and the stream ends.
func (s *Server) flush(rc *http.ResponseController, w http.ResponseWriter, b []byte) bool {
	_ = rc.SetWriteDeadline(time.Now().Add(s.opt.WriteTimeout))
	if _, err := w.Write(b); err != nil {
		return false
	}
	return rc.Flush() == nil
}

// finalMessage sends an "error" event that tells the subscriber why the stream ends and how
// to resume.
func (s *Server) finalMessage(rc *http.ResponseController, w http.ResponseWriter, code, msg string) {
	b, _ := contract.Marshal(api.Error{Code: code, Message: msg})
	out := append([]byte("event: error\ndata: "), b...)
	s.flush(rc, w, append(out, "\n\n"...))
}
