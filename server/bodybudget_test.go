package server_test

import (
	"bufio"
	"context"
	"fmt"
	"github.com/sessiond/sessiond/contract"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/store/sqlite"
)

// stallBody opens a connection to addr and sends a request to path that declares a body of
// declared bytes and sends one; the connection is closed when the test ends.
func stallBody(t *testing.T, addr, path, authz string, declared int64) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", path, authz, declared)
	return c
}

// TestBodyBudgetPerClient: eight requests of a read-only key, each declaring a body of the
// route's limit (16 MiB) and sending one byte, would hold the server's whole body budget
// (128 MiB) until the body timeout; a key may hold only its part of it (a quarter), so a write
// by another key goes through at once, and the attacking key's own extra requests are the
// ones refused (429 RATE_LIMITED with Retry-After). Before, every write by any key was
// answered 503 OVERLOADED for as long as the attack lasted.
func TestBodyBudgetPerClient(t *testing.T) {
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// Not validated against the OpenAPI document: the validator would read each body first.
	e := newAuthEnv(t, st, server.Options{BodyQueueWait: 300 * time.Millisecond}, false)
	admin := e.key(t, "admin", "*", "read,append,command,admin", 0)
	reader := e.key(t, "reader", "*", "read", 0)
	writer := e.key(t, "writer", "*", "read,append", 0)
	if r := e.call(t, "POST", "/v1/sessions", bearer(admin), fmt.Sprintf(createBody, "S-victim")); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	addr := e.ts.Listener.Addr().String()
	for range 8 {
		stallBody(t, addr, "/v1/sessions/S-victim/assess", bearer(reader), 16<<20)
	}
	// The attack is in place once one more small request of the attacking key finds no room:
	// its handler then runs after every stalled one's has taken what it could.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := e.call(t, "POST", "/v1/sessions/S-victim/assess", bearer(reader), `{"unknown":1}`)
		if r.status == http.StatusTooManyRequests || r.status == http.StatusServiceUnavailable {
			if r.header.Get("Retry-After") == "" {
				t.Errorf("%d without Retry-After", r.status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stalled bodies never took the attacking key's budget: the probe got %d %s", r.status, r.body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	r := e.call(t, "POST", "/v1/sessions/S-victim/events", bearer(writer), event("S-victim", 1))
	if r.status != http.StatusCreated {
		t.Fatalf("a write by another key during the attack: %d %s; want 201", r.status, r.body)
	}
	t.Logf("the write went through in %v", time.Since(start))
}

// TestDeclaredBodyOverLimitRefusedAtOnce: a body whose Content-Length is over the route's
// limit is answered 413 TOO_LARGE without reading it or waiting for budget; before, it took a
// share of the budget and was answered only when its body timed out (408) or was read to the
// limit.
func TestDeclaredBodyOverLimitRefusedAtOnce(t *testing.T) {
	s := serveReal(t, server.Options{MaxBodyBytes: 1000, BodyTimeout: time.Minute}, false)
	s.createSession(t, "S-big")
	for _, path := range []string{"/v1/sessions/S-big/events", "/v1/sessions/S-big/assess"} {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1001\r\n\r\n{", path)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("POST %s declaring 1001 bytes: no answer before the body arrived: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || errorBody(t, string(body)).Code != contract.CodeTooLarge || !strings.Contains(string(body), "1000-byte limit") {
			t.Errorf("POST %s declaring 1001 bytes: %d %s; want 413 TOO_LARGE naming the limit", path, resp.StatusCode, body)
		}
	}
}
