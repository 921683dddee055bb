package server

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sessiond/sessiond/contract"
)

// requestIDHeader carries a request's id, in and out.
const requestIDHeader = "X-Request-Id"

// maxRequestIDLength bounds a client's request id; a longer one is replaced.
const maxRequestIDLength = 128

// newRequestIDPrefix returns a random prefix, so ids of different processes differ.
func newRequestIDPrefix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// requestID returns the client's id when it is a fit one (1 to 128 characters, letters,
// digits and . _ : - only, so a log line never carries what a client smuggles in), else a
// new one: the process's prefix and a counter.
func (s *Server) requestID(client string) string {
	if fitRequestID(client) {
		return client
	}
	var b [48]byte // the prefix (12), '-' and the counter (at most 13): one allocation, the string
	return string(strconv.AppendUint(append(append(b[:0], s.reqPrefix...), '-'), s.reqSeq.Add(1), 36))
}

func fitRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._:-", c) >= 0) {
			return false
		}
	}
	return true
}

// finish logs and counts an answered request: a 500 (a bug or a store failure) at level error,
// with the request id the client holds, so a report can be matched to the line; every other
// one at debug.
func (s *Server) finish(sw *statusWriter, r *http.Request, pattern, id string, start time.Time) {
	took := time.Since(start)
	route := pattern
	if route == "" {
		route = "unmatched"
	}
	code := sw.code
	if code == 0 {
		code = http.StatusOK
	}
	s.opt.Metrics.request(route, code, took, sw.hijacked || strings.HasSuffix(pattern, "/events/stream"))
	if pattern == appendPattern && sw.errCode != "" {
		s.opt.Metrics.rejected(sw.errCode)
	}
	level := slog.LevelDebug
	// With authentication on, every write is logged with who made it (docs/security.md,
	// "Who did it").
	write := s.authn.on && !safeMethod(r.Method) && pattern != ""
	if write {
		level = slog.LevelInfo
	}
	if code == http.StatusInternalServerError {
		level = slog.LevelError
	}
	if s.opt.Logger.Enabled(context.Background(), level) {
		attrs := []any{"request_id", id, "method", r.Method, "route", route, "path", r.URL.Path, "status", code, "took_ms", milliseconds(took)}
		if s.authn.on {
			actor := sw.actor
			if actor == "" {
				actor = "none"
			}
			attrs = append(attrs, "actor", actor)
		}
		msg := "request"
		if write {
			msg = "write"
		}
		s.opt.Logger.Log(context.Background(), level, msg, attrs...)
	}
}

// milliseconds is d in milliseconds, to the microsecond: the unit of every duration in the log
// (its attribute's name ends in _ms; docs/operations.md, "Logs").
func milliseconds(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

// requestLogger returns the logger for lines about the request w answers: with its id.
func (s *Server) requestLogger(w http.ResponseWriter) *slog.Logger {
	return s.opt.Logger.With("request_id", w.Header().Get(requestIDHeader))
}

// statusWriter records the status of an answer for the request metrics.
type statusWriter struct {
	http.ResponseWriter
	code     int
	hijacked bool
	actor    string // who the request acted as, when the server authenticates (access.go)
	// errCode is the code of the API error the answer carries (writeError), "" for none.
	errCode contract.ErrorCode
}

func (sw *statusWriter) WriteHeader(code int) {
	if sw.code == 0 {
		sw.code = code
	}
	sw.ResponseWriter.WriteHeader(code)
}

func (sw *statusWriter) Write(p []byte) (int, error) {
	if sw.code == 0 {
		sw.code = http.StatusOK
	}
	return sw.ResponseWriter.Write(p)
}

// Hijack takes the connection over (SSE on HTTP/1.1, which then writes a 200 itself).
func (sw *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, b, err := http.NewResponseController(sw.ResponseWriter).Hijack()
	if err == nil {
		sw.hijacked, sw.code = true, http.StatusOK
	}
	return c, b, err
}

// Unwrap lets http.ResponseController reach the connection's Flush and SetWriteDeadline.
func (sw *statusWriter) Unwrap() http.ResponseWriter { return sw.ResponseWriter }
