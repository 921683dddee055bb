// Package client is a Go client for sessiond's v1 HTTP API. Errors the server reports are
// returned as *api.Error, with the stable code, message, problem details and HTTP status.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/wire"
)

// DefaultServer is the address a local "sessiond serve" listens on.
const DefaultServer = "http://127.0.0.1:7420"

// Client talks to one sessiond server. The zero value is not usable; call [New].
type Client struct {
	base string
	http *http.Client
	key  string // sent as Authorization: Bearer <key> when set
}

// New returns a client for the server at base (e.g. "http://127.0.0.1:7420"). A nil hc uses a
// client without an overall timeout (streams are long-lived; cancel through contexts) whose
// connections are shared by all clients New makes so, and kept open for reuse up to
// maxIdlePerServer per server: net/http's default keeps two, so a program with more requests
// in flight at once (a worker pool, an import writing several sessions) closed and dialled a
// connection for nearly every request.
func New(base string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Transport: sharedTransport}
	}
	return &Client{base: strings.TrimRight(base, "/"), http: hc}
}

// maxIdlePerServer is how many idle connections to one server New's default client keeps.
const maxIdlePerServer = 64

// sharedTransport is the transport of New's default client: net/http's default one with
// maxIdlePerServer idle connections per server.
var sharedTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = max(t.MaxIdleConns, maxIdlePerServer)
	t.MaxIdleConnsPerHost = maxIdlePerServer
	return t
}()

// WithKey returns a copy of the client that sends key (an API key, sk_…, or an OIDC token)
// as Authorization: Bearer <key> on every request, for a server that requires credentials
// (docs/security.md). An empty key sends none.
func (c *Client) WithKey(key string) *Client {
	cp := *c
	cp.key = key
	return &cp
}

// authorize adds the client's credential to req.
func (c *Client) authorize(req *http.Request) {
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
}

func (c *Client) do(ctx context.Context, method, path string, body io.Reader, contentType string, out any) error {
	_, err := c.send(ctx, method, path, nil, body, contentType, out)
	return err
}

// send is do with extra request headers; it returns the response's status, and decodes nothing
// into out for a 204 No Content. A GET is retried as sendRetrying says.
func (c *Client) send(ctx context.Context, method, path string, header http.Header, body io.Reader, contentType string, out any) (int, error) {
	if method == http.MethodGet {
		return c.sendRetrying(ctx, method, path, header, body, contentType, out)
	}
	return c.sendOnce(ctx, method, path, header, body, contentType, out)
}

// sendRetrying is send for a request that is safe to send again unchanged (a read, or an
// append, whose events carry idempotency keys): a retryable failure (retry.go) is retried with
// capped exponential waits that honour Retry-After, for up to DefaultRetryWindow or until ctx
// ends; then the last failure is returned.
func (c *Client) sendRetrying(ctx context.Context, method, path string, header http.Header, body io.Reader, contentType string, out any) (int, error) {
	var data []byte
	if body != nil {
		var err error
		if data, err = io.ReadAll(body); err != nil {
			return 0, fmt.Errorf("%s %s: read the request body: %w", method, path, err)
		}
	}
	deadline := time.Now().Add(DefaultRetryWindow)
	b := backoff{max: 5 * time.Second}
	for reached := false; ; {
		var r io.Reader
		if body != nil {
			r = bytes.NewReader(data)
		}
		status, err := c.sendOnce(ctx, method, path, header, r, contentType, out)
		ok, least := retryable(err)
		// A server never reached is not waited for: a command run against no server fails
		// at once ("is the server running?"); one that answered before may be restarting.
		reached = reached || !notReached(err)
		if err == nil || !ok || !reached || ctx.Err() != nil || time.Now().Add(max(least, b.next)).After(deadline) {
			return status, err
		}
		if werr := b.wait(ctx, least); werr != nil {
			return status, err
		}
	}
}

// sendOnce sends the request once.
func (c *Client) sendOnce(ctx context.Context, method, path string, header http.Header, body io.Reader, contentType string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	c.authorize(req)
	for k, vs := range header {
		req.Header[k] = vs
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w (is the server running at %s?)", method, path, err, c.base)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("%s %s: read response: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, withRetryAfter(decodeError(resp.StatusCode, data), resp)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return resp.StatusCode, nil
	}
	if d, ok := out.(interface{ DecodeJSON([]byte) error }); ok {
		err = d.DecodeJSON(data) // a wire type that decodes itself (api.AppendResponse)
	} else {
		err = json.Unmarshal(data, out)
	}
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	return resp.StatusCode, nil
}

