package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/sqlite"
)

// bundle is what most tests need: a real SQLite store, the server over it, and a client.
type bundle struct {
	st  *sqlite.Store
	srv *server.Server
	ts  *httptest.Server
	cl  *client.Client
	// authz, when set, is the Authorization value every request of do carries (a server with
	// authentication); createSession then creates the session in project "bench".
	authz string
}

// newServer returns a server of a new session service over st with the settings sopt (none:
// the defaults), whose background work is started, as sessiond serve does; the service is
// closed when t ends, after the cleanups registered later (the caller's, which close the
// server and the store).
func newServer(t testing.TB, st store.Store, opt server.Options, sopt ...session.Options) *server.Server {
	t.Helper()
	var o session.Options
	if len(sopt) > 0 {
		o = sopt[0]
	}
	svc := session.New(st, o)
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return server.New(svc, opt)
}

// setup starts a server with opt over a new SQLite store, its session service with sopt (none:
// the defaults).
func setup(t testing.TB, opt server.Options, sopt ...session.Options) *bundle {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, st, opt, sopt...)
	var h http.Handler = srv
	if _, bench := t.(*testing.B); !bench {
		h = validated(t, srv) // benchmarks measure the server alone
	}
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		st.Close()
	})
	return &bundle{st: st, srv: srv, ts: ts, cl: client.New(ts.URL, ts.Client())}
}

const createBody = `{"session_id":%q,"agent_id":"agent-1","role":"implementer","snapshot":{"mode":"work","modelId":"model-x","capabilities":{"tools":true}}}`

func (b *bundle) createSession(t testing.TB, id string) {
	t.Helper()
	body := fmt.Sprintf(createBody, id)
	if b.authz != "" {
		body = strings.Replace(body, `"agent_id"`, `"project":"bench","agent_id"`, 1)
	}
	resp := b.do(t, "POST", "/v1/sessions", "application/json", body)
	if resp.status != http.StatusCreated {
		t.Fatalf("create session: %d %s", resp.status, resp.body)
	}
}

type response struct {
	status int
	body   string
	header http.Header
}

func (b *bundle) do(t testing.TB, method, path, contentType, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, b.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if b.authz != "" {
		req.Header.Set("Authorization", b.authz)
	}
	resp, err := b.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: string(data), header: resp.Header}
}

// event returns a valid message event for session sid with a key derived from n.
func event(sid string, n int) string {
	return fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"ev-%d","sessionId":%q,"sequence":0,"idempotencyKey":"key-%d","occurredAt":"2026-03-01T12:00:00Z","eventType":"message","payload":{"messageId":"m-%d","role":"assistant","operation":"append","parts":[{"type":"text","text":"hello <%d> & 1.0"}]}}`, n, sid, n, n, n)
}

func errorBody(t testing.TB, body string) *api.Error {
	t.Helper()
	var eb api.ErrorBody
	if err := json.Unmarshal([]byte(body), &eb); err != nil || eb.Error == nil {
		t.Fatalf("not an error body: %s", body)
	}
	return eb.Error
}

func (b *bundle) lastSequence(t testing.TB, sid string) int64 {
	t.Helper()
	n, err := b.st.LastSequence(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCreateAndGetSession(t *testing.T) {
	b := setup(t, server.Options{})
	b.createSession(t, "S-one")
	s, err := b.cl.GetSession(context.Background(), "S-one")
	if err != nil {
		t.Fatal(err)
	}
	if s.Record.SessionID != "S-one" || s.Record.Status != "running" || s.Record.SchemaVersion != 1 || s.Record.StartedAt == "" || s.LastSequence != -1 || s.CurrentRun != nil {
		t.Errorf("unexpected session resource: %+v", s)
	}
	if !s.Snapshot.Capabilities.Has("tools") || !s.Snapshot.Capabilities.Has("text") || s.Snapshot.Capabilities.Has("shell") {
		t.Errorf("capabilities not kept with defaults: %+v", s.Snapshot.Capabilities)
	}

	// Generated id.
	resp := b.do(t, "POST", "/v1/sessions", "", `{"agent_id":"a","role":"user","snapshot":{"mode":"chat","modelId":"m","capabilities":{}}}`)
	if resp.status != http.StatusCreated || !strings.Contains(resp.body, `"session_id":"S-`) {
		t.Errorf("create without id: %d %s", resp.status, resp.body)
	}
	// Taken id.
	resp = b.do(t, "POST", "/v1/sessions", "", fmt.Sprintf(createBody, "S-one"))
	if resp.status != http.StatusConflict || errorBody(t, resp.body).Code != api.CodeSessionExists {
		t.Errorf("create with a taken id: %d %s", resp.status, resp.body)
	}
	if resp := b.do(t, "GET", "/v1/sessions/S-nope", "", ""); resp.status != 404 || errorBody(t, resp.body).Code != api.CodeSessionNotFound {
		t.Errorf("get unknown: %d %s", resp.status, resp.body)
	}
}

