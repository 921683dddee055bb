package acp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// handlerFunc serves requests with a function and records notifications.
type handlerFunc struct {
	req   func(method string, params json.RawMessage) (any, error)
	mu    sync.Mutex
	notes []string
}

func (h *handlerFunc) Request(_ context.Context, method string, params json.RawMessage) (any, error) {
	return h.req(method, params)
}

func (h *handlerFunc) Notify(_ context.Context, method string, params json.RawMessage) {
	h.mu.Lock()
	h.notes = append(h.notes, method+" "+string(params))
	h.mu.Unlock()
}

// pair connects two Conns through pipes.
func pair(t *testing.T, a, b Handler) (*Conn, *Conn) {
	t.Helper()
	ar, bw := io.Pipe()
	br, aw := io.Pipe()
	ca, cb := NewConn(ar, aw, a), NewConn(br, bw, b)
	ctx, cancel := context.WithCancel(context.Background())
	go ca.Run(ctx)
	go cb.Run(ctx)
	t.Cleanup(func() { cancel(); aw.Close(); bw.Close() })
	return ca, cb
}

// TestConnCalls: concurrent calls both ways get their own answers; errors arrive as *Error;
// an unknown method is answered method-not-found; notifications arrive in order.
func TestConnCalls(t *testing.T) {
	echo := &handlerFunc{req: func(method string, params json.RawMessage) (any, error) {
		switch method {
		case "echo":
			time.Sleep(time.Duration(len(params)%3) * time.Millisecond) // answers out of order
			return json.RawMessage(params), nil
		case "fail":
			return nil, Errorf(CodeInvalidParams, "bad %s", params)
		case "boom":
			return nil, errors.New("internal")
		}
		return nil, Errorf(CodeMethodNotFound, "no %s", method)
	}}
	client, server := pair(t, &handlerFunc{req: func(string, json.RawMessage) (any, error) { return "from client", nil }}, echo)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got int
			if err := client.Call(ctx, "echo", i, &got); err != nil || got != i {
				t.Errorf("echo %d: %d, %v", i, got, err)
			}
		}()
	}
	wg.Wait()
	var je *Error
	if err := client.Call(ctx, "fail", "x", nil); !errors.As(err, &je) || je.Code != CodeInvalidParams || je.Message != `bad "x"` {
		t.Errorf("fail: %v", err)
	}
	if err := client.Call(ctx, "boom", nil, nil); !errors.As(err, &je) || je.Code != CodeInternalError {
		t.Errorf("boom: %v", err)
	}
	if err := client.Call(ctx, "nope", nil, nil); !errors.As(err, &je) || je.Code != CodeMethodNotFound {
		t.Errorf("nope: %v", err)
	}
	var s string
	if err := server.Call(ctx, "anything", nil, &s); err != nil || s != "from client" {
		t.Errorf("the other way: %q, %v", s, err)
	}
	for i := range 20 {
		if err := client.Notify("n", i); err != nil {
			t.Fatal(err)
		}
	}
	// A call after the notifications is answered after they were heard.
	if err := client.Call(ctx, "echo", 0, nil); err != nil {
		t.Fatal(err)
	}
	echo.mu.Lock()
	defer echo.mu.Unlock()
	if len(echo.notes) != 20 || echo.notes[0] != "n 0" || echo.notes[19] != "n 19" {
		t.Errorf("notifications: %v", echo.notes)
	}
}

// TestConnGarbage: a line that is not JSON-RPC is answered with a parse error and the
// connection goes on; a call pending when the peer closes fails.
func TestConnGarbage(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := NewConn(inR, outW, &handlerFunc{req: func(string, json.RawMessage) (any, error) { return 1, nil }})
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	out := bufio.NewScanner(outR)
	go func() { _, _ = io.WriteString(inW, "not json\n{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"x\"}\n") }()
	for _, want := range []string{`"error":{"code":-32700`, `{"jsonrpc":"2.0","id":7,"result":1}`} {
		if !out.Scan() || !strings.Contains(out.Text(), want) {
			t.Fatalf("got %q, want %s", out.Text(), want)
		}
	}
	callErr := make(chan error, 1)
	go func() { callErr <- c.Call(context.Background(), "never", nil, nil) }()
	out.Scan() // the request
	inW.Close()
	if err := <-callErr; err == nil || !strings.Contains(err.Error(), "connection has ended") {
		t.Errorf("pending call: %v", err)
	}
	if err := <-done; !errors.Is(err, io.EOF) {
		t.Errorf("Run: %v", err)
	}
}