func decodeError(status int, data []byte) error {
	var body api.ErrorBody
	if err := json.Unmarshal(data, &body); err != nil || body.Error == nil {
		return &api.Error{Code: contract.CodeInternal, Status: status, Message: fmt.Sprintf("HTTP %d: %s", status, strings.TrimSpace(string(data)))}
	}
	body.Error.Status = status
	return body.Error
}

func jsonBody(v any) (io.Reader, error) {
	b, err := contract.Marshal(v)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(b), nil
}

// CreateSession creates a session and returns its resource.
func (c *Client) CreateSession(ctx context.Context, req api.CreateSessionRequest) (*api.Session, error) {
	body, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	var out api.Session
	return &out, c.do(ctx, http.MethodPost, "/v1/sessions", body, "application/json", &out)
}

// GetSession returns a session's resource.
func (c *Client) GetSession(ctx context.Context, id string) (*api.Session, error) {
	var out api.Session
	return &out, c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(id), nil, "", &out)
}

// ListSessions returns one page of sessions; filter keys are status, agent, project, after, limit.
func (c *Client) ListSessions(ctx context.Context, filter url.Values) (*api.SessionList, error) {
	var out api.SessionList
	return &out, c.do(ctx, http.MethodGet, "/v1/sessions?"+filter.Encode(), nil, "", &out)
}

// Usage asks GET /v1/usage with the query q (from, to, by, project, agent, model,
// sessionId, limit): the usage rollup of the sessions the credential may see.
func (c *Client) Usage(ctx context.Context, q url.Values) (*api.UsageResponse, error) {
	var out api.UsageResponse
	return &out, c.do(ctx, http.MethodGet, "/v1/usage?"+q.Encode(), nil, "", &out)
}

// PatchSession updates a session's record.
func (c *Client) PatchSession(ctx context.Context, id string, req api.PatchSessionRequest) (*api.Session, error) {
	body, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	var out api.Session
	return &out, c.do(ctx, http.MethodPatch, "/v1/sessions/"+url.PathEscape(id), body, "application/json", &out)
}

// AppendOptions are the optional parameters of an append. The zero value appends
// unconditionally, with the session's default multitask strategy and no lease.
type AppendOptions struct {
	// Expected, when non-nil, is the last sequence the caller saw (?expectedSequence): the
	// append is refused with SEQUENCE_CONFLICT if the log ends elsewhere.
	Expected *int64
	// Multitask, when not empty, is the strategy for a run the batch queues while another run
	// of the session is active (?multitask=): contract.MultitaskReject, MultitaskEnqueue or
	// MultitaskInterrupt. Empty takes the session's default (PatchSessionRequest.Multitask),
	// and a session without one rejects.
	Multitask string
	// Lease, when not nil, is carried in the Sessiond-Lease header: the append is refused with
	// LEASE_LOST unless the lease still holds the run its events name.
	Lease *wire.Lease
}

// AppendNDJSON appends the events in ndjson (one event per line) as one all-or-nothing
// batch. expected, when non-nil, is the last sequence the caller saw.
func (c *Client) AppendNDJSON(ctx context.Context, id string, ndjson []byte, expected *int64) (*api.AppendResponse, error) {
	return c.AppendNDJSONWith(ctx, id, ndjson, AppendOptions{Expected: expected})
}