func TestCreateSessionRejections(t *testing.T) {
	b := setup(t, server.Options{})
	tests := []struct {
		name, body string
		status     int
		code       contract.ErrorCode
		paths      []string
	}{
		{"not json", `{"agent_id":`, 400, api.CodeMalformed, []string{"/agent_id"}},
		{"duplicate key", `{"agent_id":"a","agent_id":"b"}`, 400, api.CodeMalformed, []string{""}},
		{"array", `[]`, 422, api.CodeContractViolation, []string{""}},
		{"missing everything", `{}`, 422, api.CodeContractViolation, []string{"/agent_id", "/role", "/snapshot"}},
		{"bad role and snapshot", `{"agent_id":"a","role":"boss","snapshot":{"mode":"x","modelId":" ","capabilities":{"flying":true}}}`, 422, api.CodeContractViolation,
			[]string{"/role", "/snapshot/mode", "/snapshot/modelId", "/snapshot/capabilities/flying"}},
		{"server-set field", `{"agent_id":"a","role":"user","status":"closed","snapshot":{"mode":"chat","modelId":"m","capabilities":{}}}`, 422, api.CodeContractViolation, []string{"/status"}},
		{"id without prefix", `{"session_id":"X-1","agent_id":"a","role":"user","snapshot":{"mode":"chat","modelId":"m","capabilities":{}}}`, 422, api.CodeContractViolation, []string{"/session_id"}},
		{"unknown field", `{"agent_id":"a","role":"user","color":"red","snapshot":{"mode":"chat","modelId":"m","capabilities":{}}}`, 422, api.CodeContractViolation, []string{"/color"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := b.do(t, "POST", "/v1/sessions", "application/json", tc.body)
			if resp.status != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.status, tc.status, resp.body)
			}
			e := errorBody(t, resp.body)
			if e.Code != tc.code {
				t.Errorf("code %s, want %s", e.Code, tc.code)
			}
			var got []string
			for _, d := range e.Details {
				got = append(got, d.Path)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.paths) {
				t.Errorf("problem paths %q, want %q (%s)", got, tc.paths, resp.body)
			}
		})
	}
	list, err := b.cl.ListSessions(context.Background(), nil)
	if err != nil || len(list.Sessions) != 0 {
		t.Errorf("rejected creates stored sessions: %v %+v", err, list)
	}
}

func TestPatchSessionLifecycle(t *testing.T) {
	b := setup(t, server.Options{})
	b.createSession(t, "S-p")
	steps := []struct {
		body   string
		status int
		want   string
	}{
		{`{"status":"paused","phase":"review","updated_by_gate":"owner"}`, 200, "paused"},
		{`{"status":"archived","updated_by_gate":"owner"}`, 409, ""},
		{`{"status":"running","updated_by_gate":"user"}`, 200, "running"},
		{`{"phase":null,"updated_by_gate":"user"}`, 200, "running"},
		{`{"status":"closed","updated_by_gate":"handoff"}`, 200, "closed"},
		{`{"status":"running","updated_by_gate":"user"}`, 409, ""},
		{`{"status":"paused"}`, 422, ""},
		{`{"status":"paused","updated_by_gate":"owner","extra":1}`, 422, ""},
	}
	for i, st := range steps {
		resp := b.do(t, "PATCH", "/v1/sessions/S-p", "application/json", st.body)
		if resp.status != st.status {
			t.Fatalf("step %d %s: status %d, want %d: %s", i, st.body, resp.status, st.status, resp.body)
		}
		if st.want == "" {
			continue
		}
		var s api.Session
		json.Unmarshal([]byte(resp.body), &s)
		if s.Record.Status != st.want || s.Record.UpdatedByGate.Get() == "" || s.Record.UpdatedAt.Get() == "" {
			t.Errorf("step %d: record %+v", i, s.Record)
		}
		if i == 3 && (!s.Record.Phase.Present || s.Record.Phase.Value != nil) {
			t.Errorf("phase not cleared to null: %+v", s.Record.Phase)
		}
		if st.want == "closed" && s.Record.ClosedAt.Get() == "" {
			t.Errorf("closed without closed_at")
		}
	}
	if resp := b.do(t, "PATCH", "/v1/sessions/S-none", "", `{"status":"paused","updated_by_gate":"owner"}`); resp.status != 404 {
		t.Errorf("patch unknown session: %d", resp.status)
	}
}

