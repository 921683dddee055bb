package servertest

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store/sqlite"
)

// Start starts a server with opts on a fresh SQLite store in a temporary directory of t and
// returns its base URL. The server's session service has the settings sopt (none: the
// defaults) and its background work started, as sessiond serve does. The server, its
// listener, the service and the store are closed when t ends; a store that cannot be opened
// fails t.
func Start(t testing.TB, opts server.Options, sopt ...session.Options) string {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var o session.Options
	if len(sopt) > 0 {
		o = sopt[0]
	}
	svc := session.New(st, o)
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := server.New(svc, opts)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Close(); ts.Close(); svc.Close(); st.Close() })
	return ts.URL
}
