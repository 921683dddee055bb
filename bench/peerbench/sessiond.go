package peerbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"

	"github.com/sessiond/sessiond/internal/benchkit"
)

// Sessiond is sessiond reached over its HTTP API: NDJSON appends, paged reads of
// GET /v1/sessions/{id}/events and the SSE stream, as a runtime and its followers use them.
type Sessiond struct {
	name  string
	base  string // http://host:port
	hc    *http.Client
	procs []*benchkit.Proc // none for a server in the benchmark's own process (tests)
	stop  func()           // stops the server and removes its files
	page  int              // events per read request: 10,000, the API's largest (tests read smaller pages)
}

// NewSessiondClient returns the system for a sessiond already listening at base (e.g.
// "http://127.0.0.1:7420"); procs are its processes (and its database's), and stop, when not
// nil, is called by Close.
func NewSessiondClient(name, base string, procs []*benchkit.Proc, stop func()) *Sessiond {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 1024
	tr.MaxIdleConnsPerHost = 1024 // every writer and subscriber keeps its own connection
	return &Sessiond{name: name, base: base, hc: &http.Client{Transport: tr}, procs: procs, stop: stop, page: 10000}
}

// StartSessiond builds sessiond and starts "sessiond serve" on a free loopback port with its
// data in a new temporary directory (benchkit.StartSessiond): on SQLite when storeURL is
// empty, else on the PostgreSQL database storeURL names.
func StartSessiond(name, storeURL string) (*Sessiond, error) {
	return clientOf(name)(benchkit.StartSessiond(storeURL))
}

// StartSessiondPostgres starts a PostgreSQL cluster of its own and sessiond on it; both count
// as the server.
func StartSessiondPostgres(name string) (*Sessiond, error) {
	bin, err := benchkit.Binary()
	if err != nil {
		return nil, err
	}
	return clientOf(name)(benchkit.StartSessiondPostgres(bin))
}

// BaselineEnv names the environment variable that holds the path of a second sessiond binary
// (an earlier build, say) for the baseline-postgres system: the same workloads against it on
// PostgreSQL, in the same run, for a before/after comparison that shares the machine's load.
const BaselineEnv = "PEERBENCH_BASELINE_SESSIOND"

// StartBaselinePostgres is StartSessiondPostgres with the binary BaselineEnv names; benchkit.ErrMissing
// when it names none.
func StartBaselinePostgres(name string) (*Sessiond, error) {
	bin := os.Getenv(BaselineEnv)
	if bin == "" {
		return nil, fmt.Errorf("%w: set %s to a sessiond binary to compare against", benchkit.ErrMissing, BaselineEnv)
	}
	return clientOf(name)(benchkit.StartSessiondPostgres(bin))
}

// clientOf returns a function that drives a started server with sessiond's client (or passes
// on its start's error); the client's Close stops the server.
func clientOf(name string) func(*benchkit.Server, error) (*Sessiond, error) {
	return func(srv *benchkit.Server, err error) (*Sessiond, error) {
		if err != nil {
			return nil, err
		}
		return NewSessiondClient(name, srv.URL, srv.Procs, func() { srv.Close() }), nil
	}
}

// Name implements System.
func (s *Sessiond) Name() string { return s.name }

// Servers implements System.
func (s *Sessiond) Servers() []*benchkit.Proc { return s.procs }

// URL is the server's base URL (http://host:port).
func (s *Sessiond) URL() string { return s.base }

// Close implements System.
func (s *Sessiond) Close() error {
	s.hc.CloseIdleConnections()
	if s.stop != nil {
		s.stop()
	}
	return nil
}

// do sends a request and returns the body of a response with one of the wanted statuses.
func (s *Sessiond) do(ctx context.Context, method, path, ctype string, body []byte, want ...int) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("%s %s: read the response: %w", method, path, err)
	}
	for _, w := range want {
		if resp.StatusCode == w {
			return data, w, nil
		}
	}
	return nil, resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(data))
}

// CreateSession implements System.
func (s *Sessiond) CreateSession(ctx context.Context, sid string) error {
	body := fmt.Sprintf(`{"session_id":%q,"agent_id":"agent-bench","role":"implementer","snapshot":{"mode":"work","modelId":"model-x","capabilities":{"tools":true}}}`, sid)
	_, _, err := s.do(ctx, "POST", "/v1/sessions", "application/json", []byte(body), http.StatusCreated)
	return err
}