func TestListSessionsPaging(t *testing.T) {
	b := setup(t, server.Options{})
	for i := 0; i < 5; i++ {
		b.createSession(t, fmt.Sprintf("S-%02d", i))
	}
	b.do(t, "PATCH", "/v1/sessions/S-03", "", `{"status":"paused","updated_by_gate":"owner"}`)
	var ids []string
	after := ""
	for pages := 0; ; pages++ {
		resp := b.do(t, "GET", "/v1/sessions?limit=2&after="+after, "", "")
		var l api.SessionList
		if err := json.Unmarshal([]byte(resp.body), &l); err != nil {
			t.Fatal(err)
		}
		for _, s := range l.Sessions {
			ids = append(ids, s.Record.SessionID)
		}
		if l.Next == "" || pages > 5 {
			break
		}
		after = l.Next
	}
	if fmt.Sprint(ids) != "[S-00 S-01 S-02 S-03 S-04]" {
		t.Errorf("paged ids = %v", ids)
	}
	resp := b.do(t, "GET", "/v1/sessions?status=paused", "", "")
	if !strings.Contains(resp.body, "S-03") || strings.Contains(resp.body, "S-01") {
		t.Errorf("status filter: %s", resp.body)
	}
	if resp := b.do(t, "GET", "/v1/sessions?status=bogus", "", ""); resp.status != 400 {
		t.Errorf("bad status filter: %d", resp.status)
	}
	if resp := b.do(t, "GET", "/v1/sessions?limit=0", "", ""); resp.status != 400 {
		t.Errorf("bad limit: %d", resp.status)
	}
}

