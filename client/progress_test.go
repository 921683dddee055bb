package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/wire"
)

// TestProgressStreamEnds checks how the client reads a progress stream's end: the result, an
// error line, a stream cut before its final line, and a line that is not JSON.
func TestProgressStreamEnds(t *testing.T) {
	const prog = `{"progress":{"phase":"read","done":1024,"total":3000}}` + "\n"
	cases := []struct {
		name    string
		body    string
		wantErr string // substring; empty: success
		told    int
	}{
		{"result", prog + prog + `{"archive":{"name":"RC-x.json"},"events":3000,"compacted":0,"session":{}}` + "\n", "", 2},
		{"result without a final newline", prog + `{"events":3000}`, "", 1},
		{"error line", prog + `{"error":{"code":"SESSION_MOVED","message":"moved"}}` + "\n", "SESSION_MOVED", 1},
		{"cut before the final line", prog + prog, "ended before its final answer", 2},
		{"not JSON", prog + "oops\n", "decode progress stream line", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Accept") != api.ProgressMediaType+", application/json" {
					http.Error(w, "no Accept", http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", api.ProgressMediaType)
				fmt.Fprint(w, c.body)
			}))
			defer ts.Close()
			told := 0
			res, err := New(ts.URL, nil).ArchiveWithProgress(context.Background(), "S", api.ArchiveRequest{}, func(wire.Progress) { told++ })
			switch {
			case c.wantErr == "" && (err != nil || res.Events != 3000):
				t.Errorf("got %+v, %v", res, err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("error %v, want one with %q", err, c.wantErr)
			}
			if told != c.told {
				t.Errorf("progress told %d times, want %d", told, c.told)
			}
			var ae *api.Error
			if c.wantErr == "SESSION_MOVED" && (!errors.As(err, &ae) || ae.Status != api.HTTPStatus("SESSION_MOVED")) {
				t.Errorf("error line: %#v, want an *api.Error with status %d", err, api.HTTPStatus("SESSION_MOVED"))
			}
		})
	}
}
