package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	verrors "github.com/pb33f/libopenapi-validator/errors"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/internal/openapigen"
	"github.com/sessiond/sessiond/server"
)

// The server's tests validate every request they send and every answer they get against
// api/openapi.json: setup (and the other test servers) wrap the server in [validated]. A field,
// a status or a media type the document does not describe fails the test that met it.

var (
	docOnce sync.Once
	docVal  validator.Validator
	docErr  error
	docMu   sync.Mutex // the validator is not documented as safe for concurrent use
	docOps  map[string]bool
	// docHeaders: for each "METHOD /path" of the document, each status's declared headers
	// (lower case).
	docHeaders map[string]map[string]map[string]bool
)

// openAPI returns the validator of api/openapi.json, and the set of "METHOD /path" it has.
func openAPI(t testing.TB) (validator.Validator, map[string]bool) {
	t.Helper()
	docOnce.Do(func() {
		doc, err := libopenapi.NewDocument(api.OpenAPI)
		if err != nil {
			docErr = err
			return
		}
		v, errs := validator.NewValidator(doc)
		if len(errs) > 0 {
			docErr = fmt.Errorf("%v", errs)
			return
		}
		if ok, verrs := v.ValidateDocument(); !ok {
			docErr = fmt.Errorf("api/openapi.json is not a valid OpenAPI document: %s", describe(verrs))
			return
		}
		docVal = v
		var raw struct {
			Paths map[string]map[string]struct {
				Responses map[string]struct {
					Headers map[string]json.RawMessage `json:"headers"`
				} `json:"responses"`
			} `json:"paths"`
		}
		if err := json.Unmarshal(api.OpenAPI, &raw); err != nil {
			docErr = err
			return
		}
		docOps = map[string]bool{}
		docHeaders = map[string]map[string]map[string]bool{}
		for path, item := range raw.Paths {
			for method, op := range item {
				key := strings.ToUpper(method) + " " + path
				docOps[key] = true
				docHeaders[key] = map[string]map[string]bool{}
				for status, r := range op.Responses {
					docHeaders[key][status] = map[string]bool{}
					for h := range r.Headers {
						docHeaders[key][status][strings.ToLower(h)] = true
					}
				}
			}
		}
	})
	if docErr != nil {
		t.Fatal(docErr)
	}
	return docVal, docOps
}

func describe(errs []*verrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n\t%s: %s", e.Message, e.Reason)
		for _, se := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n\t\t%s at %s (%s)", se.Reason, se.FieldPath, se.KeywordLocation)
		}
	}
	return b.String()
}

// validated wraps h so that every request and answer is checked against the document: a
// request the document describes must get an answer it describes; a request it refuses (an
// unknown path, a bad parameter or body) must get a 4xx error envelope. Streams the server
// takes the connection over for (SSE on HTTP/1.1) have their request checked only.
func validated(t testing.TB, h http.Handler) http.Handler {
	v, _ := openAPI(t)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		tw := &teeWriter{ResponseWriter: w}
		h.ServeHTTP(tw, r)
		if tw.hijacked || tw.gone {
			return // a stream taken over, or an answer its client left: no whole answer to check
		}
		req := r.Clone(r.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		if len(body) > 0 && req.Header.Get("Content-Type") == "" {
			// The server takes a body without a Content-Type as the route's first media
			// type, application/json for every route (the document's requestBody says so).
			req.Header.Set("Content-Type", "application/json")
		}
		status := tw.status
		if status == 0 {
			status = http.StatusOK
		}
		resp := &http.Response{StatusCode: status, Header: w.Header().Clone(), Body: io.NopCloser(bytes.NewReader(tw.buf.Bytes())), Request: req}
		if msg := check(v, req, body, resp, tw.buf.Bytes()); msg != "" {
			t.Errorf("api/openapi.json: %s %s → %d: %s\nbody: %.600s", r.Method, r.URL.RequestURI(), status, msg, tw.buf.String())
		}
	})
}

