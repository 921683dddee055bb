package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/auth"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store/sqlite"
)

// hintEnv is one real server over a SQLite store in a temporary directory, with an archive
// directory, that a hint case can restart (a new server, or a reopened store) as a hint says.
type hintEnv struct {
	*bundle
	data, archives string
	opt            server.Options
	sopt           session.Options
	closers        []func()
}

func newHintEnv(t *testing.T, opt server.Options, sopt ...session.Options) *hintEnv {
	t.Helper()
	dir := t.TempDir()
	e := &hintEnv{data: filepath.Join(dir, "data"), archives: filepath.Join(dir, "archives"), opt: opt}
	if len(sopt) > 0 {
		e.sopt = sopt[0]
	}
	if e.sopt.ArchiveDir == "-" {
		e.sopt.ArchiveDir = ""
	} else if e.sopt.ArchiveDir == "" {
		e.sopt.ArchiveDir = e.archives
	}
	t.Cleanup(func() {
		for i := len(e.closers) - 1; i >= 0; i-- {
			e.closers[i]()
		}
	})
	e.start(t, nil)
	return e
}

// start serves e.opt over st, or over the store at e.data reopened when st is nil.
func (e *hintEnv) start(t *testing.T, st *sqlite.Store) {
	t.Helper()
	if st == nil {
		var err error
		if st, err = sqlite.Open(context.Background(), e.data); err != nil {
			t.Fatal(err)
		}
		e.closers = append(e.closers, func() { st.Close() })
	}
	svc := session.New(st, e.sopt)
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := server.New(svc, e.opt)
	ts := httptest.NewServer(validated(t, srv))
	e.closers = append(e.closers, func() { srv.Close(); ts.Close(); svc.Close() })
	e.bundle = &bundle{st: st, srv: srv, ts: ts, cl: client.New(ts.URL, ts.Client())}
}

// failure is an error the API answered: its HTTP status, code and message.
type failure struct {
	status  int
	code    contract.ErrorCode
	message string
}

func (e *hintEnv) call(t *testing.T, method, path, contentType, body string) failure {
	t.Helper()
	resp := e.do(t, method, path, contentType, body)
	if resp.status < 400 {
		t.Fatalf("%s %s answered %d, want an error: %s", method, path, resp.status, resp.body)
	}
	er := errorBody(t, resp.body)
	return failure{resp.status, er.Code, er.Message}
}

// ok sends a request the hint says to send and fails the test unless it succeeds.
func (e *hintEnv) ok(t *testing.T, method, path, contentType, body string) response {
	t.Helper()
	resp := e.do(t, method, path, contentType, body)
	if resp.status >= 300 {
		t.Fatalf("following the hint, %s %s answered %d: %s", method, path, resp.status, resp.body)
	}
	return resp
}

// commandFailure sends a command and returns its rejection (failing unless it is one).
func (e *hintEnv) commandFailure(t *testing.T, sid, cmdType, runID, key string, expected int64, payload string) failure {
	t.Helper()
	status, res := e.command(t, sid, cmdType, runID, key, expected, payload, "")
	if res.Error == nil {
		t.Fatalf("%s was %s, want a rejection", cmdType, res.Outcome)
	}
	return failure{status, res.Error.Code, res.Error.Message}
}

func (e *hintEnv) wantAccepted(t *testing.T, sid, cmdType, runID, key string, expected int64, payload, query string) {
	t.Helper()
	status, res := e.command(t, sid, cmdType, runID, key, expected, payload, query)
	if res.Outcome != "accepted" || status != http.StatusOK {
		t.Fatalf("following the hint, %s answered %d %s (%+v)", cmdType, status, res.Outcome, res.Error)
	}
}

// archived creates session id with one event and archives it (compacted or not).
func (e *hintEnv) archived(t *testing.T, id string, compact bool) *api.ArchiveResponse {
	t.Helper()
	e.createSession(t, id)
	e.ok(t, "POST", "/v1/sessions/"+id+"/events", "", event(id, 1))
	ar, err := e.cl.Archive(context.Background(), id, api.ArchiveRequest{Compact: compact})
	if err != nil {
		t.Fatal(err)
	}
	return ar
}

// waitingApproval makes session sid (with the capabilities caps) wait for approval a1 of run r1.
func (e *hintEnv) waitingApproval(t *testing.T, sid, caps string) *runtimeSim {
	r := e.runtime(t, sid, caps)
	r.message("m1", "user", "clean up")
	r.status("r1", "m1", "running")
	r.emit("approval", `"runId":"r1"`, `{"approvalId":"a1","status":"requested","title":"Run rm?"}`)
	r.status("r1", "m1", "waiting_approval")
	return r
}

const approve = `{"approvalId":"a1","decision":"approved"}`

// hintCase provokes one error whose message tells the client what to do next, then does it.
type hintCase struct {
	name string
	// hint is the part of the message that names the next step, verbatim from the message's
	// literal in the source (TestEveryHintHasACase matches the two).
	hint string
	code contract.ErrorCode
	opt  server.Options
	sopt session.Options // the session service's settings
	// provoke makes the API answer the error.
	provoke func(t *testing.T, e *hintEnv) failure
	// follow does what the hint says and fails the test unless it works.
	follow func(t *testing.T, e *hintEnv, f failure)
}

