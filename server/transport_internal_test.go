package server

import (
	"bufio"
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/api"
)

// FuzzNetHTTPRefusal: the recognizer of net/http's refusals never panics, recognizes only the
// shape net/http writes, and answers a 4xx for it.
func FuzzNetHTTPRefusal(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 400 Bad Request" + netHTTPErrorHeaders + "400 Bad Request",
		"HTTP/1.1 431 Request Header Fields Too Large" + netHTTPErrorHeaders + "431 Request Header Fields Too Large",
		"HTTP/1.1 501 Not Implemented" + netHTTPErrorHeaders + "Unsupported transfer encoding",
		"HTTP/1.1 505 HTTP Version Not Supported: unsupported protocol version" + netHTTPErrorHeaders + "505 HTTP Version Not Supported: unsupported protocol version",
		"HTTP/1.1 400 Bad Request: malformed Host header" + netHTTPErrorHeaders + "400 Bad Request: malformed Host header",
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nDate: x\r\n\r\nhi",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		e := netHTTPRefusal(p)
		if e == nil {
			return
		}
		if st := api.HTTPStatus(e.Code); st < 400 || st > 499 {
			t.Fatalf("%q recognized as %s with status %d", p, e.Code, st)
		}
		if !bytes.HasPrefix(p, []byte("HTTP/1.1 ")) || !bytes.Contains(p, []byte(netHTTPErrorHeaders)) {
			t.Fatalf("%q is not net/http's shape but was recognized", p)
		}
	})
}

// TestHandlerResponsesAreNotRefusals: what a handler writes, plain-text errors of every status
// included, is never taken for one of net/http's own refusals (it has a Date header, and its
// body is not the status line).
func TestHandlerResponsesAreNotRefusals(t *testing.T) {
	for _, code := range []int{400, 404, 431, 501, 505} {
		rec := httptest.NewRecorder()
		http.Error(rec, http.StatusText(code), code)
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		rec.Result().Write(w)
		w.Flush()
		if !strings.HasPrefix(buf.String(), "HTTP/1.1 ") {
			t.Fatalf("not a response: %q", buf.String())
		}
		if e := netHTTPRefusal(buf.Bytes()); e != nil {
			t.Errorf("a handler's %d was taken for a refusal: %v\n%q", code, e, buf.String())
		}
	}
}