// check returns what is wrong with the exchange, or "".
func check(v validator.Validator, req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) string {
	docMu.Lock()
	okReq, reqErrs := v.ValidateHttpRequestSync(req)
	docMu.Unlock()
	if !okReq {
		// The document refuses the request: the server must have refused it too.
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			return "the document refuses the request, but the server answered " + http.StatusText(resp.StatusCode) + ":" + describe(reqErrs)
		}
		if msg := errorEnvelope(respBody); msg != "" {
			return msg
		}
		if pathUnknown(reqErrs) {
			return ""
		}
	}
	if resp.StatusCode == http.StatusOK && strings.HasSuffix(req.URL.Path, "/events/export") {
		if msg := exportAnswer(resp, respBody); msg != "" {
			return msg
		}
		return undeclaredHeaders(req, resp)
	}
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	docMu.Lock()
	okResp, respErrs := v.ValidateHttpResponse(req, resp)
	docMu.Unlock()
	if !okResp {
		return "the answer is not what the document describes:" + describe(respErrs)
	}
	if msg := undeclaredHeaders(req, resp); msg != "" {
		return msg
	}
	if mt := resp.Header.Get("Content-Type"); strings.HasPrefix(mt, api.ProgressMediaType) {
		final, msg := progressStream(respBody)
		if msg != "" {
			return msg
		}
		if bytes.HasPrefix(final, []byte(`{"error":`)) {
			return errorEnvelope(final)
		}
		// The final line is exactly the ordinary answer.
		h := resp.Header.Clone()
		h.Set("Content-Type", "application/json")
		answer := &http.Response{StatusCode: resp.StatusCode, Header: h, Body: io.NopCloser(bytes.NewReader(final)), Request: req}
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
		docMu.Lock()
		okResp, respErrs := v.ValidateHttpResponse(req, answer)
		docMu.Unlock()
		if !okResp {
			return "the final line of the progress stream is not the answer the document describes:" + describe(respErrs)
		}
	}
	return ""
}

// exportAnswer checks an answer of GET /v1/sessions/{id}/events/export as the document describes
// it (no JSON Schema describes a stream of lines, which the validator would decode as one JSON
// value): its media type, its Sessiond-Last-Sequence header, and every line an
// AgentSessionEvent (x-sessiond-line) with the sequence after the line before.
func exportAnswer(resp *http.Response, body []byte) string {
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		return "Content-Type " + ct + ", want application/x-ndjson"
	}
	last, err := strconv.ParseInt(resp.Header.Get(api.LastSequenceHeader), 10, 64)
	if err != nil || last < -1 {
		return fmt.Sprintf("%s %q is not a sequence", api.LastSequenceHeader, resp.Header.Get(api.LastSequenceHeader))
	}
	if len(body) == 0 {
		return ""
	}
	if body[len(body)-1] != '\n' {
		return "the last line has no newline"
	}
	prev := int64(-2)
	for line := range bytes.Lines(body) {
		line = line[:len(line)-1]
		if err := contract.Validate(contract.KindEvent, line, contract.Limits{}); err != nil {
			return fmt.Sprintf("a line is not an AgentSessionEvent: %v", err)
		}
		var e struct{ Sequence int64 }
		json.Unmarshal(line, &e)
		if prev != -2 && e.Sequence != prev+1 {
			return fmt.Sprintf("sequence %d follows %d", e.Sequence, prev)
		}
		prev = e.Sequence
	}
	if prev != last {
		return fmt.Sprintf("the last line has sequence %d, %s is %d", prev, api.LastSequenceHeader, last)
	}
	return ""
}

// unannounced are the headers an answer may carry without the document declaring them: the
// representation's and the connection's (HTTP's own), the nosniff every body carries, and the
// CORS headers, which depend on the request's Origin (docs/security.md describes them).
func unannounced(h string) bool {
	switch h {
	case "content-type", "content-length", "date", "transfer-encoding", "connection", "x-content-type-options", "vary":
		return true
	}
	return strings.HasPrefix(h, "access-control-")
}

// undeclaredHeaders returns what the answer carries that its operation's response in the
// document does not declare, or "".
func undeclaredHeaders(req *http.Request, resp *http.Response) string {
	op := docOperation(req.Method, req.URL.Path)
	declared, ok := docHeaders[op][strconv.Itoa(resp.StatusCode)]
	if !ok {
		return "" // the response validator has judged the status
	}
	var missing []string
	for name := range resp.Header {
		h := strings.ToLower(name)
		if !unannounced(h) && !declared[h] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Sprintf("the answer carries headers %v that %s %d does not declare", missing, op, resp.StatusCode)
	}
	return ""
}

