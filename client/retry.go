package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
)

// Waiting out a server that cannot answer now. An answer is retried when its code is
// retryable (contract.Retryable: the store full or unreachable, a commit whose outcome is
// unknown, the server overloaded or restarting...), when a proxy answers 502, 503 or 504
// without the server's JSON, and when the request did not get an answer at all (a refused or
// dropped connection). Waits double from minRetryWait up to the caller's cap, and are never
// shorter than the answer's Retry-After (itself capped at maxRetryAfter).
const (
	minRetryWait  = 100 * time.Millisecond
	maxRetryAfter = time.Minute
	// DefaultRetryWindow is how long the client's requests (but Stream, which retries until
	// its context ends) keep retrying a retryable failure: a database failover, a restart.
	DefaultRetryWindow = 30 * time.Second
)

// retryAfterError is a failed answer with the wait its Retry-After header asked for.
type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// withRetryAfter returns err with the wait resp's Retry-After header asks for, if any.
func withRetryAfter(err error, resp *http.Response) error {
	s, e := strconv.Atoi(resp.Header.Get("Retry-After"))
	if e != nil || s <= 0 {
		return err
	}
	return &retryAfterError{err: err, after: min(time.Duration(s)*time.Second, maxRetryAfter)}
}

// retryable reports whether a request that failed with err may be sent again unchanged, and
// the least wait before it (0 when the server named none).
func retryable(err error) (bool, time.Duration) {
	var wait time.Duration
	var ra *retryAfterError
	if errors.As(err, &ra) {
		wait = ra.after
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false, 0
	}
	var se *streamEndError
	if errors.As(err, &se) {
		return se.e.Code != contract.CodeCredentialRevoked, wait
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		if ae.Status == 0 {
			return true, wait // no answer: a transport failure wrapped as an api.Error
		}
		if contract.Retryable(ae.Code) {
			return true, wait
		}
		// A proxy's answer, not the server's (decodeError names it INTERNAL).
		proxy := ae.Code == contract.CodeInternal && (ae.Status == http.StatusBadGateway || ae.Status == http.StatusServiceUnavailable || ae.Status == http.StatusGatewayTimeout)
		return proxy, wait
	}
	return true, wait // no answer from the server at all (a refused or dropped connection)
}

// notReached reports whether err is a failure to connect to the server at all.
func notReached(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// backoff is a capped exponential wait between tries.
type backoff struct {
	next, max time.Duration
}

// wait sleeps before the next try: at least least, else the current wait, which then doubles up
// to the cap. It returns ctx's error if ctx ends first.
func (b *backoff) wait(ctx context.Context, least time.Duration) error {
	if b.next <= 0 {
		b.next = minRetryWait
	}
	d := max(b.next, least)
	if b.next *= 2; b.next > b.max {
		b.next = b.max
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// reset starts the waits over (after a try that got through).
func (b *backoff) reset() { b.next = minRetryWait }