// Append implements System: one NDJSON request; 201 when something was added, 200 when the
// whole batch was duplicates.
func (s *Sessiond) Append(ctx context.Context, sid string, evs []benchkit.Event) (int, error) {
	n := 0
	for _, e := range evs {
		n += len(e.Data) + 1
	}
	body := make([]byte, 0, n)
	for _, e := range evs {
		body = append(body, e.Data...)
		body = append(body, '\n')
	}
	data, _, err := s.do(ctx, "POST", "/v1/sessions/"+sid+"/events", "application/x-ndjson", body, http.StatusCreated, http.StatusOK)
	if err != nil {
		return 0, err
	}
	if got := bytes.Count(data, []byte(`"sequence":`)); got != len(evs) {
		return 0, fmt.Errorf("append to %s: %d results for %d events: %s", sid, got, len(evs), data)
	}
	return bytes.Count(data, []byte(`"status":"duplicate"`)), nil
}

// Read implements System: pages of at most 10,000 events (the API's largest), every event
// decoded (Decoded) as encoding/json decodes the page.
func (s *Sessiond) Read(ctx context.Context, sid string, n int) (int, error) {
	after := int64(-1) // the log's first sequence is 0
	read := 0
	var page decodedPage
	for read < n {
		data, _, err := s.do(ctx, "GET", "/v1/sessions/"+sid+"/events?limit="+strconv.Itoa(s.page)+"&after="+strconv.FormatInt(after, 10), "", nil, http.StatusOK)
		if err != nil {
			return read, err
		}
		page.Events = page.Events[:0]
		if err := json.Unmarshal(data, &page); err != nil {
			return read, fmt.Errorf("read %s after %d: %w", sid, after, err)
		}
		if len(page.Events) == 0 {
			return read, fmt.Errorf("read %s after %d: no events, want %d in all, have %d", sid, after, n, read)
		}
		for i := range page.Events {
			if page.Events[i].IdempotencyKey == "" || page.Events[i].Sequence != after+1+int64(i) {
				return read, fmt.Errorf("read %s after %d: event %d is not the one at sequence %d", sid, after, i, after+1+int64(i))
			}
		}
		read += len(page.Events)
		after = page.Events[len(page.Events)-1].Sequence
	}
	if read != n {
		return read, fmt.Errorf("read %s: %d events, want %d", sid, read, n)
	}
	return read, nil
}

// ReadWhole implements WholeReader: one GET /v1/sessions/{id}/events/export, each line decoded
// (DecodeEvent) as it arrives.
func (s *Sessiond) ReadWhole(ctx context.Context, sid string, n int) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", s.base+"/v1/sessions/"+sid+"/events/export", nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return 0, fmt.Errorf("export %s: %d %s", sid, resp.StatusCode, b)
	}
	r := bufio.NewReaderSize(resp.Body, 1<<20)
	var d Decoded
	read := 0
	for {
		line, err := r.ReadSlice('\n')
		if err == io.EOF && len(line) == 0 {
			break
		}
		if err != nil {
			return read, fmt.Errorf("export %s: %w", sid, err)
		}
		if err := DecodeEvent(line, &d); err != nil {
			return read, err
		}
		if d.Sequence != int64(read) {
			return read, fmt.Errorf("export %s: line %d has sequence %d", sid, read, d.Sequence)
		}
		read++
	}
	if read != n {
		return read, fmt.Errorf("export %s: %d events, want %d", sid, read, n)
	}
	return read, nil
}

// Subscribe implements System: the SSE stream from the session's end (?tail=true).
func (s *Sessiond) Subscribe(ctx context.Context, sid string, deliver func([]byte)) (<-chan struct{}, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", s.base+"/v1/sessions/"+sid+"/events/stream?tail=true", nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("stream %s: %d %s", sid, resp.StatusCode, b)
	}
	ready := make(chan struct{})
	close(ready) // the headers came: the server follows the log from its end
	go func() {
		defer resp.Body.Close()
		r := bufio.NewReaderSize(resp.Body, 64<<10)
		for {
			line, err := r.ReadSlice('\n')
			if err != nil {
				return
			}
			if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok && len(d) > 1 && d[0] == '{' {
				deliver(bytes.TrimRight(d, "\n"))
			}
		}
	}()
	return ready, nil
}
