package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/auth"
	"github.com/sessiond/sessiond/contract"
)

// This file holds what the server needs from the transport under it: the http.Server
// settings (timeouts, header limit), the budget of request body bytes in flight, the body
// deadline, the listener that turns net/http's own plain-text refusals into the API's JSON
// errors, and TLS with a certificate reloaded in place. docs/deploy.md documents the figures.

// Defaults of the transport options (see [Options]).
const (
	DefaultHeaderTimeout        = 10 * time.Second
	DefaultBodyTimeout          = 60 * time.Second
	DefaultIdleTimeout          = 120 * time.Second
	DefaultMaxInflightBodyBytes = 128 << 20
	DefaultBodyQueueWait        = 2 * time.Second
	// MaxHeaderBytes bounds a request's line and headers; over it the answer is 431
	// HEADERS_TOO_LARGE.
	MaxHeaderBytes = 1 << 20
)

// HTTPServer returns the http.Server to serve s with: headers must arrive within
// HeaderTimeout, an idle keep-alive connection is closed after IdleTimeout, headers are
// bounded by MaxHeaderBytes. There is no global read or write timeout, which would cut off
// event streams: a request body has its own deadline (BodyTimeout, set when its handler
// starts), and a stream's writes have theirs (WriteTimeout). Serve it on [Server.Listener].
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.opt.HeaderTimeout,
		IdleTimeout:       s.opt.IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.opt.Logger.Handler(), slog.LevelWarn),
		// HTTP/2 is served over TLS only, to the connections [Server.TLSListener] hands over
		// as *tls.Conn (those that negotiated "h2"); every other connection speaks HTTP/1.x.
		Protocols:   serverProtocols(),
		ConnContext: connContext,
	}
}

// serverProtocols are HTTP/1.x, and HTTP/2 over TLS (never in the clear).
func serverProtocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	return p
}

// Listener wraps ln so that the requests net/http refuses itself, before any handler runs (a
// path with a bad percent-escape such as %zz, headers over MaxHeaderBytes, a Transfer-Encoding
// other than chunked, a malformed request line), are answered with the API's JSON error
// shape and a 4xx status instead of net/http's plain text (and its 501 and 505).
// For TLS, use [Server.TLSListener] instead.
func (s *Server) Listener(ln net.Listener) net.Listener { return refusalListener{ln, s} }

type refusalListener struct {
	net.Listener
	s *Server // gives each refusal its request id
}

func (l refusalListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &refusalConn{Conn: c, s: l.s}, nil
}

// refusalConn rewrites net/http's own refusals. net/http writes each of them to the connection
// in one Write, with a fixed shape (net/http's server.go, conn.serve): "HTTP/1.1 <status>" +
// errorHeaders + a body that repeats the status (or says "Unsupported transfer encoding"), and
// then closes the connection. A response written by a handler never has that shape: it has a
// Date header. The rewritten refusal carries a new X-Request-Id (the request's own was not
// read), as every answer does.
type refusalConn struct {
	net.Conn
	s   *Server
	tls *tls.ConnectionState // the TLS connection's state, when Conn is one (TLSListener)
}

// netHTTPErrorHeaders are the headers of every net/http refusal.
const netHTTPErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