// AppendNDJSONWith appends the events in ndjson (one event per line) as one all-or-nothing
// batch, with the options in opt.
func (c *Client) AppendNDJSONWith(ctx context.Context, id string, ndjson []byte, opt AppendOptions) (*api.AppendResponse, error) {
	q := url.Values{}
	if opt.Expected != nil {
		q.Set("expectedSequence", strconv.FormatInt(*opt.Expected, 10))
	}
	if opt.Multitask != "" {
		q.Set("multitask", opt.Multitask)
	}
	path := "/v1/sessions/" + url.PathEscape(id) + "/events"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var header http.Header
	if opt.Lease != nil {
		header = http.Header{wire.LeaseHeader: {opt.Lease.Header}}
	}
	var out api.AppendResponse
	// Every event carries its idempotency key: sending the batch again is safe.
	if _, err := c.sendRetrying(ctx, http.MethodPost, path, header, bytes.NewReader(ndjson), "application/x-ndjson", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AppendEvents appends typed events as one all-or-nothing batch.
func (c *Client) AppendEvents(ctx context.Context, id string, events []contract.Event, expected *int64) (*api.AppendResponse, error) {
	return c.AppendEventsWith(ctx, id, events, AppendOptions{Expected: expected})
}

// AppendEventsWith appends typed events as one all-or-nothing batch, with the options in opt.
func (c *Client) AppendEventsWith(ctx context.Context, id string, events []contract.Event, opt AppendOptions) (*api.AppendResponse, error) {
	var buf bytes.Buffer
	for i := range events {
		b, err := contract.Marshal(&events[i])
		if err != nil {
			return nil, fmt.Errorf("encode event %d: %w", i, err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return c.AppendNDJSONWith(ctx, id, buf.Bytes(), opt)
}

// ReadEvents returns up to limit events after sequence after, as stored.
func (c *Client) ReadEvents(ctx context.Context, id string, after int64, limit int) (*api.EventPage, error) {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out api.EventPage
	return &out, c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(id)+"/events?"+q.Encode(), nil, "", &out)
}

// Runs returns a session's runs.
func (c *Client) Runs(ctx context.Context, id string) ([]contract.Run, error) {
	var out api.RunList
	if err := c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(id)+"/runs", nil, "", &out); err != nil {
		return nil, err
	}
	runs := make([]contract.Run, len(out.Runs))
	for i := range out.Runs {
		runs[i] = out.Runs[i].Run
	}
	return runs, nil
}

// StreamEvent is one event received from a stream.
type StreamEvent struct {
	Sequence int64 // the block's id: the event's sequence
	// EventType is the event's contract eventType (its block is named "ev." + EventType).
	EventType string
	Data      json.RawMessage // the stored event
}

// StreamOptions tune [Client.Stream].
type StreamOptions struct {
	// After is the last sequence already seen (-1: from the start).
	After int64
	// Tail starts at the current end of the log instead of After.
	Tail bool
	// OnReconnect, if set, is told each time the stream reconnects, with the cause.
	OnReconnect func(after int64, cause error)
	// MaxBackoff bounds the wait between reconnects (default 5s).
	MaxBackoff time.Duration
}

// Stream follows a session's live stream, calling fn for each event in order, and reconnects
// with Last-Event-ID after a dropped connection, a server cut-off (a final stream.error block
// but CREDENTIAL_REVOKED) or a retryable answer (STORE_UNAVAILABLE during a failover, a
// restarting server: retry.go), waiting with capped exponential backoff and at least the
// answer's Retry-After, so fn sees every event once with no gap. It returns when ctx is done
// (ctx.Err()), when fn returns an error (that error), or on an error that retrying cannot fix
// (an *api.Error such as SESSION_NOT_FOUND, or a revoked credential).
func (c *Client) Stream(ctx context.Context, id string, opt StreamOptions, fn func(StreamEvent) error) error {
	after := opt.After
	tail := opt.Tail
	if opt.MaxBackoff <= 0 {
		opt.MaxBackoff = 5 * time.Second
	}
	b := backoff{max: opt.MaxBackoff}
	for {
		got, err := c.streamOnce(ctx, id, &after, tail, fn)
		if got {
			tail = false // resume from what we saw, never skip
			b.reset()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var fe *fnError
		if errors.As(err, &fe) {
			return fe.err
		}
		ok, least := retryable(err)
		if !ok {
			return err
		}
		if opt.OnReconnect != nil {
			opt.OnReconnect(after, err)
		}
		if err := b.wait(ctx, least); err != nil {
			return err
		}
	}
}

// streamEndError is the final block of a stream (api.SSEStreamError): the server ended it.
type streamEndError struct{ e api.Error }

func (e *streamEndError) Error() string {
	return fmt.Sprintf("stream ended by server: %s: %s", e.e.Code, e.e.Message)
}

type fnError struct{ err error }

func (e *fnError) Error() string { return e.err.Error() }

// streamOnce runs one connection; got reports whether it connected (so tail mode is over).
// Blocks are named as docs/api.md says: "ev.<eventType>" for an event, "stream.error" for the
// server's final message. The server opens each stream with an "id:" line and no data that
// says where it starts, so a tail stream that drops before its first event still resumes from
// the right place; cursor is updated on every id it dispatches.
func (c *Client) streamOnce(ctx context.Context, id string, cursor *int64, tail bool, fn func(StreamEvent) error) (got bool, err error) {
	path := "/v1/sessions/" + url.PathEscape(id) + "/events/stream"
	if tail {
		path += "?tail=true"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return false, err
	}
	c.authorize(req)
	req.Header.Set("Accept", "text/event-stream")
	if !tail {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(*cursor, 10))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		return false, withRetryAfter(decodeError(resp.StatusCode, data), resp)
	}
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	var ev StreamEvent
	var evName string
	var hasID bool
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long data line: gather it whole.
			rest, err2 := r.ReadBytes('\n')
			line = append(append([]byte(nil), line...), rest...)
			err = err2
		}
		if err != nil {
			return true, fmt.Errorf("stream: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0: // dispatch
			if evName == api.SSEStreamError {
				se := &streamEndError{}
				json.Unmarshal(ev.Data, &se.e)
				return true, se
			}
			// Contract events are named "ev.<eventType>"; a block of another name (none is
			// sent today) is not an event and is skipped.
			if kind, ok := strings.CutPrefix(evName, api.SSEEventPrefix); ok && hasID && ev.Data != nil {
				ev.EventType = kind
				if err := fn(ev); err != nil {
					return true, &fnError{err}
				}
			}
			if hasID {
				*cursor = ev.Sequence
			}
			ev, evName, hasID = StreamEvent{}, "", false
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("id: ")):
			n, err := strconv.ParseInt(string(line[4:]), 10, 64)
			if err != nil {
				return true, fmt.Errorf("stream: bad id line %q", line)
			}
			ev.Sequence, hasID = n, true
		case bytes.HasPrefix(line, []byte("event: ")):
			evName = string(line[7:])
		case bytes.HasPrefix(line, []byte("data: ")):
			ev.Data = append(json.RawMessage(nil), line[6:]...)
		}
	}
}

// Command sends an AgentSessionCommand and returns its result. A rejected or failed command is
// not a Go error: the result says so (Outcome, Error). wait, when positive, is passed as ?wait=
// (for stop). The error is an *api.Error when the command itself breaks the contract or the
// session cannot take it, or a transport error.
func (c *Client) Command(ctx context.Context, cmd *contract.Command, wait time.Duration) (*contract.CommandResult, error) {
	body, err := jsonBody(cmd)
	if err != nil {
		return nil, err
	}
	path := "/v1/sessions/" + url.PathEscape(cmd.SessionID) + "/commands"
	if wait > 0 {
		path += "?wait=" + wait.String()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, body)
	if err != nil {
		return nil, err
	}
	c.authorize(req)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w (is the server running at %s?)", path, err, c.base)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("POST %s: read response: %w", path, err)
	}
	var res contract.CommandResult
	if json.Unmarshal(data, &res) == nil && res.Contract == "AgentSessionCommandResult" {
		return &res, nil
	}
	if resp.StatusCode >= 300 {
		return nil, decodeError(resp.StatusCode, data)
	}
	return nil, fmt.Errorf("POST %s: unexpected answer: %s", path, data)
}

