package acp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// Standard JSON-RPC 2.0 error codes, and the ones ACP adds.
const (
	CodeParseError       = -32700
	CodeInvalidRequest   = -32600
	CodeMethodNotFound   = -32601
	CodeInvalidParams    = -32602
	CodeInternalError    = -32603
	CodeResourceNotFound = -32002
)

// MaxFrame is the largest JSON-RPC message (one line) a [Conn] reads: 64 MiB.
const MaxFrame = 64 << 20

// Error is a JSON-RPC error object: the error of a failed request, sent or received.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error renders "json-rpc error CODE: MESSAGE".
func (e *Error) Error() string { return fmt.Sprintf("json-rpc error %d: %s", e.Code, e.Message) }

// Errorf returns an *Error with code and a formatted message; a handler returns it to answer a
// request with that error.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Handler serves what the peer sends. Request answers a request (the result is marshalled
// into the response; an *Error is sent as is, any other error as an internal error); each
// request is served on its own goroutine. Notify hears a notification; notifications are
// delivered one at a time, in the order they arrived (session/update chunks must stay in
// order); a request starts, and a response to a call is delivered, only after the
// notifications that came before it were heard.
type Handler interface {
	Request(ctx context.Context, method string, params json.RawMessage) (any, error)
	Notify(ctx context.Context, method string, params json.RawMessage)
}

// Direction says which way a frame went, for [Conn.Tap].
type Direction int

// The directions of a frame.
const (
	Sent Direction = iota
	Received
)

// frame is the union of a JSON-RPC request, notification and response.
type frame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Conn is a JSON-RPC 2.0 connection over newline-delimited JSON (ACP's stdio transport). Both
// sides may send requests. The zero value is not usable; call [NewConn], then [Conn.Run].
type Conn struct {
	r io.Reader
	w io.Writer
	h Handler
	// Tap, if set before Run, sees every frame as written or read (without the newline).
	Tap func(Direction, []byte)

	wmu     sync.Mutex
	mu      sync.Mutex
	nextID  int64
	pending map[string]chan *frame
	closed  chan struct{}
	err     error
	notes   chan *frame
}

// NewConn returns a connection reading frames from r and writing them to w, serving what the
// peer sends with h.
func NewConn(r io.Reader, w io.Writer, h Handler) *Conn {
	return &Conn{r: r, w: w, h: h, pending: map[string]chan *frame{}, closed: make(chan struct{}), notes: make(chan *frame, 1024)}
}

// Run reads frames until the reader ends or ctx is done, dispatching requests and
// notifications to the handler and responses to the calls waiting for them. It returns the
// reason the connection ended; calls still waiting then fail with it.
func (c *Conn) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	notesDone := make(chan struct{})
	go func() {
		defer close(notesDone)
		for f := range c.notes {
			switch {
			case f.Method != "" && len(f.ID) > 0:
				go c.serve(ctx, f)
			case f.Method != "":
				c.h.Notify(ctx, f.Method, f.Params)
			default:
				c.mu.Lock()
				ch := c.pending[string(f.ID)]
				delete(c.pending, string(f.ID))
				c.mu.Unlock()
				if ch != nil {
					ch <- f
				}
			}
		}
	}()
	err := c.read(ctx)
	close(c.notes)
	<-notesDone
	c.mu.Lock()
	if err == nil {
		err = io.EOF
	}
	c.err = err
	c.mu.Unlock()
	close(c.closed)
	return err
}

func (c *Conn) read(ctx context.Context) error {
	sc := bufio.NewScanner(c.r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxFrame)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if c.Tap != nil {
			c.Tap(Received, line)
		}
		f := new(frame)
		if err := json.Unmarshal(line, f); err != nil || f.JSONRPC != "2.0" {
			// Not a JSON-RPC message: answer a parse error (id null), as the spec says.
			c.write(&frame{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: Errorf(CodeParseError, "not a JSON-RPC 2.0 message: %s", truncate(line))})
			continue
		}
		if f.Method != "" || len(f.ID) > 0 {
			// Everything is handled in the order it came: a permission request is served
			// after the tool call update sent before it, and a response is delivered after
			// the notifications sent before it were heard.
			c.notes <- f
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	return ctx.Err()
}

func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}

// serve answers one request of the peer.
func (c *Conn) serve(ctx context.Context, f *frame) {
	res, err := c.h.Request(ctx, f.Method, f.Params)
	out := &frame{JSONRPC: "2.0", ID: f.ID}
	if err != nil {
		var je *Error
		if !errors.As(err, &je) {
			je = &Error{Code: CodeInternalError, Message: err.Error()}
		}
		out.Error = je
	} else {
		b, merr := json.Marshal(res)
		if merr != nil {
			out.Error = Errorf(CodeInternalError, "encode the result of %s: %v", f.Method, merr)
		} else {
			out.Result = b
		}
	}
	c.write(out)
}

// write sends one frame as one line.
func (c *Conn) write(f *frame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("encode %s: %w", f.Method, err)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.Tap != nil {
		c.Tap(Sent, b)
	}
	if _, err := c.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", f.Method, err)
	}
	return nil
}

// Call sends a request and waits for its response, decoding the result into result (unless
// nil). It returns the peer's *Error when the request failed, or the connection's end.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("encode the params of %s: %w", method, err)
	}
	ch := make(chan *frame, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return fmt.Errorf("%s: the connection has ended: %w", method, err)
	}
	c.nextID++
	id := strconv.FormatInt(c.nextID, 10)
	c.pending[id] = ch
	c.mu.Unlock()
	if err := c.write(&frame{JSONRPC: "2.0", ID: json.RawMessage(id), Method: method, Params: p}); err != nil {
		c.forget(id)
		return err
	}
	select {
	case f := <-ch:
		if f.Error != nil {
			return f.Error
		}
		if result != nil {
			if err := json.Unmarshal(f.Result, result); err != nil {
				return fmt.Errorf("decode the result of %s: %w", method, err)
			}
		}
		return nil
	case <-c.closed:
		c.forget(id)
		return fmt.Errorf("%s: the connection has ended: %w", method, c.err)
	case <-ctx.Done():
		c.forget(id)
		return ctx.Err()
	}
}

func (c *Conn) forget(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// Notify sends a notification.
func (c *Conn) Notify(method string, params any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("encode the params of %s: %w", method, err)
	}
	return c.write(&frame{JSONRPC: "2.0", Method: method, Params: p})
}

// Done is closed when Run has returned.
func (c *Conn) Done() <-chan struct{} { return c.closed }
