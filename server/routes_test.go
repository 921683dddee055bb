package server_test

import (
	"fmt"
	"github.com/sessiond/sessiond/contract"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/server"
)

// concrete turns a route pattern into a method and a path that reaches it.
func concrete(pattern string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	path = strings.NewReplacer("{id}", "S-q", "{runId}", "r1", "{$}", "", "{file...}", "app.js").Replace(path)
	return method, path
}

// TestRouteTableCoversTheAPI checks the table the tests below walk is the one the router
// serves: every documented endpoint is in it, and a path outside it is not routed.
func TestRouteTableCoversTheAPI(t *testing.T) {
	b := setup(t, server.Options{})
	table := b.srv.RouteTable()
	if len(table) < 24 {
		t.Fatalf("route table has %d routes; the API has at least 24", len(table))
	}
	for _, rt := range table {
		method, path := concrete(rt.Pattern)
		resp := b.do(t, method, path+"?zz-unknown=1", "", "")
		if e := errorBody(t, resp.body); resp.status != http.StatusBadRequest || !strings.Contains(e.Message, rt.Pattern) {
			t.Errorf("%s: %d %s; the router does not serve it through its route", rt.Pattern, resp.status, resp.body)
		}
	}
	if resp := b.do(t, "GET", "/v1/nothing?zz-unknown=1", "", ""); resp.status != http.StatusNotFound {
		t.Errorf("unrouted path: %d %s", resp.status, resp.body)
	}
}

// TestEveryRouteRefusesUnknownQueryParameters sends, to every route of the table, a query
// parameter it does not know and one it knows twice: both are 400 MALFORMED_REQUEST naming the
// parameter and the allowed ones, before anything else happens.
func TestEveryRouteRefusesUnknownQueryParameters(t *testing.T) {
	b := setup(t, server.Options{})
	b.createSession(t, "S-q")
	for _, rt := range b.srv.RouteTable() {
		t.Run(rt.Pattern, func(t *testing.T) {
			method, path := concrete(rt.Pattern)
			resp := b.do(t, method, path+"?bogus_param=1", "application/json", "{}")
			e := errorBody(t, resp.body)
			if resp.status != http.StatusBadRequest || e.Code != contract.CodeMalformed || !strings.Contains(e.Message, `"bogus_param"`) {
				t.Fatalf("unknown parameter: %d %s", resp.status, resp.body)
			}
			if len(rt.Query) == 0 && !strings.Contains(e.Message, "takes no query parameters") {
				t.Errorf("message does not say the route takes none: %s", e.Message)
			}
			for _, q := range rt.Query {
				if !strings.Contains(e.Message, q) {
					t.Errorf("message does not name the allowed parameter %s: %s", q, e.Message)
				}
			}
			if len(rt.Query) > 0 {
				q := rt.Query[0]
				resp := b.do(t, method, fmt.Sprintf("%s?%s=1&%s=2", path, q, q), "application/json", "{}")
				if e := errorBody(t, resp.body); resp.status != http.StatusBadRequest || !strings.Contains(e.Message, q+`" is given 2 times`) {
					t.Errorf("repeated parameter: %d %s", resp.status, resp.body)
				}
			}
			if resp := b.do(t, method, path+"?a=%zz", "application/json", "{}"); resp.status != http.StatusBadRequest || !strings.Contains(resp.body, "does not parse") {
				t.Errorf("unparsable query: %d %s", resp.status, resp.body)
			}
		})
	}
	if b.lastSequence(t, "S-q") != -1 {
		t.Error("a refused request wrote to the log")
	}
}