func TestAppendBodyForms(t *testing.T) {
	b := setup(t, server.Options{})
	b.createSession(t, "S-a")
	// One event.
	resp := b.do(t, "POST", "/v1/sessions/S-a/events", "application/json", event("S-a", 0))
	if resp.status != http.StatusCreated || !strings.Contains(resp.body, `"sequence":0,"status":"accepted"`) {
		t.Fatalf("single: %d %s", resp.status, resp.body)
	}
	// A JSON array.
	resp = b.do(t, "POST", "/v1/sessions/S-a/events", "", "["+event("S-a", 1)+",\n"+event("S-a", 2)+"]")
	if resp.status != http.StatusCreated || !strings.Contains(resp.body, `"lastSequence":2`) {
		t.Fatalf("array: %d %s", resp.status, resp.body)
	}
	// NDJSON with a blank line, repeating one event: a duplicate, not a new sequence.
	resp = b.do(t, "POST", "/v1/sessions/S-a/events", "application/x-ndjson", event("S-a", 3)+"\n\n"+event("S-a", 2)+"\n")
	var ar api.AppendResponse
	json.Unmarshal([]byte(resp.body), &ar)
	if resp.status != http.StatusCreated || len(ar.Results) != 2 || ar.Results[0].Sequence != 3 || ar.Results[1].Status != api.Duplicate || ar.Results[1].Sequence != 2 || ar.LastSequence != 3 {
		t.Fatalf("ndjson: %d %s", resp.status, resp.body)
	}
	// Only duplicates: 200, not 201.
	if resp := b.do(t, "POST", "/v1/sessions/S-a/events", "", event("S-a", 0)); resp.status != http.StatusOK || !strings.Contains(resp.body, api.Duplicate) {
		t.Errorf("duplicate only: %d %s", resp.status, resp.body)
	}
	// Reads return exactly what was stored, in order, with server sequences; free values and
	// strings are kept byte for byte (no HTML escaping, no number rewriting).
	page, err := b.cl.ReadEvents(context.Background(), "S-a", -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 4 || page.LastSequence != 3 {
		t.Fatalf("read: %d events, last %d", len(page.Events), page.LastSequence)
	}
	want := strings.Replace(event("S-a", 2), `"sequence":0`, `"sequence":2`, 1)
	if string(page.Events[2]) != want {
		t.Errorf("stored event changed:\n got %s\nwant %s", page.Events[2], want)
	}
	page, _ = b.cl.ReadEvents(context.Background(), "S-a", 1, 1)
	if len(page.Events) != 1 || !strings.Contains(string(page.Events[0]), `"sequence":2`) {
		t.Errorf("read after=1 limit=1: %s", page.Events)
	}
}

func TestAppendRejections(t *testing.T) {
	b := setup(t, server.Options{MaxBodyBytes: 64 << 10})
	b.createSession(t, "S-r")
	b.createSession(t, "S-other")
	if resp := b.do(t, "POST", "/v1/sessions/S-r/events", "", event("S-r", 0)); resp.status != 201 {
		t.Fatal(resp.body)
	}
	bad := strings.Replace(event("S-r", 9), `"role":"assistant"`, `"role":"robot"`, 1)
	conflicting := strings.Replace(event("S-r", 0), "hello", "changed", 1)
	reusedID := strings.Replace(event("S-r", 0), "key-0", "key-new", 1)
	deep := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	tests := []struct {
		name, path, ctype, body string
		status                  int
		code                    contract.ErrorCode
		detail                  string // a problem path that must be reported
	}{
		{"malformed", "/v1/sessions/S-r/events", "", `{"contract":`, 400, api.CodeMalformed, ""},
		{"trailing garbage", "/v1/sessions/S-r/events", "", event("S-r", 5) + "x", 400, api.CodeMalformed, ""},
		{"too deep", "/v1/sessions/S-r/events", "", deep, 400, api.CodeMalformed, ""},
		{"contract violation in a batch", "/v1/sessions/S-r/events", "", "[" + event("S-r", 7) + "," + bad + "]", 422, api.CodeContractViolation, "/1/payload/role"},
		{"contract violation in ndjson", "/v1/sessions/S-r/events", "application/x-ndjson", event("S-r", 7) + "\n" + bad, 422, api.CodeContractViolation, "/1/payload/role"},
		{"unknown session", "/v1/sessions/S-none/events", "", event("S-none", 1), 404, api.CodeSessionNotFound, ""},
		{"other session's event", "/v1/sessions/S-r/events", "", event("S-other", 1), 422, api.CodeSessionMismatch, ""},
		{"sequence conflict", "/v1/sessions/S-r/events?expectedSequence=5", "", event("S-r", 1), 409, api.CodeSequenceConflict, ""},
		{"bad expectedSequence", "/v1/sessions/S-r/events?expectedSequence=x", "", event("S-r", 1), 400, api.CodeMalformed, ""},
		{"idempotency conflict", "/v1/sessions/S-r/events", "", conflicting, 409, api.CodeIdempotencyConflict, ""},
		{"event id reused", "/v1/sessions/S-r/events", "", "[" + event("S-r", 8) + "," + reusedID + "]", 409, api.CodeEventIDConflict, ""},
		{"body too large", "/v1/sessions/S-r/events", "", strings.Repeat(" ", 70<<10) + event("S-r", 1), 413, api.CodeTooLarge, ""},
		{"media type", "/v1/sessions/S-r/events", "text/plain", event("S-r", 1), 415, api.CodeUnsupportedMedia, ""},
		{"empty", "/v1/sessions/S-r/events", "application/x-ndjson", "\n\n", 400, api.CodeMalformed, ""},
		{"empty array", "/v1/sessions/S-r/events", "", "[]", 400, api.CodeMalformed, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := b.do(t, "POST", tc.path, tc.ctype, tc.body)
			if resp.status != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.status, tc.status, resp.body)
			}
			e := errorBody(t, resp.body)
			if e.Code != tc.code {
				t.Errorf("code %s, want %s (%s)", e.Code, tc.code, resp.body)
			}
			if tc.detail != "" && !strings.Contains(resp.body, `"path":"`+tc.detail+`"`) {
				t.Errorf("no problem at %s: %s", tc.detail, resp.body)
			}
			if e.Message == "" {
				t.Error("empty message")
			}
			if got := b.lastSequence(t, "S-r"); got != 0 {
				t.Errorf("a rejected request changed the log: last sequence %d", got)
			}
		})
	}
	// The sequence conflict says where the log is.
	resp := b.do(t, "POST", "/v1/sessions/S-r/events?expectedSequence=5", "", event("S-r", 1))
	if e := errorBody(t, resp.body); e.Fields["actual"] != float64(0) {
		t.Errorf("sequence conflict fields: %v", e.Fields)
	}
	// And the right expectation succeeds.
	if resp := b.do(t, "POST", "/v1/sessions/S-r/events?expectedSequence=0", "", event("S-r", 1)); resp.status != 201 {
		t.Errorf("expectedSequence=0: %d %s", resp.status, resp.body)
	}
}

