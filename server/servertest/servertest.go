package servertest

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/store/sqlite"
)

// Start starts a server with opts on a fresh SQLite store in a temporary directory of t and
// returns its base URL. The server, its listener and its store are closed when t ends; a
// store that cannot be opened fails t.
func Start(t testing.TB, opts server.Options) string {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(st, opts)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Close(); ts.Close(); st.Close() })
	return ts.URL
}
