package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
)

// TLS (docs/deploy.md, "TLS"). net/http sets Request.TLS and speaks HTTP/2 only on a
// connection that is a *tls.Conn, and writes its own refusals of malformed HTTP/1.x requests
// as plain text, which [Server.Listener] rewrites into the API's JSON errors by wrapping the
// connection. Both hold here: [Server.TLSListener] does the TLS handshake itself, hands a
// connection that negotiated "h2" over as the *tls.Conn (HTTP/2 resets malformed requests
// by its own rules: there is nothing to rewrite), and wraps every other one for the rewriting,
// carrying its TLS state to the handlers ([connContext], [Server.ServeHTTP]).

// tlsStateKey is the context key of a wrapped TLS connection's state.
type tlsStateKey struct{}

// connContext is the http.Server's ConnContext: it puts the TLS state of a connection that
// TLSListener wrapped into the context of its requests.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if rc, ok := c.(*refusalConn); ok && rc.tls != nil {
		return context.WithValue(ctx, tlsStateKey{}, rc.tls)
	}
	return ctx
}

// withTLSState returns r with its TLS field set from the state connContext carried, when
// net/http could not set it (an HTTP/1.x connection of TLSListener); else r itself.
func withTLSState(r *http.Request) *http.Request {
	if r.TLS != nil {
		return r
	}
	st, ok := r.Context().Value(tlsStateKey{}).(*tls.ConnectionState)
	if !ok {
		return r
	}
	r2 := new(http.Request)
	*r2 = *r
	r2.TLS = st
	return r2
}

// TLSListener returns a listener that serves TLS with cfg on ln's connections: each one's
// handshake is done in a goroutine of its own, within the header timeout, before Accept
// returns it; one that negotiated HTTP/2 is returned as the *tls.Conn, for the http.Server of
// [Server.HTTPServer] to serve HTTP/2 on, every other one wrapped as [Server.Listener] wraps
// them. A client that speaks plain HTTP to it is answered 400 in the clear, saying to use
// https, and closed. cfg should offer "h2" and "http/1.1" ([CertReloader.TLSConfig]).
func (s *Server) TLSListener(ln net.Listener, cfg *tls.Config) net.Listener {
	l := &tlsListener{srv: s, raw: ln, cfg: cfg, timeout: s.opt.HeaderTimeout, logger: s.opt.Logger,
		ready: make(chan accepted), done: make(chan struct{})}
	go l.acceptLoop()
	return l
}

type tlsListener struct {
	srv     *Server // gives each rewritten refusal its request id
	raw     net.Listener
	cfg     *tls.Config
	timeout time.Duration
	logger  *slog.Logger
	ready   chan accepted // handshaken connections, and the raw listener's errors
	done    chan struct{} // closed by Close
	once    sync.Once
}

// accepted is what Accept returns.
type accepted struct {
	c   net.Conn
	err error
}

func (l *tlsListener) Accept() (net.Conn, error) {
	select {
	case a := <-l.ready:
		return a.c, a.err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *tlsListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.raw.Close()
}

func (l *tlsListener) Addr() net.Addr { return l.raw.Addr() }

// acceptLoop accepts connections until the raw listener fails for good, starting each one's
// handshake. Its errors go to Accept (net/http backs off on temporary ones, and this loop waits
// for it to ask again).
func (l *tlsListener) acceptLoop() {
	for {
		c, err := l.raw.Accept()
		if err != nil {
			if !l.hand(accepted{err: err}) || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go l.handshake(c)
	}
}

// hand gives a to Accept; it returns false, after closing a's connection, when the listener
// is closed.
func (l *tlsListener) hand(a accepted) bool {
	select {
	case l.ready <- a:
		return true
	case <-l.done:
		if a.c != nil {
			a.c.Close()
		}
		return false
	}
}

// handshake does c's TLS handshake and hands the connection to Accept.
func (l *tlsListener) handshake(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(l.timeout))
	tc := tls.Server(c, l.cfg)
	if err := tc.Handshake(); err != nil {
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil {
			// Not TLS at all: most likely http:// sent to the https port.
			answerPlainHTTP(re.Conn)
		}
		l.logger.Debug("TLS handshake failed", "remote", c.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	st := tc.ConnectionState()
	if st.NegotiatedProtocol == "h2" {
		l.hand(accepted{c: tc})
		return
	}
	l.hand(accepted{c: &refusalConn{Conn: tc, tls: &st, s: l.srv}})
}

// answerPlainHTTP answers a client that sent plain HTTP to the TLS port, in the clear: 400 and
// the API's error shape, saying to use https.
func answerPlainHTTP(c net.Conn) {
	e := api.Errorf(contract.CodeMalformed, "this port serves HTTPS only, and the request came in plain HTTP: send it again with an https:// URL; nothing was read")
	b, _ := contract.Marshal(api.ErrorBody{Error: e})
	b = append(b, '\n')
	fmt.Fprintf(c, "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(b), b)
	// Closing with the rest of the request unread would reset the connection, and the client
	// could lose the answer: say the answer is over, then read what the client still sends
	// (bounded in bytes and time; the caller closes).
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

// CertReloader serves a TLS certificate and key read from files, and reads them again on
// Reload (sessiond serve calls it on SIGHUP): new connections get the new certificate, the
// listener and the connections already open are not touched.
type CertReloader struct {
	certFile, keyFile string
	mu                sync.RWMutex
	cert              *tls.Certificate
}

// NewCertReloader reads the certificate and key (PEM) once; it fails when they do not load or
// do not match.
func NewCertReloader(certFile, keyFile string) (*CertReloader, error) {
	r := &CertReloader{certFile: certFile, keyFile: keyFile}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the files again. When they do not load, the certificate served so far stays and
// the error says why.
func (r *CertReloader) Reload() error {
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("load TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	r.mu.Lock()
	r.cert = &cert
	r.mu.Unlock()
	return nil
}

// TLSConfig returns a TLS configuration (TLS 1.2 or newer, HTTP/2 and HTTP/1.1 offered by
// ALPN) that serves the current certificate.
func (r *CertReloader) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			r.mu.RLock()
			defer r.mu.RUnlock()
			if r.cert == nil {
				return nil, errors.New("no TLS certificate loaded")
			}
			return r.cert, nil
		},
	}
}
