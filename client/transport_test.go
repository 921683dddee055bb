package client_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/client"
)

// TestDefaultClientKeepsConnections: a program with several requests in flight at once (a
// worker pool, an import writing several sessions) reuses its connections from one wave of
// requests to the next; net/http's default transport keeps two idle connections per server,
// so it used to close and dial again all but two of them for every wave.
func TestDefaultClientKeepsConnections(t *testing.T) {
	var dialed atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond) // the wave's requests are all in flight at once
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"sessionId":"S-1"}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	cl := client.New(srv.URL, nil)
	const inFlight, waves = 8, 4
	for range waves {
		var wg sync.WaitGroup
		for range inFlight {
			wg.Go(func() {
				if _, err := cl.GetSession(context.Background(), "S-1"); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	if n := dialed.Load(); n > inFlight {
		t.Errorf("%d waves of %d requests at once opened %d connections, want at most %d (one per request in flight, reused)", waves, inFlight, n, inFlight)
	}
}
