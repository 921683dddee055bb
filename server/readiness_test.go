package server_test

import (
	"github.com/sessiond/sessiond/contract"
	"net/http"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/server"
)

// TestReadiness: /readyz answers 200 while the store takes writes and 503 STORE_UNWRITABLE once
// it refuses them, while /healthz (liveness) still answers 200: a load balancer stops sending
// writes to an instance whose store is gone. The store is really closed under the server (a
// failed WAL sync makes the SQLite store refuse writes the same way: store/sqlite's
// TestFailedSync checks that Ready reports it).
func TestReadiness(t *testing.T) {
	b := setup(t, server.Options{})
	if r := b.do(t, "GET", "/readyz", "", ""); r.status != http.StatusOK || !strings.Contains(r.body, `"ready"`) {
		t.Fatalf("readyz on a working store: %d %s", r.status, r.body)
	}
	if err := b.st.Close(); err != nil {
		t.Fatal(err)
	}
	r := b.do(t, "GET", "/readyz", "", "")
	if r.status != http.StatusServiceUnavailable || errorBody(t, r.body).Code != contract.CodeStoreUnwritable {
		t.Fatalf("readyz on a closed store: %d %s; want 503 STORE_UNWRITABLE", r.status, r.body)
	}
	if r := b.do(t, "GET", "/healthz", "", ""); r.status != http.StatusOK {
		t.Errorf("healthz: %d %s; liveness does not depend on the store", r.status, r.body)
	}
	b.srv.Close()
	r = b.do(t, "GET", "/readyz", "", "")
	if r.status != http.StatusServiceUnavailable || errorBody(t, r.body).Code != contract.CodeUnavailable {
		t.Fatalf("readyz while shutting down: %d %s; want 503 UNAVAILABLE", r.status, r.body)
	}
}
