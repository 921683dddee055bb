package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store/sqlite"
)

// TestProgressDrawer checks the line drawn on a terminal: redrawn with \r, padded over a
// longer previous line, blanked at the end.
func TestProgressDrawer(t *testing.T) {
	cases := []struct {
		name  string
		steps []session.Progress
		want  string
	}{
		{"nothing told", nil, ""},
		{"archive", []session.Progress{{Phase: "read", Done: 0, Total: 100000}, {Phase: "read", Done: 41234, Total: 100000}, {Phase: "write", Total: 100000}},
			"\rarchiving S: reading 0/100000 events" +
				"\rarchiving S: reading 41234/100000 events" +
				"\rarchiving S: writing the archive of 100000 events" +
				"\r" + strings.Repeat(" ", 49) + "\r"},
		{"shorter line padded", []session.Progress{{Phase: "verify", Done: 1000, Total: 2000}, {Phase: "import", Total: 2000}},
			"\rarchiving S: verifying 1000/2000 events" +
				"\rarchiving S: importing 2000 events     " +
				"\r" + strings.Repeat(" ", 34) + "\r"},
		{"unknown phase", []session.Progress{{Phase: "later", Done: 1, Total: 2}}, "\rarchiving S: later 1/2 events\r" + strings.Repeat(" ", 29) + "\r"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			d := &progressDrawer{w: &buf, what: "archiving S"}
			for _, p := range c.steps {
				d.callback()(p)
			}
			d.clear()
			if buf.String() != c.want {
				t.Errorf("drawn %q\n want %q", buf.String(), c.want)
			}
		})
	}
}

// TestProgressOnlyOnATerminal: a pipe, a file or a buffer gets no drawer, nor does --json; a
// character device does.
func TestProgressOnlyOnATerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	file, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	cases := []struct {
		name   string
		stderr func(t *testing.T) any
		json   bool
		want   bool
	}{
		{"buffer", func(*testing.T) any { return &bytes.Buffer{} }, false, false},
		{"pipe", func(*testing.T) any { return w }, false, false},
		{"file", func(*testing.T) any { return file }, false, false},
		{"character device", func(t *testing.T) any {
			f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				t.Skip(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}, false, true},
		{"character device with --json", func(t *testing.T) any {
			f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				t.Skip(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := c.stderr(t).(interface{ Write([]byte) (int, error) })
			if got := progressFor(out, c.json, "x") != nil; got != c.want {
				t.Errorf("drawer: %v, want %v", got, c.want)
			}
		})
	}
}

// TestArchiveAndRestoreQuietWhenNotATerminal runs session archive and restore against a server
// that streams progress at once: with stderr a pipe, nothing is drawn on it, and the answer
// on stdout is the same as ever.
func TestArchiveAndRestoreQuietWhenNotATerminal(t *testing.T) {
	const n = 3000
	ctx := context.Background()
	newServer := func() (string, string) {
		st, err := sqlite.Open(ctx, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "archives")
		svc := session.New(st, session.Options{ArchiveDir: dir})
		srv := server.New(svc, server.Options{ProgressInterval: time.Nanosecond})
		ts := httptest.NewServer(srv)
		t.Cleanup(func() { ts.Close(); srv.Close(); svc.Close(); st.Close() })
		return ts.URL, dir
	}
	urlA, _ := newServer()
	urlB, _ := newServer()
	cl := client.New(urlA, nil)
	if code := run([]string{"create", "--server", urlA, "--id", "S-q", "--agent", "a"}, nil, &bytes.Buffer{}, os.Stderr); code != 0 {
		t.Fatalf("create: exit %d", code)
	}
	for i := 0; i < n; i += 1000 {
		var nd strings.Builder
		for j := i; j < i+1000; j++ {
			nd.WriteString(cliEvent("S-q", j) + "\n")
		}
		if _, err := cl.AppendNDJSON(ctx, "S-q", []byte(nd.String()), nil); err != nil {
			t.Fatal(err)
		}
	}
	pipeStderr := func(t *testing.T, args ...string) (string, string, int) {
		t.Helper()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		code := run(args, nil, &out, w)
		w.Close()
		var errb bytes.Buffer
		errb.ReadFrom(r)
		r.Close()
		return out.String(), errb.String(), code
	}
	out, errOut, code := pipeStderr(t, "session", "archive", "--server", urlA, "S-q")
	if code != 0 || errOut != "" || !strings.HasPrefix(out, fmt.Sprintf("archived S-q: %d events to ", n)) {
		t.Fatalf("archive: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	path := strings.Fields(out)[5]
	out, errOut, code = pipeStderr(t, "session", "restore", "--server", urlB, "--json", "--file", path)
	var rr struct {
		Events int `json:"events"`
	}
	if code != 0 || errOut != "" || json.Unmarshal([]byte(out), &rr) != nil || rr.Events != n {
		t.Fatalf("restore --json: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
}