// TestMisspeltQueryParameterHint follows the hint of a snake_case expectedSequence: the
// misspelt one is refused (an append must never become unconditional), the one the hint names
// makes the append conditional.
func TestMisspeltQueryParameterHint(t *testing.T) {
	b := setup(t, server.Options{})
	b.createSession(t, "S-h")
	resp := b.do(t, "POST", "/v1/sessions/S-h/events?expected_sequence=5", "application/json", event("S-h", 1))
	e := errorBody(t, resp.body)
	if resp.status != http.StatusBadRequest || e.Code != contract.CodeMalformed || !strings.Contains(e.Message, "did you mean expectedSequence?") {
		t.Fatalf("misspelt parameter: %d %s", resp.status, resp.body)
	}
	if doc, err := os.ReadFile("../docs/api.md"); err != nil || !strings.Contains(string(doc), "`"+e.Message+"`") {
		t.Errorf("docs/api.md does not quote the message as the server sends it: %s (%v)", e.Message, err)
	}
	resp = b.do(t, "POST", "/v1/sessions/S-h/events?expectedSequence=5", "application/json", event("S-h", 1))
	if e := errorBody(t, resp.body); resp.status != http.StatusConflict || e.Code != contract.CodeSequenceConflict {
		t.Fatalf("the hint's parameter is not honoured: %d %s", resp.status, resp.body)
	}
	if resp := b.do(t, "POST", "/v1/sessions/S-h/events?expectedSequence=-1", "application/json", event("S-h", 1)); resp.status != http.StatusCreated {
		t.Fatalf("append with the right expectedSequence: %d %s", resp.status, resp.body)
	}
	if resp := b.do(t, "GET", "/v1/sessions/S-h/events/stream?tail=yes", "", ""); resp.status != http.StatusBadRequest || !strings.Contains(resp.body, "must be true or false") {
		t.Errorf("tail=yes: %d %s", resp.status, resp.body)
	}
}

// TestEveryBodyRouteRefusesOtherMediaTypes sends every route that reads a body each media type
// it does not take: 415 UNSUPPORTED_MEDIA_TYPE naming the accepted ones. Following the hint
// (the first accepted type) gets past the check.
func TestEveryBodyRouteRefusesOtherMediaTypes(t *testing.T) {
	b := setup(t, server.Options{})
	b.createSession(t, "S-q")
	bad := []string{
		"application/x-www-form-urlencoded",
		"text/plain",
		"multipart/form-data; boundary=x",
		"application/json; charset=latin1",
		"application/json; profile=x",
		"application/json;;",
	}
	n := 0
	for _, rt := range b.srv.RouteTable() {
		if rt.Body == nil {
			continue
		}
		n++
		t.Run(rt.Pattern, func(t *testing.T) {
			method, path := concrete(rt.Pattern)
			for _, ct := range bad {
				if ct == "application/json; charset=latin1" || ct == "application/json; profile=x" || ct == "application/json;;" {
					if rt.Body[0] != "application/json" {
						continue
					}
				}
				resp := b.do(t, method, path, ct, "{}")
				e := errorBody(t, resp.body)
				if resp.status != http.StatusUnsupportedMediaType || e.Code != contract.CodeUnsupportedMedia {
					t.Errorf("%s: %d %s", ct, resp.status, resp.body)
					continue
				}
				for _, want := range rt.Body {
					if !strings.Contains(e.Message, want) {
						t.Errorf("%s: message does not name %s: %s", ct, want, e.Message)
					}
				}
			}
			for _, ct := range []string{rt.Body[0], rt.Body[0] + "; charset=UTF-8"} {
				if resp := b.do(t, method, path, ct, "{}"); resp.status == http.StatusUnsupportedMediaType {
					t.Errorf("the hint's %s is refused: %s", ct, resp.body)
				}
			}
		})
	}
	if n < 10 {
		t.Errorf("only %d routes read a body", n)
	}
	if b.lastSequence(t, "S-q") != -1 {
		t.Error("a refused request wrote to the log")
	}
}

// TestCreateRefusesFormBody is the case the issue found: a create sent as a form is refused
// and creates nothing; the same body as JSON creates the session.
func TestCreateRefusesFormBody(t *testing.T) {
	b := setup(t, server.Options{})
	body := fmt.Sprintf(createBody, "S-form")
	resp := b.do(t, "POST", "/v1/sessions", "application/x-www-form-urlencoded", body)
	if e := errorBody(t, resp.body); resp.status != http.StatusUnsupportedMediaType || !strings.Contains(e.Message, "send Content-Type: application/json") {
		t.Fatalf("form create: %d %s", resp.status, resp.body)
	}
	if resp := b.do(t, "GET", "/v1/sessions/S-form", "", ""); resp.status != http.StatusNotFound {
		t.Fatalf("a refused create made the session: %d", resp.status)
	}
	if resp := b.do(t, "POST", "/v1/sessions", "application/json", body); resp.status != http.StatusCreated {
		t.Fatalf("create as JSON: %d %s", resp.status, resp.body)
	}
}
