//go:build unix

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestREADMEDemo runs the README's "A session to look at" as written, against the server of
// "The two commands", and checks that the demo session is what the README says: every one of
// the 17 event kinds, a test that fails and then passes, usage, a run waiting for an approval
// that is still pending, the capabilities the controls need, and a fork from the first
// message, whose usage counts in GET /v1/usage.
func TestREADMEDemo(t *testing.T) {
	doc := readDoc(t, "README.md")
	var serve *docCommand
	for _, c := range mustSection(t, doc, "README.md", "## The two commands")[0] {
		if strings.HasPrefix(c.text, "go run ./cmd/sessiond serve") {
			c.background = true
			serve = &c
		}
	}
	if serve == nil {
		t.Fatal(`README.md: "## The two commands" has no "go run ./cmd/sessiond serve"`)
	}
	r := newDocRun(t, "README.md")
	r.run(*serve)
	blocks := mustSection(t, doc, "README.md", "## A session to look at")
	if len(blocks) != 1 || len(blocks[0]) != 2 || blocks[0][0].text != "go run ./cmd/sessiond demo" {
		t.Fatalf("README.md: \"## A session to look at\" should hold one block: go run ./cmd/sessiond demo, then sessiond usage; it has %v", blocks)
	}
	for _, c := range blocks[0] {
		r.run(c)
	}
	get := func(path string, out any) {
		t.Helper()
		resp, err := http.Get("http://" + r.addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
	}
	var view struct {
		Snapshot struct {
			Capabilities map[string]bool `json:"capabilities"`
		} `json:"snapshot"`
		Status string `json:"status"`
		Events []struct {
			EventType string         `json:"eventType"`
			Payload   map[string]any `json:"payload"`
		} `json:"events"`
	}
	get("/v1/sessions/S-demo/view", &view)
	kinds := map[string]bool{}
	var tests []string
	pending := false
	for _, e := range view.Events {
		kinds[e.EventType] = true
		if e.EventType == "test-result" {
			tests = append(tests, e.Payload["status"].(string))
		}
		if e.EventType == "approval" && e.Payload["status"] == "requested" {
			pending = true
		}
	}
	if len(kinds) != 17 {
		t.Errorf("the demo session has %d event kinds, want 17: %v", len(kinds), kinds)
	}
	if !slices.Equal(tests, []string{"failed", "passed"}) {
		t.Errorf("the demo's tests: %v; want one that fails, then passes", tests)
	}
	if !pending || view.Status != "waiting_approval" {
		t.Errorf("the demo session: pending approval %v, status %s; want a run waiting for an approval", pending, view.Status)
	}
	for _, c := range []string{"approval", "steering", "resume", "summary", "threadForking", "editAndRerun"} {
		if !view.Snapshot.Capabilities[c] {
			t.Errorf("the demo session lacks capability %s, which a control needs", c)
		}
	}
	var forks struct {
		Sessions []struct {
			Record struct {
				SessionID string `json:"session_id"`
			} `json:"record"`
		} `json:"sessions"`
	}
	get("/v1/sessions?project=demo", &forks)
	if len(forks.Sessions) != 2 {
		t.Fatalf("sessions of project demo: %+v; want the demo and its fork", forks.Sessions)
	}
	var usage struct {
		Groups []struct {
			SessionID   string `json:"sessionId"`
			InputTokens int64  `json:"inputTokens"`
		} `json:"groups"`
	}
	get("/v1/usage?by=session&project=demo", &usage)
	if len(usage.Groups) != 2 || usage.Groups[0].InputTokens == 0 || usage.Groups[1].InputTokens == 0 {
		t.Errorf("GET /v1/usage by session: %+v; want the demo's usage and its fork's", usage.Groups)
	}
	r.finish()
}