var hintCases = []hintCase{
	{
		name: "usage by nothing", hint: "query parameter by is empty; give a comma-separated list of %s, or leave it out for one total", code: api.CodeMalformed,
		provoke: func(t *testing.T, e *hintEnv) failure {
			return e.call(t, "GET", "/v1/usage?by=", "", "")
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.ok(t, "GET", "/v1/usage?by=project,day", "", "")
			e.ok(t, "GET", "/v1/usage", "", "")
		},
	},
	{
		name: "usage for an empty model", hint: "query parameter %s is empty; give a value or leave it out", code: api.CodeMalformed,
		provoke: func(t *testing.T, e *hintEnv) failure {
			return e.call(t, "GET", "/v1/usage?model=", "", "")
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.ok(t, "GET", "/v1/usage?model=m", "", "")
			e.ok(t, "GET", "/v1/usage", "", "")
		},
	},
	{
		name: "a run while another is active", hint: "or queue it behind: append again with ?multitask=enqueue", code: api.CodeInvalidState,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.queueRun(t, "S-h")
			return e.call(t, "POST", "/v1/sessions/S-h/events", "", userTurn("S-h", "m2", "r2"))
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.ok(t, "POST", "/v1/sessions/S-h/events?multitask=enqueue", "", userTurn("S-h", "m2", "r2"))
		},
	},
	{
		name: "unknown multitask strategy", hint: "it must be reject, enqueue or interrupt (or leave it out for the session's default)", code: api.CodeMalformed,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.createSession(t, "S-h")
			return e.call(t, "POST", "/v1/sessions/S-h/events?multitask=later", "", userTurn("S-h", "m1", "r1"))
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.ok(t, "POST", "/v1/sessions/S-h/events?multitask=interrupt", "", userTurn("S-h", "m1", "r1"))
			e.ok(t, "POST", "/v1/sessions/S-h/events", "", userTurn("S-h", "m1", "r1"))
		},
	},
	{
		name: "no credential", hint: "send Authorization: Bearer <key> (make one with sessiond keys create); see docs/security.md", code: api.CodeUnauthenticated,
		opt: server.Options{Auth: true},
		provoke: func(t *testing.T, e *hintEnv) failure {
			return authFailure(t, e, "GET", "/v1/sessions", "", "")
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			authOK(t, e, "GET", "/v1/sessions", "Bearer "+hintKey(t, e, "*", "read"), "")
		},
	},
	{
		name: "not a Bearer credential", hint: "the Authorization header must be one \"Bearer <key>\"; see docs/security.md", code: api.CodeUnauthenticated,
		opt: server.Options{Auth: true},
		provoke: func(t *testing.T, e *hintEnv) failure {
			return authFailure(t, e, "GET", "/v1/sessions", "Basic dXNlcjpwYXNz", "")
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			authOK(t, e, "GET", "/v1/sessions", "Bearer "+hintKey(t, e, "*", "read"), "")
		},
	},
	{
		name: "key of another project", hint: "this credential makes keys of project %q only; give \"project\":%q or leave it out", code: api.CodeForbidden,
		opt: server.Options{Auth: true},
		provoke: func(t *testing.T, e *hintEnv) failure {
			return authFailure(t, e, "POST", "/v1/keys", "Bearer "+hintKey(t, e, "alpha", "admin"), `{"project":"beta","scopes":["read"]}`)
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			authOK(t, e, "POST", "/v1/keys", "Bearer "+hintKey(t, e, "alpha", "admin"), `{"scopes":["read"]}`)
		},
	},
	{
		name: "unknown session", hint: "create it with POST /v1/sessions", code: api.CodeSessionNotFound,
		provoke: func(t *testing.T, e *hintEnv) failure { return e.call(t, "GET", "/v1/sessions/S-h", "", "") },
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.ok(t, "POST", "/v1/sessions", "", fmt.Sprintf(createBody, "S-h"))
			e.ok(t, "GET", "/v1/sessions/S-h", "", "")
		},
	},
	{
		name: "taken session id", hint: "pick another session_id or omit it to have one generated", code: api.CodeSessionExists,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.createSession(t, "S-h")
			return e.call(t, "POST", "/v1/sessions", "", fmt.Sprintf(createBody, "S-h"))
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.ok(t, "POST", "/v1/sessions", "", `{"agent_id":"agent-1","role":"implementer","snapshot":{"mode":"work","modelId":"m","capabilities":{}}}`)
		},
	},
	{
		name: "snapshot missing at create", hint: "give mode, modelId and capabilities, e.g.", code: api.CodeContractViolation,
		provoke: func(t *testing.T, e *hintEnv) failure {
			f := e.call(t, "POST", "/v1/sessions", "", `{"agent_id":"a","role":"user"}`)
			f.message = detailMessages(t, e, "POST", "/v1/sessions", `{"agent_id":"a","role":"user"}`)
			return f
		},
		follow: func(t *testing.T, e *hintEnv, f failure) {
			example := f.message[strings.Index(f.message, "e.g. ")+len("e.g. "):]
			e.ok(t, "POST", "/v1/sessions", "", `{"agent_id":"a","role":"user","snapshot":`+strings.TrimSpace(example)+`}`)
		},
	},
	{
		name: "server-set field at create", hint: "is set by the server; leave it out", code: api.CodeContractViolation,
		provoke: func(t *testing.T, e *hintEnv) failure {
			body := `{"agent_id":"a","role":"user","status":"paused","snapshot":{"mode":"chat","modelId":"m","capabilities":{}}}`
			f := e.call(t, "POST", "/v1/sessions", "", body)
			f.message = detailMessages(t, e, "POST", "/v1/sessions", body)
			return f
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.ok(t, "POST", "/v1/sessions", "", `{"agent_id":"a","role":"user","snapshot":{"mode":"chat","modelId":"m","capabilities":{}}}`)
		},
	},
	{
		name: "append sequence conflict", hint: "read the new events and retry with expectedSequence", code: api.CodeSequenceConflict,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.createSession(t, "S-h")
			e.ok(t, "POST", "/v1/sessions/S-h/events", "", event("S-h", 1))
			return e.call(t, "POST", "/v1/sessions/S-h/events?expectedSequence=-1", "", event("S-h", 2))
		},
		follow: func(t *testing.T, e *hintEnv, f failure) {
			n := f.message[strings.LastIndex(f.message, " ")+1:]
			e.ok(t, "GET", "/v1/sessions/S-h/events?after=-1", "", "")
			e.ok(t, "POST", "/v1/sessions/S-h/events?expectedSequence="+n, "", event("S-h", 2))
		},
	},
	{
		name: "idempotency key reused", hint: "use a new key for a new event", code: api.CodeIdempotencyConflict,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.createSession(t, "S-h")
			e.ok(t, "POST", "/v1/sessions/S-h/events", "", event("S-h", 1))
			other := strings.Replace(event("S-h", 1), "hello", "other", 1)
			return e.call(t, "POST", "/v1/sessions/S-h/events", "", other)
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			other := strings.Replace(strings.Replace(event("S-h", 1), "hello", "other", 1), `"key-1"`, `"key-new"`, 1)
			other = strings.Replace(other, `"ev-1"`, `"ev-new"`, 1)
			e.ok(t, "POST", "/v1/sessions/S-h/events", "", other)
		},
	},
	{
		name: "event id reused", hint: "give a new event an eventId of its own", code: api.CodeEventIDConflict,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.createSession(t, "S-h")
			e.ok(t, "POST", "/v1/sessions/S-h/events", "", event("S-h", 1))
			return e.call(t, "POST", "/v1/sessions/S-h/events", "", strings.Replace(event("S-h", 2), `"ev-2"`, `"ev-1"`, 1))
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.ok(t, "POST", "/v1/sessions/S-h/events", "", event("S-h", 2))
		},
	},
	{
		name: "event for another session", hint: "send it to /v1/sessions/", code: api.CodeSessionMismatch,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.createSession(t, "S-h")
			e.createSession(t, "S-other")
			return e.call(t, "POST", "/v1/sessions/S-h/events", "", event("S-other", 1))
		},
		follow: func(t *testing.T, e *hintEnv, f failure) {
			path := regexp.MustCompile(`/v1/sessions/\S+/events`).FindString(f.message)
			e.ok(t, "POST", path, "", event("S-other", 1))
		},
	},
	{
		name: "command for another session", hint: "send it to /v1/sessions/%s/commands", code: api.CodeSessionMismatch,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.createSession(t, "S-h")
			e.waitingApproval(t, "S-ap", allCaps)
			body := fmt.Sprintf(`{"contract":"AgentSessionCommand","commandId":"c1","sessionId":"S-ap","runId":"r1","idempotencyKey":"k1","expectedSequence":%d,"issuedAt":"2026-03-01T12:05:00Z","commandType":"approval","payload":%s}`,
				e.lastSequence(t, "S-ap"), approve)
			return e.call(t, "POST", "/v1/sessions/S-h/commands", "", body)
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.wantAccepted(t, "S-ap", "approval", "r1", "k1", e.lastSequence(t, "S-ap"), approve, "")
		},
	},
	{
		name: "unsupported content type", hint: "send Content-Type: ", code: api.CodeUnsupportedMedia,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.createSession(t, "S-h")
			return e.call(t, "POST", "/v1/sessions/S-h/events", "text/plain", event("S-h", 1))
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.ok(t, "POST", "/v1/sessions/S-h/events", "application/x-ndjson", event("S-h", 1)+"\n")
		},
	},
	{
		name: "unparsable content type", hint: "does not parse (%v); %s", code: api.CodeUnsupportedMedia,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.createSession(t, "S-h")
			return e.call(t, "POST", "/v1/sessions/S-h/events", "application/json; =", event("S-h", 1))
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.ok(t, "POST", "/v1/sessions/S-h/events", "application/json", event("S-h", 1))
		},
	},
	{
		name: "no events", hint: "send one event, a JSON array or NDJSON", code: api.CodeMalformed,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.createSession(t, "S-h")
			return e.call(t, "POST", "/v1/sessions/S-h/events", "", "[]")
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.ok(t, "POST", "/v1/sessions/S-h/events", "", "["+event("S-h", 1)+"]")
		},
	},
	{
		name: "batch over the event limit", hint: "are allowed per request, split it", code: api.CodeTooLarge,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.createSession(t, "S-h")
			return e.call(t, "POST", "/v1/sessions/S-h/events", "application/x-ndjson", ndjson("S-h", 0, 1001))
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.ok(t, "POST", "/v1/sessions/S-h/events", "application/x-ndjson", ndjson("S-h", 0, 1000))
			e.ok(t, "POST", "/v1/sessions/S-h/events", "application/x-ndjson", ndjson("S-h", 1000, 1001))
		},
	},
	{
		name: "body over the byte limit", hint: "split it into smaller requests", code: api.CodeTooLarge, opt: server.Options{MaxBodyBytes: 1500},
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.createSession(t, "S-h")
			return e.call(t, "POST", "/v1/sessions/S-h/events", "application/x-ndjson", ndjson("S-h", 0, 10))
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.ok(t, "POST", "/v1/sessions/S-h/events", "application/x-ndjson", ndjson("S-h", 0, 5))
			e.ok(t, "POST", "/v1/sessions/S-h/events", "application/x-ndjson", ndjson("S-h", 5, 10))
		},
	},
	{
		name: "method not allowed", hint: "is not allowed on %s; use %s", code: api.CodeMethodNotAllowed,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.createSession(t, "S-h")
			return e.call(t, "DELETE", "/v1/sessions/S-h", "", "")
		},
		follow: func(t *testing.T, e *hintEnv, f failure) {
			method := strings.Fields(f.message[strings.LastIndex(f.message, "use ")+4:])[0]
			e.ok(t, method, "/v1/sessions/S-h", "", "")
		},
	},
	{
		name: "no such endpoint", hint: "see docs/api.md for the API", code: api.CodeNotFound,
		provoke: func(t *testing.T, e *hintEnv) failure { return e.call(t, "GET", "/v1/sesions", "", "") },
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			doc, err := os.ReadFile("../docs/api.md")
			if err != nil || !strings.Contains(string(doc), "GET /v1/sessions") {
				t.Fatalf("docs/api.md does not list the endpoints: %v", err)
			}
			e.ok(t, "GET", "/v1/sessions", "", "")
		},
	},
	{
		name: "server shutting down", hint: "retry against another instance or after restart", code: api.CodeUnavailable,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.createSession(t, "S-h")
			e.srv.Close()
			return e.call(t, "GET", "/v1/sessions/S-h", "", "")
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.start(t, e.st) // a restarted server over the same store
			e.ok(t, "GET", "/v1/sessions/S-h", "", "")
		},
	},
	{
		name: "store closing", hint: "retry the request (appends are idempotent by key)", code: api.CodeUnavailable,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.createSession(t, "S-h")
			e.st.Close()
			return e.call(t, "POST", "/v1/sessions/S-h/events", "", event("S-h", 1))
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.start(t, nil) // the store reopened
			e.ok(t, "POST", "/v1/sessions/S-h/events", "", event("S-h", 1))
		},
	},
	{
		name: "no archive directory", hint: "restart sessiond serve with --archive-dir DIR", code: api.CodeNotConfigured, sopt: session.Options{ArchiveDir: "-"},
		provoke: func(t *testing.T, e *hintEnv) failure { return e.call(t, "GET", "/v1/archives", "", "") },
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.srv.Close()
			e.sopt.ArchiveDir = e.archives
			e.start(t, e.st)
			e.ok(t, "GET", "/v1/archives", "", "")
		},
	},
	{
		name: "patch without a gate", hint: "say who makes the change", code: api.CodeContractViolation,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.createSession(t, "S-h")
			body := `{"phase":"review"}`
			f := e.call(t, "PATCH", "/v1/sessions/S-h", "", body)
			f.message = detailMessages(t, e, "PATCH", "/v1/sessions/S-h", body)
			return f
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.ok(t, "PATCH", "/v1/sessions/S-h", "", `{"phase":"review","updated_by_gate":"user"}`)
		},
	},
	{
		name: "patch to archived", hint: "archive: POST /v1/sessions/{id}/archive", code: api.CodeInvalidState,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.createSession(t, "S-h")
			return e.call(t, "PATCH", "/v1/sessions/S-h", "", `{"status":"archived","updated_by_gate":"user"}`)
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.ok(t, "POST", "/v1/sessions/S-h/archive", "", "")
			wantStatus(t, e, "S-h", "archived")
		},
	},
	{
		name: "patch out of archived", hint: "restore: POST /v1/archives/restore with the session's latest archive", code: api.CodeInvalidState,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.archived(t, "S-h", false)
			return e.call(t, "PATCH", "/v1/sessions/S-h", "", `{"status":"paused","updated_by_gate":"user"}`)
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			restoreLatest(t, e, "S-h")
			wantStatus(t, e, "S-h", "paused")
		},
	},
	{
		name: "patch archived to running", hint: "restore it first (sessiond session restore ARCHIVE-NAME, or POST /v1/archives/restore): it comes back paused", code: api.CodeInvalidState,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.archived(t, "S-h", true)
			return e.call(t, "PATCH", "/v1/sessions/S-h", "", `{"status":"running","updated_by_gate":"user"}`)
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			restoreLatest(t, e, "S-h")
			wantStatus(t, e, "S-h", "paused")
			e.ok(t, "PATCH", "/v1/sessions/S-h", "", `{"status":"running","updated_by_gate":"user"}`)
		},
	},
	{
		name: "patch closed to running", hint: "a closed session stays closed; create a new session to go on", code: api.CodeInvalidState,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.createSession(t, "S-h")
			e.ok(t, "PATCH", "/v1/sessions/S-h", "", `{"status":"closed","updated_by_gate":"user"}`)
			return e.call(t, "PATCH", "/v1/sessions/S-h", "", `{"status":"running","updated_by_gate":"user"}`)
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.ok(t, "POST", "/v1/sessions", "", fmt.Sprintf(createBody, "S-next"))
			e.ok(t, "POST", "/v1/sessions/S-next/heartbeat", "", "")
		},
	},
	{
		name: "patch snapshot of an archived session", hint: "restore it first", code: api.CodeInvalidState,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.archived(t, "S-h", false)
			return e.call(t, "PATCH", "/v1/sessions/S-h", "", `{"updated_by_gate":"user","snapshot":{"mode":"chat","modelId":"m","capabilities":{}}}`)
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			restoreLatest(t, e, "S-h")
			e.ok(t, "PATCH", "/v1/sessions/S-h", "", `{"updated_by_gate":"user","snapshot":{"mode":"chat","modelId":"m","capabilities":{}}}`)
		},
	},
	{
		name: "heartbeat of an archived session", hint: "restore it first", code: api.CodeInvalidState,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.archived(t, "S-h", false)
			return e.call(t, "POST", "/v1/sessions/S-h/heartbeat", "", "")
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			restoreLatest(t, e, "S-h")
			e.ok(t, "POST", "/v1/sessions/S-h/heartbeat", "", "")
		},
	},
	{
		name: "warm of an archived, compacted session", hint: "restore it first", code: api.CodeInvalidState,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.archived(t, "S-h", true)
			return e.call(t, "POST", "/v1/sessions/S-h/warm", "", "")
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			restoreLatest(t, e, "S-h")
			e.ok(t, "POST", "/v1/sessions/S-h/warm", "", "")
		},
	},
	{
		name: "heartbeat of a closed session", hint: "create a new session to go on", code: api.CodeInvalidState,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.createSession(t, "S-h")
			e.ok(t, "PATCH", "/v1/sessions/S-h", "", `{"status":"closed","updated_by_gate":"user"}`)
			return e.call(t, "POST", "/v1/sessions/S-h/heartbeat", "", "")
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.ok(t, "POST", "/v1/sessions", "", fmt.Sprintf(createBody, "S-next"))
			e.ok(t, "POST", "/v1/sessions/S-next/heartbeat", "", "")
		},
	},
	{
		name: "archive an archived session", hint: "then archive it again", code: api.CodeInvalidState,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.archived(t, "S-h", false)
			return e.call(t, "POST", "/v1/sessions/S-h/archive", "", `{"compact":true}`)
		},
		follow: func(t *testing.T, e *hintEnv, f failure) {
			name := regexp.MustCompile(`"name":"([^"]+)"`).FindStringSubmatch(f.message)
			if name == nil {
				t.Fatalf("the hint names no archive: %s", f.message)
			}
			e.ok(t, "POST", "/v1/archives/restore", "", `{"name":"`+name[1]+`"}`)
			ar := e.ok(t, "POST", "/v1/sessions/S-h/archive", "", `{"compact":true}`)
			if !strings.Contains(ar.body, `"compacted":1`) {
				t.Errorf("archive --compact after the restore: %s", ar.body)
			}
		},
	},
	{
		name: "restore a live session", hint: "restore it into another data directory (sessiond serve --data OTHER --archive-dir THIS-ARCHIVE-DIR)", code: api.CodeRestoreConflict,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.archived(t, "S-h", false)
			restoreLatest(t, e, "S-h")
			return e.call(t, "POST", "/v1/archives/restore", "", `{"project":"-"}`)
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			other := &hintEnv{data: filepath.Join(t.TempDir(), "other"), sopt: session.Options{ArchiveDir: e.archives}}
			t.Cleanup(func() {
				for _, c := range other.closers {
					c()
				}
			})
			other.start(t, nil)
			other.ok(t, "POST", "/v1/archives/restore", "", `{"project":"-"}`)
			other.ok(t, "GET", "/v1/sessions/S-h", "", "")
		},
	},
	{
		name: "restore another copy's archive", hint: "Restore its latest archive %s to bring it back", code: api.CodeRestoreConflict,
		provoke: func(t *testing.T, e *hintEnv) failure {
			// Another server has its own S-h with another log; its archive is uploaded here.
			o := newHintEnv(t, server.Options{})
			o.createSession(t, "S-h")
			o.ok(t, "POST", "/v1/sessions/S-h/events", "", strings.Replace(event("S-h", 1), "hello", "elsewhere", 1))
			oa, err := o.cl.Archive(context.Background(), "S-h", api.ArchiveRequest{})
			if err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(oa.Archive.Path)
			e.archived(t, "S-h", false)
			time.Sleep(2 * time.Millisecond) // archive names have millisecond stamps
			e.ok(t, "POST", "/v1/archives", "application/json", string(data))
			return e.call(t, "POST", "/v1/archives/restore", "", `{"name":"`+oa.Archive.Name+`"}`)
		},
		follow: func(t *testing.T, e *hintEnv, f failure) {
			name := regexp.MustCompile(`Restore its latest archive (\S+) `).FindStringSubmatch(f.message)
			e.ok(t, "POST", "/v1/archives/restore", "", `{"name":"`+name[1]+`"}`)
			wantStatus(t, e, "S-h", "paused")
		},
	},
	{
		name: "restore an older archive over a compacted session", hint: "Restore its latest archive %s, or restore %s into another data directory", code: api.CodeRestoreConflict,
		provoke: func(t *testing.T, e *hintEnv) failure {
			old := e.archived(t, "S-h", false)
			restoreLatest(t, e, "S-h")
			e.ok(t, "POST", "/v1/sessions/S-h/events", "", event("S-h", 2))
			time.Sleep(2 * time.Millisecond)
			if _, err := e.cl.Archive(context.Background(), "S-h", api.ArchiveRequest{Compact: true}); err != nil {
				t.Fatal(err)
			}
			return e.call(t, "POST", "/v1/archives/restore", "", `{"name":"`+old.Archive.Name+`"}`)
		},
		follow: func(t *testing.T, e *hintEnv, f failure) {
			name := regexp.MustCompile(`Restore its latest archive (\S+),`).FindStringSubmatch(f.message)
			resp := e.ok(t, "POST", "/v1/archives/restore", "", `{"name":"`+name[1]+`"}`)
			if !strings.Contains(resp.body, `"how":"over-compacted"`) || !strings.Contains(resp.body, `"events":2`) {
				t.Errorf("restore of the latest archive: %s", resp.body)
			}
		},
	},
	{
		name: "restore over a compacted session that took appends", hint: "into another data directory to read the archived part", code: api.CodeRestoreConflict,
		provoke: func(t *testing.T, e *hintEnv) failure {
			ar := e.archived(t, "S-h", true)
			e.ok(t, "POST", "/v1/sessions/S-h/events", "", event("S-h", 2)) // a late runtime append
			return e.call(t, "POST", "/v1/archives/restore", "", `{"name":"`+ar.Archive.Name+`"}`)
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			other := &hintEnv{data: filepath.Join(t.TempDir(), "other"), sopt: session.Options{ArchiveDir: e.archives}}
			t.Cleanup(func() {
				for _, c := range other.closers {
					c()
				}
			})
			other.start(t, nil)
			if resp := other.ok(t, "POST", "/v1/archives/restore", "", `{"project":"-"}`); !strings.Contains(resp.body, `"events":1`) {
				t.Errorf("restore into another data directory: %s", resp.body)
			}
			if page, err := e.cl.ReadEvents(context.Background(), "S-h", -1, 0); err != nil || len(page.Events) != 1 {
				t.Errorf("the later events are not readable in place: %+v, %v", page, err)
			}
		},
	},
	{
		name: "not an archive name", hint: "list them with sessiond session restore --list", code: api.CodeArchiveNotFound,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.archived(t, "S-h", false)
			return e.call(t, "POST", "/v1/archives/restore", "", `{"name":"S-h.json"}`)
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			list, err := e.cl.Archives(context.Background(), "")
			if err != nil || len(list.Archives) != 1 {
				t.Fatalf("list: %+v, %v", list, err)
			}
			e.ok(t, "POST", "/v1/archives/restore", "", `{"name":"`+list.Archives[0].Name+`"}`)
		},
	},
	{
		name: "tampered archive", hint: "the file was altered, restore another archive", code: api.CodeArchiveInvalid,
		provoke: func(t *testing.T, e *hintEnv) failure {
			ar := e.archived(t, "S-h", true)
			data, _ := os.ReadFile(ar.Archive.Path)
			bad := strings.Replace(string(data), "hello", "HELLO", 1)
			return e.call(t, "POST", "/v1/archives", "application/json", bad)
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) { restoreLatest(t, e, "S-h") },
	},
	{
		name: "archive whose events do not chain to its head", hint: "an event was altered after the archive was written; restore another archive", code: api.CodeArchiveInvalid,
		provoke: func(t *testing.T, e *hintEnv) failure {
			ar := e.archived(t, "S-h", true)
			data, _ := os.ReadFile(ar.Archive.Path)
			// An event altered and the content's checksum made to match again: only the chain
			// head the content records gives it away.
			head, content, ok := strings.Cut(string(data), `,"content":`)
			if !ok {
				t.Fatal("no content in the archive")
			}
			content = strings.TrimSuffix(strings.Replace(content, "hello", "HELLO", 1), "}\n")
			sum := sha256.Sum256([]byte(content))
			at := strings.Index(head, `"checksum":"sha256:`) + len(`"checksum":"sha256:`)
			bad := head[:at] + hex.EncodeToString(sum[:]) + head[at+64:] + `,"content":` + content + "}\n"
			return e.call(t, "POST", "/v1/archives", "application/json", bad)
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) { restoreLatest(t, e, "S-h") },
	},
	{
		name: "restore without a name", hint: "say which archive to restore: a name, or a project for its latest archive", code: api.CodeMalformed,
		provoke: func(t *testing.T, e *hintEnv) failure {
			e.archived(t, "S-h", false)
			return e.call(t, "POST", "/v1/archives/restore", "", `{}`)
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.ok(t, "POST", "/v1/archives/restore", "", `{"project":"-"}`)
		},
	},
	{
		name: "capability unavailable", hint: "turn it on with PATCH /v1/sessions/%s", code: "CAPABILITY_UNAVAILABLE",
		provoke: func(t *testing.T, e *hintEnv) failure {
			r := e.waitingApproval(t, "S-h", `{"tools":true}`)
			return e.commandFailure(t, "S-h", "approval", "r1", "k1", r.last(), approve)
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.ok(t, "PATCH", "/v1/sessions/S-h", "", `{"updated_by_gate":"owner","snapshot":{"mode":"work","modelId":"m","capabilities":{"tools":true,"approval":true}}}`)
			e.wantAccepted(t, "S-h", "approval", "r1", "k2", e.lastSequence(t, "S-h"), approve, "")
		},
	},
	{
		name: "command sequence conflict", hint: "read the new events and send a new command with expectedSequence", code: "SEQUENCE_CONFLICT",
		provoke: func(t *testing.T, e *hintEnv) failure {
			r := e.waitingApproval(t, "S-h", allCaps)
			return e.commandFailure(t, "S-h", "approval", "r1", "k1", r.last()-1, approve)
		},
		follow: func(t *testing.T, e *hintEnv, f failure) {
			n, err := strconv.ParseInt(f.message[strings.LastIndex(f.message, " ")+1:], 10, 64)
			if err != nil {
				t.Fatalf("no sequence at the end of %q", f.message)
			}
			e.wantAccepted(t, "S-h", "approval", "r1", "k2", n, approve, "")
		},
	},
	{
		name: "bad stop wait", hint: "must be a duration from 0s to %s", code: api.CodeMalformed,
		provoke: func(t *testing.T, e *hintEnv) failure {
			r := e.runtime(t, "S-h", allCaps)
			r.message("m1", "user", "go")
			r.status("r1", "m1", "running")
			return e.call(t, "POST", "/v1/sessions/S-h/commands?wait=forever", "", `{}`)
		},
		follow: func(t *testing.T, e *hintEnv, _ failure) {
			e.wantAccepted(t, "S-h", "stop", "r1", "k1", e.lastSequence(t, "S-h"), `{}`, "?wait=0s")
		},
	},
	{
		name: "heartbeat lost", hint: "retry it with a retry command once the runtime is back", code: session.HeartbeatLost, sopt: session.Options{StaleAfter: time.Millisecond},
		provoke: func(t *testing.T, e *hintEnv) failure {
			r := e.runtime(t, "S-h", allCaps)
			r.message("m1", "user", "go")
			r.status("r1", "m1", "running")
			time.Sleep(10 * time.Millisecond)
			e.ok(t, "POST", "/v1/sweep", "", "")
			page, err := e.cl.ReadEvents(context.Background(), "S-h", -1, 0)
			if err != nil {
				t.Fatal(err)
			}
			var last contract.Event
			json.Unmarshal(page.Events[len(page.Events)-1], &last)
			p, ok := last.Payload.(*contract.ErrorPayload)
			if !ok {
				t.Fatalf("the sweep appended no error event: %s", page.Events[len(page.Events)-1])
			}
			return failure{0, contract.ErrorCode(p.Code), p.Message + " " + last.EventID}
		},
		follow: func(t *testing.T, e *hintEnv, f failure) {
			id := f.message[strings.LastIndex(f.message, " ")+1:]
			e.wantAccepted(t, "S-h", "retry", "r1", "k1", e.lastSequence(t, "S-h"), `{"sourceEventId":"`+id+`"}`, "")
		},
	},
}