func (c *refusalConn) Write(p []byte) (int, error) {
	if e := netHTTPRefusal(p); e != nil {
		b, _ := contract.Marshal(api.ErrorBody{Error: e})
		b = append(b, '\n')
		status := api.HTTPStatus(e.Code)
		resp := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n%s: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
			status, http.StatusText(status), requestIDHeader, c.s.requestID(""), len(b), b)
		if _, err := io.WriteString(c.Conn, resp); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// CloseWrite half-closes the connection when the one under it can (net/http does after a 431).
func (c *refusalConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// netHTTPRefusal returns the API error for a refusal net/http wrote as p, or nil when p is not
// one.
func netHTTPRefusal(p []byte) *api.Error {
	rest, ok := bytes.CutPrefix(p, []byte("HTTP/1.1 "))
	if !ok {
		return nil
	}
	line, body, ok := bytes.Cut(rest, []byte(netHTTPErrorHeaders))
	if !ok || len(line) < 4 || line[3] != ' ' {
		return nil
	}
	status, err := strconv.Atoi(string(line[:3]))
	if err != nil {
		return nil
	}
	switch {
	case status == http.StatusRequestHeaderFieldsTooLarge && bytes.Equal(body, line):
		return api.Errorf(contract.CodeHeadersTooLarge, "the request line and headers are over %d bytes; nothing was read", MaxHeaderBytes)
	case status == http.StatusNotImplemented && string(body) == "Unsupported transfer encoding":
		return api.Errorf(contract.CodeMalformed, "the request's Transfer-Encoding is not supported: send the body with a Content-Length, or with Transfer-Encoding: chunked alone")
	case status == http.StatusHTTPVersionNotSupported && bytes.Equal(body, line):
		return api.Errorf(contract.CodeMalformed, "the request's HTTP version is not supported: this server speaks HTTP/1.1 (and 1.0)")
	case status >= 400 && bytes.Equal(body, line):
		// "400 Bad Request", or "400 Bad Request: <what>" when net/http says what.
		msg := "the request line or headers do not parse (for example a path with a bad percent-escape such as %zz, or a header line without a colon)"
		if _, what, ok := bytes.Cut(line, []byte(": ")); ok {
			msg = "the request does not parse: " + string(what)
		}
		return api.Errorf(contract.CodeMalformed, "%s; nothing was read", msg)
	}
	return nil
}

// bodyBudget bounds the bytes of request bodies in flight, in total and per principal (the key
// or OIDC subject a request acts as, the client's address without authentication), so that
// no one principal can hold the whole of it: a request with a body takes its share (its
// Content-Length, or the body limit when it is not known) of both before its handler reads it,
// and gives it back when the handler returns.
type bodyBudget struct {
	sem   *semaphore.Weighted
	size  int64
	per   int64 // the most one principal may hold (MaxInflightBodyBytesPerPrincipal)
	wait  time.Duration
	limit int64 // MaxBodyBytes: the share of a body of unknown length, and the most any takes

	mu   sync.Mutex
	held map[string]*principalBodies // principals with a request holding or waiting for budget
}

// principalBodies is one principal's part of the budget.
type principalBodies struct {
	sem   *semaphore.Weighted
	users int // requests holding or waiting for it; the entry goes when none is left
}

func newBodyBudget(size, per, limit int64, wait time.Duration) *bodyBudget {
	return &bodyBudget{sem: semaphore.NewWeighted(size), size: size, per: min(per, size), wait: wait, limit: limit,
		held: map[string]*principalBodies{}}
}

// share is what r takes of the budget: its Content-Length (the limit when unknown), but never
// more than a principal may hold, so that one large body alone always fits.
func (b *bodyBudget) share(r *http.Request) int64 {
	n := r.ContentLength
	if n < 0 || n > b.limit {
		n = b.limit // a body of unknown length: MaxBytesReader stops it at the limit
	}
	return min(n, b.per)
}

// bodyShare is what acquire took, for release.
type bodyShare struct {
	n   int64
	pb  *principalBodies
	who string
}

// acquire takes r's share for the principal who, from who's part first and then from the
// total, waiting at most b.wait for both; it returns the share taken, to give back with
// release, or the error to answer: RATE_LIMITED when who holds its part already, OVERLOADED
// when the total is taken.
func (b *bodyBudget) acquire(r *http.Request, who string) (bodyShare, *api.Error) {
	n := b.share(r)
	if n == 0 {
		return bodyShare{}, nil
	}
	if b.per >= b.size {
		// No part smaller than the whole: the total alone counts.
		if !b.sem.TryAcquire(n) {
			ctx, cancel := context.WithTimeout(r.Context(), b.wait)
			defer cancel()
			if b.sem.Acquire(ctx, n) != nil {
				return bodyShare{}, b.overloaded(n)
			}
		}
		return bodyShare{n: n}, nil
	}
	b.mu.Lock()
	pb := b.held[who]
	if pb == nil {
		pb = &principalBodies{sem: semaphore.NewWeighted(b.per)}
		b.held[who] = pb
	}
	pb.users++
	b.mu.Unlock()
	taken := bodyShare{n: n, pb: pb, who: who}
	var ctx context.Context
	var cancel context.CancelFunc = func() {}
	defer func() { cancel() }()
	waitFor := func(sem *semaphore.Weighted) bool {
		if sem.TryAcquire(n) {
			return true
		}
		if ctx == nil {
			ctx, cancel = context.WithTimeout(r.Context(), b.wait)
		}
		return sem.Acquire(ctx, n) == nil
	}
	if !waitFor(pb.sem) {
		b.leave(taken)
		return bodyShare{}, api.Errorf(contract.CodeRateLimited, "this client already has %d bytes of request bodies being read, its most at once (serve --max-inflight-body-bytes-per-client), and this %d-byte body found no room within %s; nothing was read or written: finish or cancel its other uploads, or retry after Retry-After", b.per, n, b.wait)
	}
	if !waitFor(b.sem) {
		pb.sem.Release(n)
		b.leave(taken)
		return bodyShare{}, b.overloaded(n)
	}
	return taken, nil
}

// overloaded is the error of an n-byte body that found no room in the total.
func (b *bodyBudget) overloaded(n int64) *api.Error {
	return api.Errorf(contract.CodeOverloaded, "the server is reading %d bytes of request bodies at once, its limit (serve --max-inflight-body-bytes), and this %d-byte body found no room within %s; nothing was read or written", b.size, n, b.wait)
}

// release gives back a share acquire took.
func (b *bodyBudget) release(taken bodyShare) {
	if taken.n > 0 {
		b.sem.Release(taken.n)
	}
	if taken.pb != nil {
		taken.pb.sem.Release(taken.n)
		b.leave(taken)
	}
}

// leave ends a request's use of its principal's part, dropping the part when no request uses it.
func (b *bodyBudget) leave(taken bodyShare) {
	b.mu.Lock()
	if taken.pb.users--; taken.pb.users == 0 {
		delete(b.held, taken.who)
	}
	b.mu.Unlock()
}

// budgetKey is the client whose part of the body budget r counts against: the principal's
// root key or OIDC subject (the one its rate and streams count against), or, without
// authentication, the client's address.
func (s *Server) budgetKey(r *http.Request, p auth.Principal) string {
	if s.authn.on {
		return "principal " + limiterKey(p)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "address " + host
}

// deadlineBody is a request body with a read deadline (BodyTimeout): once the body has been
// read to its end the deadline is lifted, so that a handler that works longer after reading
// (an archive, a command waiting for its run) is not cut off by it.
type deadlineBody struct {
	io.ReadCloser
	rc   http.ResponseController // held by value: one allocation per request fewer
	done atomic.Bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done.Swap(true) {
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// withBody runs next for a request with a body of at most limit bytes (a body declared larger
// is answered 413 TOO_LARGE at once): within the body budget when budgeted, counted for the
// principal who (or answered 503 OVERLOADED, or 429 RATE_LIMITED when who holds its part, with
// Retry-After), and with the body's read
// deadline: BodyTimeout for each started 16 MiB of the body (of its Content-Length, or of limit
// when it is not known).
func (s *Server) withBody(w http.ResponseWriter, r *http.Request, limit int64, budgeted bool, who string, next http.HandlerFunc) {
	if r.ContentLength == 0 {
		next(w, r)
		return
	}
	if r.ContentLength > limit {
		// Refused before any budget is asked for: waiting for room would only delay a 413.
		// The body is not read, so the connection cannot carry another request (and net/http
		// would otherwise wait for a small body to arrive before answering).
		if r.ProtoMajor == 1 {
			w.Header().Set("Connection", "close")
		}
		writeError(w, api.Errorf(contract.CodeTooLarge, "the request declares a body of %d bytes (Content-Length), over the %d-byte limit of %s; nothing was read: split it into smaller requests", r.ContentLength, limit, r.Pattern))
		return
	}
	if budgeted {
		taken, aerr := s.bodies.acquire(r, who)
		if aerr != nil {
			w.Header().Set("Retry-After", "1")
			writeError(w, aerr)
			return
		}
		defer s.bodies.release(taken)
	}
	n := r.ContentLength
	if n < 0 || n > limit {
		n = limit
	}
	timeout := s.opt.BodyTimeout * time.Duration(1+(n-1)/(16<<20))
	b := &deadlineBody{ReadCloser: r.Body, rc: *http.NewResponseController(w)}
	if err := b.rc.SetReadDeadline(time.Now().Add(timeout)); err == nil {
		r.Body = b
	}
	next(w, r)
}
