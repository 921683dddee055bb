package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/server"
)

// getWithTag sends GET path with If-None-Match set to tag (none when empty).
func (b *bundle) getWithTag(t *testing.T, path, tag string) response {
	t.Helper()
	req, err := http.NewRequest("GET", b.ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tag != "" {
		req.Header.Set("If-None-Match", tag)
	}
	resp, err := b.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: string(data), header: resp.Header}
}

// TestListSessionsETag: the list carries an ETag; asking again with it in If-None-Match is 304
// with no body until the list changes (a new session, a new event: its lastSequence), then 200
// with a new tag. Other filters have their own tags.
func TestListSessionsETag(t *testing.T) {
	b := setup(t, server.Options{})
	b.createSession(t, "S-e1")
	first := b.getWithTag(t, "/v1/sessions", "")
	tag := first.header.Get("ETag")
	if first.status != http.StatusOK || !strings.HasPrefix(tag, `"`) || !strings.Contains(first.body, "S-e1") {
		t.Fatalf("first list: %d tag %q %s", first.status, tag, first.body)
	}
	for _, tc := range []struct {
		name, path, ifNoneMatch string
		want                    int
	}{
		{"same tag", "/v1/sessions", tag, http.StatusNotModified},
		{"weak form of the tag", "/v1/sessions", "W/" + tag, http.StatusNotModified},
		{"one of a list", "/v1/sessions", `"other", ` + tag, http.StatusNotModified},
		{"star", "/v1/sessions", "*", http.StatusNotModified},
		{"another tag", "/v1/sessions", `"other"`, http.StatusOK},
		{"another filter", "/v1/sessions?status=paused", tag, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := b.getWithTag(t, tc.path, tc.ifNoneMatch)
			if resp.status != tc.want {
				t.Fatalf("%s with If-None-Match %s: %d, want %d", tc.path, tc.ifNoneMatch, resp.status, tc.want)
			}
			if tc.want == http.StatusNotModified && (resp.body != "" || resp.header.Get("ETag") != tag) {
				t.Errorf("304 has body %q and tag %q", resp.body, resp.header.Get("ETag"))
			}
		})
	}
	for _, change := range []func(){
		func() { b.createSession(t, "S-e2") },
		func() {
			if resp := b.do(t, "POST", "/v1/sessions/S-e1/events", "application/json", event("S-e1", 1)); resp.status != http.StatusCreated {
				t.Fatalf("append: %d %s", resp.status, resp.body)
			}
		},
	} {
		change()
		resp := b.getWithTag(t, "/v1/sessions", tag)
		if resp.status != http.StatusOK || resp.header.Get("ETag") == tag {
			t.Fatalf("after a change: %d, tag %q (old %q)", resp.status, resp.header.Get("ETag"), tag)
		}
		tag = resp.header.Get("ETag")
	}
}
