package server_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sessiond/sessiond/server"
)

// TestErrorMessagesQuoteBounded: wherever an error message repeats request data (the path of
// a 404 or 405, a query parameter's name or value, a header, a body field), it quotes at most
// a bounded part of it, so that a 200 KB path or header does not come back whole: every
// answer below is a complete JSON error whose message is under 1 KB. Before, a 405 for a
// 200 KB path echoed all of it.
func TestErrorMessagesQuoteBounded(t *testing.T) {
	s := serveReal(t, server.Options{CORSOrigins: []string{"https://app.example.com"}}, false)
	s.createSession(t, "S-q")
	big := strings.Repeat("é", 100<<10) // 200 KB, two bytes a character: cuts must keep UTF-8 whole
	esc := strings.Repeat("%C3%A9", 100<<10)
	field := fmt.Sprintf("{%q:1}", big[:300])
	for _, tc := range []struct {
		name, req string
		status    int
	}{
		{"404 path", "GET /x" + esc + " HTTP/1.1\r\nHost: x\r\n\r\n", 404},
		{"405 path", "DELETE /v1/sessions/" + esc + " HTTP/1.1\r\nHost: x\r\n\r\n", 405},
		{"query name", "GET /v1/sessions?" + esc + "=1 HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"query that does not parse", "GET /v1/sessions?a=%zz" + esc + " HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"integer query value", "GET /v1/sessions/S-q/events?after=" + esc + " HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"status filter", "GET /v1/sessions?status=" + esc + " HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"multitask", "POST /v1/sessions/S-q/events?multitask=" + esc + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n[]", 400},
		{"tail", "GET /v1/sessions/S-q/events/stream?tail=" + esc + " HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"Content-Type", "POST /v1/sessions/S-q/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/" + big + "\r\nContent-Length: 2\r\n\r\n[]", 415},
		{"Content-Type parameter", "POST /v1/sessions/S-q/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json; a=" + big + "\r\nContent-Length: 2\r\n\r\n[]", 415},
		{"Last-Event-ID", "GET /v1/sessions/S-q/events/stream HTTP/1.1\r\nHost: x\r\nLast-Event-ID: " + big + "\r\n\r\n", 400},
		{"CORS origin", "OPTIONS /v1/sessions HTTP/1.1\r\nHost: x\r\nOrigin: https://" + big + "\r\nAccess-Control-Request-Method: GET\r\n\r\n", 403},
		{"CORS method", "OPTIONS /v1/sessions/" + esc + " HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example.com\r\nAccess-Control-Request-Method: DELETE\r\n\r\n", 405},
		{"unknown body field", fmt.Sprintf("POST /v1/sessions/S-q/warm HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(field), field), 422},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := rawResponse(t, s.addr, tc.req)
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d: %.300s", resp.StatusCode, tc.status, body)
			}
			e := errorBody(t, body)
			if len(e.Message) > 1024 {
				t.Errorf("a message of %d bytes: %.300s…", len(e.Message), e.Message)
			}
			if !utf8.ValidString(e.Message) {
				t.Errorf("the message is not valid UTF-8")
			}
		})
	}
}

// TestHostAllowList: with Options.AllowedHosts (serve sets it on a loopback server without
// authentication), a request for any other Host is refused 403 FORBIDDEN, naming the allowed
// ones, before routing: a page of another site that resolved its own name to 127.0.0.1 (DNS
// rebinding) cannot read or write sessions. Names match without their port and without case.
func TestHostAllowList(t *testing.T) {
	s := serveReal(t, server.Options{AllowedHosts: []string{"localhost", "127.0.0.1", "::1"}}, false)
	for host, want := range map[string]int{
		"localhost:7420": 200, "LOCALHOST": 200, "127.0.0.1:7420": 200, "[::1]:7420": 200,
		"evil.example:7420": 403, "evil.example": 403, "127.0.0.2": 403, "localhost.evil.example": 403,
	} {
		for _, path := range []string{"/v1/sessions", "/healthz"} {
			resp, body := rawResponse(t, s.addr, "GET "+path+" HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
			if resp.StatusCode != want {
				t.Errorf("GET %s with Host %s: %d %s; want %d", path, host, resp.StatusCode, body, want)
			}
			if want == 403 && !strings.Contains(errorBody(t, body).Message, "--allowed-hosts") {
				t.Errorf("the refusal does not say what to do: %s", body)
			}
		}
	}
}
