package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
)

// progressBundle is a server with a fixed clock, an archive directory and a session of n
// events.
func progressBundle(t *testing.T, opt server.Options, sid string, n int) (*bundle, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "archives")
	b := setup(t, opt, session.Options{ArchiveDir: dir, Clock: session.ClockFunc((&fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}).Now)})
	b.createSession(t, sid)
	for i := 0; i < n; {
		var nd strings.Builder
		for end := min(i+1000, n); i < end; i++ {
			nd.WriteString(event(sid, i))
			nd.WriteByte('\n')
		}
		if _, err := b.cl.AppendNDJSON(context.Background(), sid, []byte(nd.String()), nil); err != nil {
			t.Fatal(err)
		}
	}
	return b, dir
}

// postNDJSON posts body to path asking for progress, and returns the response's Content-Type
// and its lines.
func postNDJSON(t *testing.T, b *bundle, path, body string) (string, []string) {
	t.Helper()
	req, err := http.NewRequest("POST", b.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson, application/json")
	resp, err := b.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, data)
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return resp.Header.Get("Content-Type"), lines
}

// checkStream checks the progress lines of a stream (all lines but the last): the phases in
// order, done never decreasing within a phase and never above total.
func checkStream(t *testing.T, lines []string, phases []string, total int64) {
	t.Helper()
	if len(lines) < 2 {
		t.Fatalf("stream of %d lines, want progress lines and a final one: %q", len(lines), lines)
	}
	phase, last := 0, int64(-1)
	for i, l := range lines[:len(lines)-1] {
		var pl api.ProgressLine
		if err := json.Unmarshal([]byte(l), &pl); err != nil || pl.Progress == nil {
			t.Fatalf("line %d is not a progress line: %s (%v)", i, l, err)
		}
		p := *pl.Progress
		for phase < len(phases) && p.Phase != phases[phase] {
			phase, last = phase+1, -1
		}
		if phase == len(phases) {
			t.Fatalf("line %d: phase %q out of order (want %v): %s", i, p.Phase, phases, l)
		}
		if p.Done < last || p.Done > p.Total || p.Total != total {
			t.Errorf("line %d: done %d after %d, total %d (want %d)", i, p.Done, last, p.Total, total)
		}
		last = p.Done
	}
}

