package main

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeHostAllowList: serve on loopback without --auth answers only requests for its own
// names (403 for another Host, against DNS rebinding), and --allowed-hosts adds one; with
// --auth, any Host is answered (a credential is needed anyway).
func TestServeHostAllowList(t *testing.T) {
	dir := t.TempDir()
	get := func(u, host string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", u+"/healthz", nil)
		req.Host = host
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	u, _, _ := startServe(t, "--data", filepath.Join(dir, "a"), "--allowed-hosts", "sessiond.test")
	port := u[strings.LastIndex(u, ":"):]
	for host, want := range map[string]int{"127.0.0.1" + port: 200, "localhost" + port: 200, "sessiond.test" + port: 200, "rebound.example" + port: 403} {
		if got := get(u, host); got != want {
			t.Errorf("without --auth, Host %s: %d, want %d", host, got, want)
		}
	}
	u, _, _ = startServe(t, "--data", filepath.Join(dir, "b"), "--auth")
	if got := get(u, "rebound.example"); got != 200 {
		t.Errorf("with --auth, Host rebound.example: %d, want 200", got)
	}
}
