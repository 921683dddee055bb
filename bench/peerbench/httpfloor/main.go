package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"sync"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7499", "the address to listen on")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "httpfloor: unexpected argument %q; the only flag is --addr\n", flag.Arg(0))
		os.Exit(2)
	}
	f := &floor{sessions: map[string]*session{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions", f.create)
	mux.HandleFunc("POST /v1/sessions/{id}/events", f.append)
	mux.HandleFunc("GET /v1/sessions/{id}/events", f.read)
	mux.HandleFunc("GET /v1/sessions/{id}/events/stream", f.stream)
	log.Fatal(http.ListenAndServe(*addr, mux))
}

// floor holds the sessions, in memory.
type floor struct {
	mu       sync.Mutex
	sessions map[string]*session
}

// session is one session's log: its events' lines in sequence order and the sequence of
// each idempotency key.
type session struct {
	mu      sync.Mutex
	events  [][]byte
	keys    map[string]int
	changed chan struct{} // closed (and replaced) when events grow
}

func (f *floor) get(id string) *session {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sessions[id]
}

func (f *floor) create(w http.ResponseWriter, r *http.Request) {
	var body struct {
		SessionID string `json:"session_id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.SessionID == "" {
		http.Error(w, `{"error":"a JSON body with session_id"}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	if f.sessions[body.SessionID] == nil {
		f.sessions[body.SessionID] = &session{keys: map[string]int{}, changed: make(chan struct{})}
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"sessionId":%q}`, body.SessionID)
}

// field returns the string member name of an event's line (the benchmark's ids and keys need
// no unescaping).
func field(line []byte, name string) []byte {
	i := bytes.Index(line, []byte(`"`+name+`":"`))
	if i < 0 {
		return nil
	}
	rest := line[i+len(name)+4:]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return nil
	}
	return rest[:j]
}

func (f *floor) append(w http.ResponseWriter, r *http.Request) {
	s := f.get(r.PathValue("id"))
	if s == nil {
		http.Error(w, `{"error":"no such session"}`, http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, `{"error":"reading the body"}`, http.StatusBadRequest)
		return
	}
	var lines, keys [][]byte
	for line := range bytes.Lines(body) {
		line = bytes.TrimRight(line, "\n")
		key := field(line, "idempotencyKey")
		if key == nil {
			http.Error(w, `{"error":"an event without idempotencyKey"}`, http.StatusBadRequest)
			return
		}
		lines, keys = append(lines, line), append(keys, key)
	}
	out := make([]byte, 0, 64+len(body)/8)
	out = append(out, `{"results":[`...)
	added := false
	s.mu.Lock()
	for i, line := range lines {
		key := keys[i]
		status := "duplicate"
		seq, ok := s.keys[string(key)]
		if !ok {
			seq, status, added = len(s.events), "accepted", true
			s.keys[string(key)] = seq
			s.events = append(s.events, bytes.Clone(line))
		}
		if len(out) > len(`{"results":[`) {
			out = append(out, ',')
		}
		out = append(out, `{"eventId":"`...)
		out = append(out, field(line, "eventId")...)
		out = append(out, `","sequence":`...)
		out = strconv.AppendInt(out, int64(seq), 10)
		out = append(out, `,"status":"`...)
		out = append(out, status...)
		out = append(out, `"}`...)
	}
	last := len(s.events) - 1
	if added {
		close(s.changed)
		s.changed = make(chan struct{})
	}
	s.mu.Unlock()
	out = append(out, `],"lastSequence":`...)
	out = strconv.AppendInt(out, int64(last), 10)
	out = append(out, '}')
	w.Header().Set("Content-Type", "application/json")
	if added {
		w.WriteHeader(http.StatusCreated)
	}
	w.Write(out)
}

// read answers a page: the events after the sequence after (-1: from the start), at most
// limit of them, each as {"event":…,"sequence":n}.
func (f *floor) read(w http.ResponseWriter, r *http.Request) {
	s := f.get(r.PathValue("id"))
	if s == nil {
		http.Error(w, `{"error":"no such session"}`, http.StatusNotFound)
		return
	}
	after, err1 := strconv.Atoi(r.URL.Query().Get("after"))
	limit, err2 := strconv.Atoi(r.URL.Query().Get("limit"))
	if err1 != nil || err2 != nil || after < -1 || limit < 1 {
		http.Error(w, `{"error":"after and limit: integers, after ≥ -1, limit ≥ 1"}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	evs := s.events[min(after+1, len(s.events)):]
	evs = evs[:min(limit, len(evs))]
	s.mu.Unlock()
	bp := pages.Get().(*[]byte)
	defer pages.Put(bp)
	out := append((*bp)[:0], `{"events":[`...)
	for i, e := range evs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"event":`...)
		out = append(out, e...)
		out = append(out, `,"sequence":`...)
		out = strconv.AppendInt(out, int64(after+1+i), 10)
		out = append(out, '}')
	}
	out = append(out, `]}`...)
	*bp = out
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.Write(out)
}

// pages are read's response buffers, kept from one request to the next.
var pages = sync.Pool{New: func() any { return new([]byte) }}

// stream sends the events appended after it starts, as server-sent events, until the client
// goes away.
func (f *floor) stream(w http.ResponseWriter, r *http.Request) {
	s := f.get(r.PathValue("id"))
	if s == nil {
		http.Error(w, `{"error":"no such session"}`, http.StatusNotFound)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, `{"error":"streaming unsupported"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	s.mu.Lock()
	next := len(s.events)
	s.mu.Unlock()
	var buf []byte
	for {
		s.mu.Lock()
		evs, changed := s.events[next:], s.changed
		s.mu.Unlock()
		if len(evs) > 0 {
			buf = buf[:0]
			for i, e := range evs {
				buf = append(buf, "id: "...)
				buf = strconv.AppendInt(buf, int64(next+i), 10)
				buf = append(buf, "\ndata: "...)
				buf = append(buf, e...)
				buf = append(buf, "\n\n"...)
			}
			next += len(evs)
			if _, err := w.Write(buf); err != nil {
				return
			}
			fl.Flush()
			continue
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}