// View returns a session's AgentSessionViewModel.
func (c *Client) View(ctx context.Context, id string) (*contract.ViewModel, error) {
	var out contract.ViewModel
	return &out, c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(id)+"/view", nil, "", &out)
}

// Transcript returns a session's transcript, the folded state a UI draws.
func (c *Client) Transcript(ctx context.Context, id string) (*wire.Transcript, error) {
	var out wire.Transcript
	return &out, c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(id)+"/transcript", nil, "", &out)
}

// Continue starts a new thread from a message of session id (an
// AgentSessionContinuationRequest) and returns the AgentSessionContinuationResult.
func (c *Client) Continue(ctx context.Context, id string, req *contract.ContinuationRequest) (*contract.ContinuationResult, error) {
	body, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	var out contract.ContinuationResult
	return &out, c.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(id)+"/continuations", body, "application/json", &out)
}

// Lineage returns a session's ancestors and descendants.
func (c *Client) Lineage(ctx context.Context, id string) (*wire.Lineage, error) {
	var out wire.Lineage
	return &out, c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(id)+"/lineage", nil, "", &out)
}

// Search runs a full-text search (GET /v1/search) with the query parameters q holds (q,
// contains, the filters, order, limit, cursor; docs/search.md).
func (c *Client) Search(ctx context.Context, q url.Values) (*api.SearchResponse, error) {
	var out api.SearchResponse
	return &out, c.do(ctx, http.MethodGet, "/v1/search?"+q.Encode(), nil, "", &out)
}
