package server_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/auth"
	"github.com/sessiond/sessiond/internal/testenv"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/sqlite"
)

// tlsServed is a server on a TLS listener (Server.TLSListener) as sessiond serve --tls-cert
// runs it.
type tlsServed struct {
	st    store.Store
	addr  string
	url   string
	roots *x509.CertPool
}

// serveTLS serves opt over TLS with a new self-signed certificate for 127.0.0.1, loaded as
// serve loads it (CertReloader).
func serveTLS(t *testing.T, opt server.Options) *tlsServed {
	t.Helper()
	dir := t.TempDir()
	c := testenv.SelfSignedCert(t, 1)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, c.CertPEM, 0o600)
	os.WriteFile(keyFile, c.KeyPEM, 0o600)
	certs, err := server.NewCertReloader(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(c.X509)

	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, st, opt)
	hs := srv.HTTPServer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(srv.TLSListener(ln, certs.TLSConfig()))
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
		st.Close()
	})
	return &tlsServed{st: st, addr: ln.Addr().String(), url: "https://" + ln.Addr().String(), roots: roots}
}

// client returns an HTTP client of the server: HTTP/2 when h2, else HTTP/1.1 (a transport
// that does not offer h2).
func (s *tlsServed) client(t *testing.T, h2 bool) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.roots}, ForceAttemptHTTP2: h2}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// do sends a request and returns the response with its body read (a stream's is not).
func do(t *testing.T, cl *http.Client, method, url, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, string(data)
}

// TestTLSServesHTTP2: over TLS the server negotiates HTTP/2 with a client that offers it,
// answers errors in the API's JSON shape and delivers event streams over it; a client of
// HTTP/1.1 is served HTTP/1.1 on the same port, net/http's own refusals still rewritten to
// JSON. Before, the listener hid the *tls.Conn from net/http: HTTP/1.1 only.
func TestTLSServesHTTP2(t *testing.T) {
	s := serveTLS(t, server.Options{})
	h2 := s.client(t, true)
	resp, body := do(t, h2, "GET", s.url+"/healthz", "")
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 {
		t.Fatalf("GET /healthz: %s %d %s; want HTTP/2 200", resp.Proto, resp.StatusCode, body)
	}
	resp, body = do(t, h2, "GET", s.url+"/v1/nothing-here", "")
	if resp.ProtoMajor != 2 || resp.StatusCode != 404 || errorBody(t, body).Code != api.CodeNotFound {
		t.Errorf("GET of an unknown path over h2: %s %d %s; want a 404 NOT_FOUND error", resp.Proto, resp.StatusCode, body)
	}
	if resp, body := do(t, h2, "POST", s.url+"/v1/sessions", fmt.Sprintf(createBody, "S-h2")); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create over h2: %d %s", resp.StatusCode, body)
	}

	// A live stream over h2 delivers an event appended after it opened.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/v1/sessions/S-h2/events/stream", nil)
	stream, err := h2.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.ProtoMajor != 2 || stream.StatusCode != 200 || !strings.HasPrefix(stream.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream over h2: %s %d %s", stream.Proto, stream.StatusCode, stream.Header.Get("Content-Type"))
	}
	if resp, body := do(t, h2, "POST", s.url+"/v1/sessions/S-h2/events", event("S-h2", 1)); resp.StatusCode != http.StatusCreated {
		t.Fatalf("append over h2: %d %s", resp.StatusCode, body)
	}
	sc := bufio.NewScanner(stream.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") && strings.Contains(sc.Text(), `"eventId":"ev-1"`) {
			break
		}
	}
	if sc.Err() != nil {
		t.Fatalf("the h2 stream ended before the event: %v", sc.Err())
	}

	// HTTP/1.1 over TLS: served, and a malformed request is refused in JSON.
	resp, body = do(t, s.client(t, false), "GET", s.url+"/healthz", "")
	if resp.ProtoMajor != 1 || resp.StatusCode != 200 || resp.TLS == nil {
		t.Errorf("GET /healthz over HTTP/1.1 and TLS: %s %d %s", resp.Proto, resp.StatusCode, body)
	}
	c, err := tls.Dial("tcp", s.addr, &tls.Config{RootCAs: s.roots, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c, "GET /v1/sessions/%zz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("a malformed request over TLS: %v", err)
	}
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || errorBody(t, string(data)).Code != api.CodeMalformed {
		t.Errorf("a malformed request over HTTP/1.1 and TLS: %d %s; want a 400 MALFORMED_REQUEST JSON error", resp.StatusCode, data)
	}
}

// TestLoginCookieSecure: the login cookie is Secure when the login came over TLS (HTTP/2 and
// HTTP/1.1 alike), and with Options.CookieSecure (serve --cookie-secure, TLS ended by a proxy)
// over plain HTTP too; over plain HTTP without it, it is not (a browser would drop it). Before,
// handlers never saw the TLS connection: never Secure.
func TestLoginCookieSecure(t *testing.T) {
	login := func(t *testing.T, cl *http.Client, url string, st store.Store) string {
		t.Helper()
		scopes, err := auth.ParseScopes("read")
		if err != nil {
			t.Fatal(err)
		}
		secret, _, err := auth.NewKeyring(st, auth.KeyringOptions{}).Create(context.Background(), auth.KeySpec{Name: "k", Project: "*", Scopes: scopes})
		if err != nil {
			t.Fatal(err)
		}
		resp, body := do(t, cl, "POST", url+"/v1/login", "", "Authorization", "Bearer "+secret)
		if resp.StatusCode != 200 {
			t.Fatalf("login: %d %s", resp.StatusCode, body)
		}
		return resp.Header.Get("Set-Cookie")
	}
	for _, h2 := range []bool{true, false} {
		s := serveTLS(t, server.Options{Auth: true})
		if sc := login(t, s.client(t, h2), s.url, s.st); !strings.Contains(sc, "; Secure") {
			t.Errorf("login over TLS (h2 %v): Set-Cookie %q is not Secure", h2, sc)
		}
	}
	for _, secure := range []bool{true, false} {
		s := serveReal(t, server.Options{Auth: true, CookieSecure: secure}, false)
		if sc := login(t, http.DefaultClient, s.url, s.st); strings.Contains(sc, "; Secure") != secure {
			t.Errorf("login over plain HTTP, CookieSecure %v: Set-Cookie %q", secure, sc)
		}
	}
}

// TestPlainHTTPToTLSPort: plain HTTP sent to the TLS port is answered in the clear, 400 with
// the API's error shape saying to use https; before, the connection was closed without a word.
func TestPlainHTTPToTLSPort(t *testing.T) {
	s := serveTLS(t, server.Options{})
	resp, body := rawResponse(t, s.addr, "GET /v1/sessions HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 400 || !strings.Contains(errorBody(t, body).Message, "https://") {
		t.Errorf("plain HTTP to the TLS port: %d %s; want 400 saying to use https", resp.StatusCode, body)
	}
}