func TestUnknownRoutesAndMethods(t *testing.T) {
	b := setup(t, server.Options{})
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/nope", 404},
		{"DELETE", "/v1/sessions", 405},
		{"PUT", "/v1/sessions/S-x/events", 405},
		{"GET", "/healthz", 200},
	} {
		resp := b.do(t, tc.method, tc.path, "", "")
		if resp.status != tc.status {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.status, tc.status)
		}
		if tc.status >= 400 && errorBody(t, resp.body).Message == "" {
			t.Errorf("%s %s: empty message", tc.method, tc.path)
		}
	}
}

func TestClientReturnsAPIErrors(t *testing.T) {
	b := setup(t, server.Options{})
	_, err := b.cl.GetSession(context.Background(), "S-missing")
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeSessionNotFound || ae.Status != 404 {
		t.Fatalf("got %v", err)
	}
	b.createSession(t, "S-c")
	_, err = b.cl.AppendNDJSON(context.Background(), "S-c", []byte(`{"contract":"AgentSessionEvent"}`), nil)
	if !errors.As(err, &ae) || ae.Code != api.CodeContractViolation || len(ae.Details) == 0 {
		t.Fatalf("got %v", err)
	}
	if !bytes.Contains([]byte(err.Error()), []byte("/eventId")) {
		t.Errorf("error text does not name the field: %v", err)
	}
}

// TestDisconnectMidAppend sends appends over raw connections that close right after the
// request: each batch is committed whole or not at all, and a retry with the same keys is safe.
func TestDisconnectMidAppend(t *testing.T) {
	b := setup(t, server.Options{})
	b.createSession(t, "S-dc")
	const batches, size = 20, 50
	for i := 0; i < batches; i++ {
		var body strings.Builder
		for j := 0; j < size; j++ {
			body.WriteString(event("S-dc", i*size+j))
			body.WriteByte('\n')
		}
		conn, err := net.Dial("tcp", b.ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /v1/sessions/S-dc/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nContent-Length: %d\r\n\r\n%s", body.Len(), body.String())
		if i%2 == 0 {
			conn.Close() // gone before the answer
		} else {
			conn.(*net.TCPConn).CloseWrite()
			io.ReadAll(conn)
			conn.Close()
		}
	}
	// Every batch is all or nothing: the log holds whole batches only, in some order.
	check := func() map[int]int {
		page, err := b.cl.ReadEvents(context.Background(), "S-dc", -1, 10000)
		if err != nil {
			t.Fatal(err)
		}
		per := map[int]int{}
		for i, raw := range page.Events {
			var e struct {
				Sequence int64  `json:"sequence"`
				EventID  string `json:"eventId"`
			}
			json.Unmarshal(raw, &e)
			if e.Sequence != int64(i) {
				t.Fatalf("gap: event %d has sequence %d", i, e.Sequence)
			}
			var n int
			fmt.Sscanf(e.EventID, "ev-%d", &n)
			per[n/size]++
		}
		for batch, n := range per {
			if n != size {
				t.Fatalf("batch %d is partly stored: %d of %d events", batch, n, size)
			}
		}
		return per
	}
	// Give the server a moment to finish the appends whose clients left.
	deadline := time.Now().Add(5 * time.Second)
	for len(check()) < batches && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	// Retrying every batch with the same keys: duplicates where stored, accepted where not,
	// and never a second copy.
	for i := 0; i < batches; i++ {
		b.appendN(t, "S-dc", i*size, size)
	}
	if per := check(); len(per) != batches {
		t.Fatalf("after retries %d batches are stored, want %d", len(per), batches)
	}
	if got := b.lastSequence(t, "S-dc"); got != batches*size-1 {
		t.Fatalf("last sequence %d, want %d", got, batches*size-1)
	}
}
