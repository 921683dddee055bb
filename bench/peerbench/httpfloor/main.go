package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
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
	mux.HandleFunc("GET /v1/sessions/{id}/events/export", f.export)
	mux.HandleFunc("GET /v1/sessions/{id}/events/stream", f.stream)
	var b [6]byte
	rand.Read(b[:])
	prefix := hex.EncodeToString(b[:]) + "-"
	var seq atomic.Uint64
	// As sessiond's ServeHTTP: the route is looked up once, every answer carries an
	// X-Request-Id (the process's prefix and a counter), and the query is parsed and checked
	// against the route's parameters before the handler runs (server/routes.go's guard).
	log.Fatal(http.ListenAndServe(*addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := mux.Handler(r)
		var id [48]byte
		w.Header().Set("X-Request-Id", string(strconv.AppendUint(append(id[:0], prefix...), seq.Add(1), 36)))
		if r.URL.RawQuery != "" {
			q, err := url.ParseQuery(r.URL.RawQuery)
			if err != nil {
				http.Error(w, `{"error":"the query does not parse"}`, http.StatusBadRequest)
				return
			}
			for name, vs := range q {
				if !slices.Contains(queries[pattern], name) || len(vs) > 1 {
					http.Error(w, `{"error":"unknown or repeated query parameter"}`, http.StatusBadRequest)
					return
				}
			}
		}
		mux.ServeHTTP(w, r)
	})))
}

// queries are the query parameters each route takes, as sessiond's route table declares them.
var queries = map[string][]string{
	"POST /v1/sessions/{id}/events":       {"expectedSequence", "multitask"},
	"GET /v1/sessions/{id}/events":        {"after", "limit"},
	"GET /v1/sessions/{id}/events/export": {"after"},
	"GET /v1/sessions/{id}/events/stream": {"after", "tail", "token"},
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

// withSequence returns a copy of an event's line with its "sequence" member set to seq.
func withSequence(line []byte, seq int) []byte {
	i := bytes.Index(line, []byte(`"sequence":`))
	if i < 0 {
		return bytes.Clone(line)
	}
	i += len(`"sequence":`)
	j := i
	for j < len(line) && line[j] >= '0' && line[j] <= '9' {
		j++
	}
	out := make([]byte, 0, len(line)+8)
	out = append(out, line[:i]...)
	out = strconv.AppendInt(out, int64(seq), 10)
	return append(out, line[j:]...)
}

func (f *floor) append(w http.ResponseWriter, r *http.Request) {
	s := f.get(r.PathValue("id"))
	if s == nil {
		http.Error(w, `{"error":"no such session"}`, http.StatusNotFound)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-ndjson" && ct != "application/ndjson" {
		http.Error(w, `{"error":"send Content-Type: application/x-ndjson"}`, http.StatusUnsupportedMediaType)
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
			// Stored as sessiond stores it: with its sequence (the lines carry "sequence":0).
			s.events = append(s.events, withSequence(line, seq))
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
	out = append(out, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	if added {
		w.WriteHeader(http.StatusCreated)
	}
	w.Write(out)
}

// read answers a page as sessiond does: {"events":[…],"lastSequence":n} with the events after
// the sequence after (-1: from the start), at most limit (1 to 10,000, default 1,000) of them,
// each as stored.
func (f *floor) read(w http.ResponseWriter, r *http.Request) {
	s := f.get(r.PathValue("id"))
	if s == nil {
		http.Error(w, `{"error":"no such session"}`, http.StatusNotFound)
		return
	}
	after, ok1 := queryInt(r, "after", -1, -1)
	limit, ok2 := queryInt(r, "limit", 1000, 1)
	if !ok1 || !ok2 || limit > 10000 {
		http.Error(w, `{"error":"after and limit: integers, after ≥ -1, 1 ≤ limit ≤ 10000"}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	evs := s.events[min(after+1, len(s.events)):]
	evs = evs[:min(limit, len(evs))]
	last := len(s.events) - 1
	s.mu.Unlock()
	bp := pages.Get().(*[]byte)
	defer pages.Put(bp)
	out := append((*bp)[:0], `{"events":[`...)
	for i, e := range evs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e...)
	}
	out = append(out, `],"lastSequence":`...)
	out = strconv.AppendInt(out, int64(last), 10)
	out = append(out, "}\n"...)
	*bp = out
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.Write(out)
}

// queryInt parses an integer query parameter of at least least (def when absent).
func queryInt(r *http.Request, name string, def, least int) (int, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	return n, err == nil && n >= least
}

// exportChunk is how many events export writes at a time, as sessiond's.
const exportChunk = 2048

// export answers the log after ?after (or Last-Event-ID) to its end as NDJSON, as sessiond's
// GET /v1/sessions/{id}/events/export: Sessiond-Last-Sequence, chunks of 2,048 events each
// written and flushed.
func (f *floor) export(w http.ResponseWriter, r *http.Request) {
	s := f.get(r.PathValue("id"))
	if s == nil {
		http.Error(w, `{"error":"no such session"}`, http.StatusNotFound)
		return
	}
	after, ok := queryInt(r, "after", -1, -1)
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.Atoi(v)
		after, ok = n, err == nil && n >= -1
	}
	if !ok {
		http.Error(w, `{"error":"after: an integer ≥ -1"}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	evs := s.events[min(after+1, len(s.events)):]
	last := len(s.events) - 1
	s.mu.Unlock()
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-store")
	h.Set("Sessiond-Last-Sequence", strconv.Itoa(last))
	bp := pages.Get().(*[]byte)
	defer pages.Put(bp)
	rc := http.NewResponseController(w)
	for len(evs) > 0 {
		chunk := evs[:min(exportChunk, len(evs))]
		evs = evs[len(chunk):]
		out := (*bp)[:0]
		for _, e := range chunk {
			out = append(append(out, e...), '\n')
		}
		*bp = out
		if _, err := w.Write(out); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
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
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s.mu.Lock()
	next := len(s.events)
	s.mu.Unlock()
	// sessiond's opening block: the retry delay and the starting cursor.
	fmt.Fprintf(w, "retry: 1000\nid: %d\n\n", next-1)
	fl.Flush()
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
				buf = append(buf, "\nevent: ev."...)
				buf = append(buf, field(e, "eventType")...)
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