// TestArchiveAndRestoreStreamProgress archives and restores a session on a server asked for
// progress, and the same on a server not asked: the stream's progress lines are in order and
// its final line is exactly the other server's ordinary answer (archive directories aside).
func TestArchiveAndRestoreStreamProgress(t *testing.T) {
	const n = 5000
	streamed, dirS := progressBundle(t, server.Options{ProgressInterval: time.Nanosecond}, "S-big", n)
	plain, dirP := progressBundle(t, server.Options{}, "S-big", n)

	ct, lines := postNDJSON(t, streamed, "/v1/sessions/S-big/archive", `{"note":{"done":"all"}}`)
	if ct != api.ProgressMediaType {
		t.Fatalf("Content-Type %q, want %s", ct, api.ProgressMediaType)
	}
	checkStream(t, lines, []string{session.PhaseRead, session.PhaseWrite}, n)
	want := plain.do(t, "POST", "/v1/sessions/S-big/archive", "application/json", `{"note":{"done":"all"}}`)
	if want.status != http.StatusOK || want.header.Get("Content-Type") != "application/json" {
		t.Fatalf("plain archive: %d %s %s", want.status, want.header.Get("Content-Type"), want.body)
	}
	if got := strings.ReplaceAll(lines[len(lines)-1]+"\n", dirS, "DIR"); got != strings.ReplaceAll(want.body, dirP, "DIR") {
		t.Errorf("final line differs from the ordinary answer:\n got %s\nwant %s", got, want.body)
	}

	// Restore on two fresh servers, each given the archive file.
	var ar api.ArchiveResponse
	if err := json.Unmarshal([]byte(want.body), &ar); err != nil {
		t.Fatal(err)
	}
	restS, dirRS := progressBundle(t, server.Options{ProgressInterval: time.Nanosecond}, "S-other", 0)
	restP, dirRP := progressBundle(t, server.Options{}, "S-other", 0)
	for _, b := range []*bundle{restS, restP} {
		data, err := os.ReadFile(ar.Archive.Path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.cl.UploadArchive(context.Background(), data); err != nil {
			t.Fatal(err)
		}
	}
	body := `{"name":"` + ar.Archive.Name + `"}`
	ct, lines = postNDJSON(t, restS, "/v1/archives/restore", body)
	if ct != api.ProgressMediaType {
		t.Fatalf("restore Content-Type %q, want %s", ct, api.ProgressMediaType)
	}
	checkStream(t, lines, []string{session.PhaseVerify, session.PhaseImport}, n)
	want = restP.do(t, "POST", "/v1/archives/restore", "application/json", body)
	if want.status != http.StatusOK {
		t.Fatalf("plain restore: %d %s", want.status, want.body)
	}
	if got := strings.ReplaceAll(lines[len(lines)-1]+"\n", dirRS, "DIR"); got != strings.ReplaceAll(want.body, dirRP, "DIR") {
		t.Errorf("restore's final line differs from the ordinary answer:\n got %s\nwant %s", got, want.body)
	}
}

// TestClientFollowsProgress: the client's WithProgress calls tell their callback, in order,
// and return what the plain calls return.
func TestClientFollowsProgress(t *testing.T) {
	const n = 3000
	b, _ := progressBundle(t, server.Options{ProgressInterval: time.Nanosecond}, "S-cl", n)
	ctx := context.Background()
	var got []session.Progress
	res, err := b.cl.ArchiveWithProgress(ctx, "S-cl", api.ArchiveRequest{Compact: true}, func(p session.Progress) { got = append(got, p) })
	if err != nil || res.Events != n || res.Compacted != n || res.Session.Record.Status != "archived" {
		t.Fatalf("ArchiveWithProgress = %+v, %v", res, err)
	}
	if len(got) == 0 || got[0].Phase != session.PhaseRead || got[len(got)-1].Phase != session.PhaseCompact {
		t.Errorf("progress told: %+v", got)
	}
	// An error found before the work starts is the ordinary error answer.
	_, err = b.cl.ArchiveWithProgress(ctx, "S-none", api.ArchiveRequest{}, func(session.Progress) { t.Error("progress for a missing session") })
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeSessionNotFound || ae.Status != http.StatusNotFound {
		t.Errorf("archiving a missing session: %v", err)
	}
	got = nil
	rr, err := b.cl.RestoreWithProgress(ctx, api.RestoreRequest{Name: res.Archive.Name}, func(p session.Progress) { got = append(got, p) })
	if err != nil || rr.Events != n || !rr.Replaced {
		t.Fatalf("RestoreWithProgress = %+v, %v", rr, err)
	}
	if len(got) == 0 || got[len(got)-1] != (session.Progress{Phase: session.PhaseImport, Done: n, Total: n}) {
		t.Errorf("restore progress told: %+v", got)
	}
}

// TestProgressOnlyWhenAskedAndSlow: without the Accept header, or when the operation ends
// before the first progress interval, the answer is the ordinary JSON one.
func TestProgressOnlyWhenAskedAndSlow(t *testing.T) {
	cases := []struct {
		name     string
		interval time.Duration
		accept   string
	}{
		{"not asked", time.Nanosecond, ""},
		{"asked with q=0", time.Nanosecond, "application/x-ndjson;q=0, application/json"},
		{"asked, but quick", time.Hour, "application/x-ndjson"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, _ := progressBundle(t, server.Options{ProgressInterval: c.interval}, "S-q", 2000)
			req, _ := http.NewRequest("POST", b.ts.URL+"/v1/sessions/S-q/archive", nil)
			if c.accept != "" {
				req.Header.Set("Accept", c.accept)
			}
			resp, err := b.ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			var ar api.ArchiveResponse
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(data, &ar) != nil || ar.Events != 2000 {
				t.Errorf("answer: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), data)
			}
		})
	}
}

// TestProgressStreamEndsWithTheErrorAnswer: an archive that fails after its stream started
// (the archive directory cannot be created) ends the stream with the ordinary error body, and
// the client returns it as the *api.Error with the status the ordinary answer has.
func TestProgressStreamEndsWithTheErrorAnswer(t *testing.T) {
	const n = 3000
	broken := func(t *testing.T) string {
		// A regular file where the archive directory's parent should be.
		f := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(f, "archives")
	}
	var dirs [2]string
	var bundles [2]*bundle
	for i, interval := range []time.Duration{time.Nanosecond, 0} {
		b, _ := progressBundle(t, server.Options{ProgressInterval: interval}, "S-err", n)
		dirs[i] = broken(t)
		// The same store behind a server whose archive directory is broken.
		srv := newServer(t, b.st, server.Options{ProgressInterval: interval}, session.Options{ArchiveDir: dirs[i]})
		ts := httptest.NewServer(validated(t, srv))
		t.Cleanup(func() { ts.Close(); srv.Close() })
		bundles[i] = &bundle{st: b.st, srv: srv, ts: ts, cl: client.New(ts.URL, ts.Client())}
	}
	ct, lines := postNDJSON(t, bundles[0], "/v1/sessions/S-err/archive", "")
	if ct != api.ProgressMediaType {
		t.Fatalf("Content-Type %q, want %s", ct, api.ProgressMediaType)
	}
	checkStream(t, lines, []string{session.PhaseRead, session.PhaseWrite}, n)
	want := bundles[1].do(t, "POST", "/v1/sessions/S-err/archive", "", "")
	if want.status < 400 {
		t.Fatalf("plain archive into a broken directory: %d %s", want.status, want.body)
	}
	tmp := regexp.MustCompile(`\.tmp-RC-[0-9]+`) // the temporary file's random name
	got := tmp.ReplaceAllString(strings.ReplaceAll(lines[len(lines)-1]+"\n", dirs[0], "DIR"), ".tmp-RC-N")
	if got != tmp.ReplaceAllString(strings.ReplaceAll(want.body, dirs[1], "DIR"), ".tmp-RC-N") {
		t.Errorf("final line differs from the ordinary error answer:\n got %s\nwant %s", got, want.body)
	}
	told := 0
	_, err := bundles[0].cl.ArchiveWithProgress(context.Background(), "S-err", api.ArchiveRequest{}, func(session.Progress) { told++ })
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != want.status || ae.Code != errorBody(t, want.body).Code || told == 0 {
		t.Errorf("client: %v (status %d, progress told %d times), want the ordinary error with status %d", err, statusOf(ae), told, want.status)
	}
}

func statusOf(e *api.Error) int {
	if e == nil {
		return 0
	}
	return e.Status
}