// docOperation returns the document's "METHOD /path" that serves a request's path: the one
// with the most literal segments among those that match ({name} takes one segment, a last
// {file} the rest).
func docOperation(method, path string) string {
	segs := strings.Split(path, "/")
	best, bestLit := "", -1
	for op := range docOps {
		m, tmpl, _ := strings.Cut(op, " ")
		if m != method {
			continue
		}
		ts := strings.Split(tmpl, "/")
		lit, ok := 0, true
		for i, t := range ts {
			if i >= len(segs) {
				ok = false
				break
			}
			if t == "{file}" && i == len(ts)-1 {
				break
			}
			if strings.HasPrefix(t, "{") {
				continue
			}
			if t != segs[i] {
				ok = false
				break
			}
			lit++
		}
		if ok && (len(ts) == len(segs) || ts[len(ts)-1] == "{file}") && lit > bestLit {
			best, bestLit = op, lit
		}
	}
	return best
}

// pathUnknown reports whether the request was refused for a path or method the document has
// not: then only the error envelope can be checked.
func pathUnknown(errs []*verrors.ValidationError) bool {
	for _, e := range errs {
		if e.ValidationType == "path" || e.ValidationSubType == "missingOperation" || e.ValidationSubType == "missing" {
			return true
		}
	}
	return false
}

// errorEnvelope checks an error answer's body: {"error":{"code","message",...}} with a known code.
func errorEnvelope(body []byte) string {
	var e api.ErrorBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error == nil {
		return fmt.Sprintf("an error answer is not the error envelope (%v)", err)
	}
	if !slices.Contains(api.Codes(), e.Error.Code) {
		return fmt.Sprintf("error code %s is not one of the document's ErrorCode", e.Error.Code)
	}
	return ""
}

// progressStream checks a progress stream's progress lines and returns its final line.
func progressStream(body []byte) ([]byte, string) {
	lines := bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n"))
	for i, line := range lines[:len(lines)-1] {
		var p api.ProgressLine
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil || p.Progress == nil {
			return nil, fmt.Sprintf("progress line %d is not a ProgressLine: %q", i+1, line)
		}
	}
	return lines[len(lines)-1], ""
}

// teeWriter passes an answer through and keeps a copy.
type teeWriter struct {
	http.ResponseWriter
	status   int
	buf      bytes.Buffer
	hijacked bool
	gone     bool // a write failed: the client left mid-answer (a loop that broke early)
}

func (tw *teeWriter) WriteHeader(code int) {
	if tw.status == 0 {
		tw.status = code
	}
	tw.ResponseWriter.WriteHeader(code)
}

func (tw *teeWriter) Write(p []byte) (int, error) {
	if tw.status == 0 {
		tw.status = http.StatusOK
	}
	tw.buf.Write(p)
	n, err := tw.ResponseWriter.Write(p)
	if err != nil {
		tw.gone = true
	}
	return n, err
}

func (tw *teeWriter) Flush() { http.NewResponseController(tw.ResponseWriter).Flush() }

func (tw *teeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	tw.hijacked = true
	return http.NewResponseController(tw.ResponseWriter).Hijack()
}

func (tw *teeWriter) Unwrap() http.ResponseWriter { return tw.ResponseWriter }

