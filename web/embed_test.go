package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/web"
)

func serveAsset(t *testing.T, name, ifNoneMatch string) *http.Response {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui/{file...}", web.ServeAsset)
	mux.HandleFunc("GET /{$}", web.ServeIndex)
	req := httptest.NewRequest("GET", name, nil)
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", ifNoneMatch)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	return rec.Result()
}

// TestServeAssets: each kind of file is served with the media type the browser needs (a
// module must be JavaScript), the security headers and an ETag that answers 304; an unknown
// file is 404 in the API's error shape, naming the file and where the UI starts.
func TestServeAssets(t *testing.T) {
	for _, tc := range []struct {
		path, ctype string
		status      int
		body        string
	}{
		{"/", "text/html; charset=utf-8", 200, `<script type="importmap">`},
		{"/ui/app.js", "text/javascript; charset=utf-8", 200, "SessionPage"},
		{"/ui/vendor/preact.mjs", "text/javascript; charset=utf-8", 200, "createElement"},
		{"/ui/app.css", "text/css; charset=utf-8", 200, "prefers-color-scheme"},
		{"/ui/vendor/VENDOR.md", "text/plain; charset=utf-8", 200, "sha256"},
		{"/ui/policy.json", "application/json", 200, `"commands"`},
		{"/ui/nothing.js", "application/json", 404, `"code":"NOT_FOUND"`},
		{"/ui/index.html", "application/json", 404, "the UI starts at /"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp := serveAsset(t, tc.path, "")
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != tc.ctype || !strings.Contains(string(b), tc.body) {
				t.Fatalf("%d %s: %.200s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Error("no nosniff")
			}
			if tc.status != 200 {
				return
			}
			// Scripts from this origin only; images from this origin and data: URLs only (a
			// message's remote image would be a tracking pixel).
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") ||
				!strings.Contains(csp, "img-src 'self' data:;") {
				t.Errorf("CSP %q", csp)
			}
			tag := resp.Header.Get("ETag")
			if again := serveAsset(t, tc.path, tag); tag == "" || again.StatusCode != http.StatusNotModified {
				t.Errorf("If-None-Match %s: %d", tag, again.StatusCode)
			}
		})
	}
}

// TestPolicyJSONIsThePolicyTable: /ui/policy.json has a row for every command type, equal to
// contract.PolicyOf's, so the page gates its controls by the server's own table.
func TestPolicyJSONIsThePolicyTable(t *testing.T) {
	resp := serveAsset(t, "/ui/policy.json", "")
	var got web.Policy
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if len(got.Commands) != len(contract.CommandTypes) {
		t.Fatalf("%d commands, the contract has %d", len(got.Commands), len(contract.CommandTypes))
	}
	for _, ct := range contract.CommandTypes {
		want, _ := contract.PolicyOf(ct)
		row := got.Commands[ct]
		if row.Capability != want.Capability || strings.Join(row.AllowedStatuses, ",") != strings.Join(want.AllowedStatuses, ",") ||
			row.NeedsRunID != want.NeedsRunID || row.NeedsActiveRun != want.NeedsActiveRun || row.Sequence != want.Sequence {
			t.Errorf("%s: page row %+v, contract %+v", ct, row, want)
		}
	}
	if strings.Join(got.TerminalStatuses, ",") != "stopped,completed,failed" || !got.CapabilityDefaults["text"] || got.CapabilityDefaults["approval"] {
		t.Errorf("terminal %v, defaults %v", got.TerminalStatuses, got.CapabilityDefaults)
	}
}

// TestAssetRangeIgnored: a file of the UI is always answered whole (200, or 304 by its ETag),
// never 206 or 416, statuses the API's document does not have.
func TestAssetRangeIgnored(t *testing.T) {
	for _, rng := range []string{"bytes=0-9", "bytes=999999999-"} {
		req := httptest.NewRequest("GET", "/ui/app.js", nil)
		req.SetPathValue("file", "app.js")
		req.Header.Set("Range", rng)
		rec := httptest.NewRecorder()
		web.ServeAsset(rec, req)
		if rec.Code != http.StatusOK || rec.Body.Len() < 100 || rec.Header().Get("Content-Range") != "" || rec.Header().Get("Accept-Ranges") != "" {
			t.Errorf("Range %s: %d, %d bytes, Content-Range %q, Accept-Ranges %q; want 200 with the whole file", rng, rec.Code, rec.Body.Len(), rec.Header().Get("Content-Range"), rec.Header().Get("Accept-Ranges"))
		}
	}
}