// detailMessages returns the messages of the details of the error a request answers.
func detailMessages(t *testing.T, e *hintEnv, method, path, body string) string {
	t.Helper()
	er := errorBody(t, e.do(t, method, path, "", body).body)
	var out []string
	for _, d := range er.Details {
		out = append(out, d.Message)
	}
	return strings.Join(out, "\n")
}

// ndjson returns events from..to-1 of session sid, one a line.
func ndjson(sid string, from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		b.WriteString(event(sid, i))
		b.WriteByte('\n')
	}
	return b.String()
}

func wantStatus(t *testing.T, e *hintEnv, id, status string) {
	t.Helper()
	s, err := e.cl.GetSession(context.Background(), id)
	if err != nil || s.Record.Status != status {
		t.Fatalf("session %s: %+v, %v; want status %s", id, s, err, status)
	}
}

// restoreLatest restores the session's latest archive, as the restore hints say.
func restoreLatest(t *testing.T, e *hintEnv, id string) {
	t.Helper()
	s, err := e.cl.GetSession(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	e.ok(t, "POST", "/v1/archives/restore", "", `{"name":"`+s.Lifecycle.LastArchiveName+`"}`)
}

// TestErrorHintsWork provokes every error whose message says what to do next, over a real
// server, then does what the message says and checks that it works.
func TestErrorHintsWork(t *testing.T) {
	for _, tc := range hintCases {
		t.Run(tc.name, func(t *testing.T) {
			e := newHintEnv(t, tc.opt, tc.sopt)
			f := tc.provoke(t, e)
			if f.code != tc.code {
				t.Fatalf("code %s (%d), want %s: %s", f.code, f.status, tc.code, f.message)
			}
			if !strings.Contains(f.message, literalPart(tc.hint)) {
				t.Fatalf("message %q does not say %q", f.message, tc.hint)
			}
			tc.follow(t, e, f)
		})
	}
}

// literalPart is the longest piece of a format string without a verb, which the message holds
// verbatim.
func literalPart(format string) string {
	best := ""
	for _, p := range regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z%]`).Split(format, -1) {
		if len(p) > len(best) {
			best = p
		}
	}
	return best
}

// hintWords mark a message that tells the client what to do next.
var hintWords = regexp.MustCompile(`(?i)\b(retry (it|the|with|against)|restore (it|its|another)|create (it|a new)|use (a new|application|%s)|send (it|one|a new)|split|pick another|start it|list them|archive it|leave it out|give (mode|a new)|turn it on|upgrade|see docs|say (which|who)|shrink|omit it)\b`)

// notTestedHere lists the hint-bearing messages TestErrorHintsWork does not provoke, each with
// the reason; every other one must have a case.
var notTestedHere = map[string]string{
	"see docs/security.md, \"OIDC\"":          "needs an identity provider: auth's TestOIDC issues tokens whose claims grant nothing and checks the refusal",
	"the key could not be checked (the store": "needs the store to fail while a key is looked up",
	"upgrade sessiond":                        "needs an archive of a newer format version than any sessiond writes",
	"archive it again":                        "SESSION_MOVED needs an append to land while the archive file is written: session's TestConcurrentChangesSayToTryAgain makes one land and follows the hint",
	"restore it again":                        "needs the session to change between restore's check and its update: session's TestConcurrentChangesSayToTryAgain does it and follows the hint",
	"split the batch or shrink the event":     "the server's own limits (body, batch, parse) refuse first; store/storetest checks the store's",
	"send it again with an https:// URL":      "needs the TLS listener: TestPlainHTTPToTLSPort sends plain HTTP to it and checks the answer",
	"the session kept changing while the":     "COMMAND_EXECUTION_FAILED needs the log to move on every attempt of a command",
	"an operator must free space, then retry": "STORE_FULL needs a full disk: TestStoreFullAnswers fills a tmpfs, frees space and follows the hint",
	"the database cannot be reached now":      "STORE_UNAVAILABLE needs the database away: TestStoreUnavailableAnswers answers it and follows the hint once it is back",
	"the write may or may not have committed": "COMMIT_OUTCOME_UNKNOWN needs a connection lost while committing: TestStoreUnavailableAnswers answers it and retries the append",
}

// TestEveryHintHasACase reads the server, session, api and store packages and checks that every
// message literal that tells the client what to do next (hintWords) is covered by a case of
// TestErrorHintsWork, or listed in notTestedHere with a reason: a new hint cannot go untested.
func TestEveryHintHasACase(t *testing.T) {
	var literals, all []string
	for _, dir := range []string{".", "../session", "../archive", "../api", "../store"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if _, ok := n.(*ast.Field); ok {
					return false // struct tags and field types hold no messages
				}
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err == nil {
					all = append(all, s)
				}
				if err == nil && strings.Contains(s, " ") && hintWords.MatchString(s) {
					literals = append(literals, s)
				}
				return true
			})
		}
	}
	if len(literals) < 20 {
		t.Fatalf("found only %d hint literals; the scan is broken", len(literals))
	}
	used := map[string]bool{}
	for _, lit := range all {
		for _, tc := range hintCases {
			if strings.Contains(lit, tc.hint) {
				used[tc.hint] = true
			}
		}
	}
	for _, lit := range literals {
		covered := false
		for _, tc := range hintCases {
			if strings.Contains(lit, tc.hint) {
				covered = true
			}
		}
		for frag := range notTestedHere {
			if strings.Contains(lit, frag) {
				covered, used[frag] = true, true
			}
		}
		if !covered {
			t.Errorf("the message %q tells the client what to do, but no case of TestErrorHintsWork follows it (add one, or list it in notTestedHere with the reason)", lit)
		}
	}
	for _, tc := range hintCases {
		if !used[tc.hint] {
			t.Errorf("case %q: its hint %q is in no message literal of the source", tc.name, tc.hint)
		}
	}
	for frag := range notTestedHere {
		if !used[frag] {
			t.Errorf("notTestedHere lists %q, which is in no message literal any more", frag)
		}
	}
}

// hintKey makes a key of project with scopes in e's store.
func hintKey(t *testing.T, e *hintEnv, project, scopes string) string {
	t.Helper()
	set, err := auth.ParseScopes(scopes)
	if err != nil {
		t.Fatal(err)
	}
	secret, _, err := auth.NewKeyring(e.st, auth.KeyringOptions{}).Create(context.Background(), auth.KeySpec{Project: project, Scopes: set})
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// authDo sends a request with an Authorization value ("" for none).
func authDo(t *testing.T, e *hintEnv, method, path, authz, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

func authFailure(t *testing.T, e *hintEnv, method, path, authz, body string) failure {
	t.Helper()
	status, data := authDo(t, e, method, path, authz, body)
	if status < 400 {
		t.Fatalf("%s %s answered %d, want an error: %s", method, path, status, data)
	}
	er := errorBody(t, data)
	return failure{status, er.Code, er.Message}
}

func authOK(t *testing.T, e *hintEnv, method, path, authz, body string) {
	t.Helper()
	if status, data := authDo(t, e, method, path, authz, body); status >= 300 {
		t.Fatalf("following the hint, %s %s answered %d: %s", method, path, status, data)
	}
}
