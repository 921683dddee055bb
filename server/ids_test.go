package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
)

// TestCreateRefusesSessionIDsAnAppendWouldRefuse creates sessions with the ids of the table:
// an id create accepts takes an append and a stream; every other one is refused at create,
// naming the field and the rule, and nothing is stored.
func TestCreateRefusesSessionIDsAnAppendWouldRefuse(t *testing.T) {
	b := setup(t, server.Options{})
	s256 := "S-" + strings.Repeat("x", 254)
	tests := []struct {
		name, id string
		rule     string // "" when create accepts it
	}{
		{"256 characters", s256, ""},
		{"256 code points, multi-byte", "S-" + strings.Repeat("é", 254), ""},
		{"dots after the prefix", "S-..", ""},
		{"punctuation a URL must escape", "S-a?b#c%d", ""},
		{"257 characters", s256 + "y", contract.RuleSessionIDLength},
		{"NUL", "S-a\x00b", contract.RuleSessionIDChars},
		{"newline", "S-a\nb", contract.RuleSessionIDChars},
		{"space", "S-a b", contract.RuleSessionIDChars},
		{"slash", "S-a/b", contract.RuleSessionIDChars},
		{"backslash", `S-a\b`, contract.RuleSessionIDChars},
		{"dot dot", "..", contract.RuleSessionIDPrefix},
		{"dot", ".", contract.RuleSessionIDPrefix},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idJSON, _ := json.Marshal(tc.id)
			body := `{"session_id":` + string(idJSON) + `,"agent_id":"a","role":"user","snapshot":{"mode":"chat","modelId":"m","capabilities":{}}}`
			resp := b.do(t, "POST", "/v1/sessions", "application/json", body)
			if tc.rule == "" {
				if resp.status != http.StatusCreated {
					t.Fatalf("create: %d %s", resp.status, resp.body)
				}
				// Everything an id create accepts works: an append names it, a stream follows it.
				path := "/v1/sessions/" + url.PathEscape(tc.id)
				ev := strings.Replace(event("S-x", 1), `"S-x"`, string(idJSON), 1)
				if resp := b.do(t, "POST", path+"/events", "application/json", ev); resp.status != http.StatusCreated {
					t.Fatalf("append to the created session: %d %s", resp.status, resp.body)
				}
				if resp := b.do(t, "GET", path+"/events", "", ""); resp.status != http.StatusOK || !strings.Contains(resp.body, `"lastSequence":0`) {
					t.Fatalf("read: %d %s", resp.status, resp.body)
				}
				return
			}
			e := errorBody(t, resp.body)
			if resp.status != http.StatusUnprocessableEntity || e.Code != contract.CodeContractViolation || len(e.Details) != 1 {
				t.Fatalf("create: %d %s", resp.status, resp.body)
			}
			if d := e.Details[0]; d.Path != "/session_id" || d.Rule != tc.rule || !strings.Contains(d.Message, strconv.Quote(tc.id)) && !strings.Contains(d.Message, "characters long") {
				t.Errorf("problem %+v: want /session_id, rule %s, and the id or its length", d, tc.rule)
			}
		})
	}
	list, err := b.cl.ListSessions(t.Context(), nil)
	if err != nil || len(list.Sessions) != 4 {
		t.Errorf("want only the 4 accepted sessions stored: %v %d", err, len(list.Sessions))
	}
}

// TestPathIDs checks the ids in URL paths: one that no event, run or session can have is a
// 400 naming the path parameter; one that no session can be created with is a 404 that says
// so instead of sending the caller to create it.
func TestPathIDs(t *testing.T) {
	b := setup(t, server.Options{})
	b.createSession(t, "S-p")
	long := strings.Repeat("x", 257)
	tests := []struct {
		path   string
		status int
		want   string
	}{
		{"/v1/sessions/S-" + long, 400, `path parameter id "S-xxx`},
		{"/v1/sessions/S-p/runs/" + long, 400, "path parameter runId"},
		{"/v1/sessions/S-p/runs/%FF", 400, "is not valid UTF-8"},
		{"/v1/sessions/S-p/runs/r%20x", 404, "RUN_NOT_FOUND"},
		{"/v1/sessions/S-a%20b", 404, "no new session can take this id (session-id-chars)"},
		{"/v1/sessions/S-nope", 404, "create it with POST /v1/sessions"},
	}
	for _, tc := range tests {
		resp := b.do(t, "GET", tc.path, "", "")
		if e := errorBody(t, resp.body); resp.status != tc.status || !strings.Contains(string(e.Code)+": "+e.Message, tc.want) {
			t.Errorf("GET %.60s: %d %s, want %d with %q", tc.path, resp.status, resp.body, tc.status, tc.want)
		}
	}
}