// TestOpenAPIRoutes: every route of the server's route table is an operation of the document,
// with the same query parameters and request media types, and the document has no other.
func TestOpenAPIRoutes(t *testing.T) {
	_, ops := openAPI(t)
	b := setup(t, server.Options{})
	var raw struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name, In string
			} `json:"parameters"`
			RequestBody *struct {
				Content map[string]json.RawMessage `json:"content"`
			} `json:"requestBody"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPI, &raw); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, rt := range b.srv.RouteTable() {
		method, path, _ := strings.Cut(rt.Pattern, " ")
		docOp := method + " " + openapigen.DocPath(path)
		seen[docOp] = true
		if !ops[docOp] {
			t.Errorf("route %s is not in api/openapi.json; add it to internal/openapigen's operations and run %s", rt.Pattern, "go test ./internal/openapigen/ -run TestOpenAPIDocument -update")
			continue
		}
		op := raw.Paths[openapigen.DocPath(path)][strings.ToLower(method)]
		var query []string
		for _, p := range op.Parameters {
			if p.In == "query" {
				query = append(query, p.Name)
			}
		}
		if !equalSet(query, rt.Query) {
			t.Errorf("%s: the document's query parameters are %v, the route table's %v", rt.Pattern, query, rt.Query)
		}
		var media []string
		if op.RequestBody != nil {
			for mt := range op.RequestBody.Content {
				media = append(media, mt)
			}
		}
		if !equalSet(media, rt.Body) {
			t.Errorf("%s: the document's request media types are %v, the route table's %v", rt.Pattern, media, rt.Body)
		}
	}
	for op := range ops {
		if !seen[op] {
			t.Errorf("api/openapi.json has %s, which no route serves", op)
		}
	}
}

func equalSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestOpenAPIServed: GET /v1/openapi.json answers the embedded document, which declares every
// error code the API answers.
func TestOpenAPIServed(t *testing.T) {
	b := setup(t, server.Options{})
	resp := b.do(t, "GET", "/v1/openapi.json", "", "")
	if resp.status != http.StatusOK || resp.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/openapi.json: %d %s", resp.status, resp.header.Get("Content-Type"))
	}
	if resp.body != string(api.OpenAPI) {
		t.Fatal("GET /v1/openapi.json does not answer api/openapi.json")
	}
	var doc struct {
		OpenAPI    string `json:"openapi"`
		Components struct {
			Schemas struct {
				ErrorCode struct {
					Enum []contract.ErrorCode `json:"enum"`
				} `json:"ErrorCode"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal([]byte(resp.body), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	if !slices.Equal(doc.Components.Schemas.ErrorCode.Enum, api.Codes()) {
		t.Errorf("ErrorCode enum %v is not api.Codes() %v", doc.Components.Schemas.ErrorCode.Enum, api.Codes())
	}
}

// TestOpenAPIValidationCatchesDrift: the check every test server runs fails an answer with an
// undocumented field, an undocumented status, a wrong media type, a missing X-Request-Id, and a
// request the document
// refuses that the server accepted; it passes the documented answer.
func TestOpenAPIValidationCatchesDrift(t *testing.T) {
	v, _ := openAPI(t)
	cases := []struct {
		name, method, path, reqType, reqBody string
		status                               int
		respType, respBody                   string
		wantOK                               bool
	}{
		{"documented", "GET", "/healthz", "", "", 200, "application/json", `{"status":"ok","store":"sqlite"}`, true},
		{"no X-Request-Id", "GET", "/healthz", "", "", 200, "application/json", `{"status":"ok","store":"sqlite"}`, false},
		{"undocumented field", "GET", "/healthz", "", "", 200, "application/json", `{"status":"ok","store":"sqlite","extra":1}`, false},
		{"undocumented status", "GET", "/healthz", "", "", 418, "application/json", `{"status":"ok","store":"sqlite"}`, false},
		{"wrong media type", "GET", "/healthz", "", "", 200, "text/plain", `ok`, false},
		{"error envelope with an unknown code", "GET", "/v1/sessions/S-1", "", "", 404, "application/json", `{"error":{"code":"NOPE","message":"m"}}`, false},
		{"documented error", "GET", "/v1/sessions/S-1", "", "", 404, "application/json", `{"error":{"code":"SESSION_NOT_FOUND","message":"m"}}`, true},
		{"refused request accepted", "POST", "/v1/sessions", "application/json", `{"agent_id":"a"}`, 201, "application/json", `{}`, false},
		{"refused request refused", "POST", "/v1/sessions", "application/json", `{"agent_id":"a"}`, 422, "application/json", `{"error":{"code":"CONTRACT_VIOLATION","message":"m"}}`, true},
		{"unknown path answered 200", "GET", "/v2/nothing", "", "", 200, "application/json", `{}`, false},
		{"unknown path answered 404", "GET", "/v2/nothing", "", "", 404, "application/json", `{"error":{"code":"NOT_FOUND","message":"m"}}`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, "http://127.0.0.1:7420"+c.path, strings.NewReader(c.reqBody))
			if err != nil {
				t.Fatal(err)
			}
			if c.reqType != "" {
				req.Header.Set("Content-Type", c.reqType)
			}
			h := http.Header{"Content-Type": {c.respType}, "X-Request-Id": {"req-1"}}
			if c.name == "no X-Request-Id" {
				h.Del("X-Request-Id")
			}
			resp := &http.Response{StatusCode: c.status, Header: h,
				Body: io.NopCloser(strings.NewReader(c.respBody)), Request: req}
			msg := check(v, req, []byte(c.reqBody), resp, []byte(c.respBody))
			if (msg == "") != c.wantOK {
				t.Errorf("check = %q; want ok=%v", msg, c.wantOK)
			}
		})
	}
}
