package contract

import (
	"strings"
	"testing"
)

// TestKnownDivergences pins each documented, intended difference from the oracle: the oracle
// accepts the document, we reject it for the reason given, and knownDivergence recognises it
// (so that the differential tests and the fuzz target leave it out).
func TestKnownDivergences(t *testing.T) {
	ev, ss := oracles(t)
	tool := func(input string) string {
		return `{"contract":"AgentSessionEvent","eventId":"e","sessionId":"s","sequence":1,"idempotencyKey":"k","occurredAt":"2026-03-01T12:00Z","eventType":"tool","payload":{"toolCallId":"t","toolName":"n","status":"running","input":` + input + `}}`
	}
	rec := func(sessionID, startedAt string) string {
		return `{"schema_version":1,"session_id":"` + sessionID + `","agent_id":"a","role":"user","status":"running","started_at":"` + startedAt + `"}`
	}
	cases := []struct {
		name, kind, doc string
		why             string // the comment: why we differ
		rule            string // the rule of our (first) problem
	}{
		{"artifact url relative", KindEvent, `{"contract":"AgentSessionEvent","eventId":"e","sessionId":"s","sequence":1,"idempotencyKey":"k","occurredAt":"2026-03-01T12:00Z","eventType":"artifact","payload":{"artifactId":"a","name":"n","kind":"file","status":"ready","url":"files/report.pdf"}}`,
			"the contract asserts that the url is an absolute URI; draft 2020-12 makes format an annotation, so the oracle does not check it", "format"},
		{"artifact url with a space", KindEvent, `{"contract":"AgentSessionEvent","eventId":"e","sessionId":"s","sequence":1,"idempotencyKey":"k","occurredAt":"2026-03-01T12:00Z","eventType":"artifact","payload":{"artifactId":"a","name":"n","kind":"file","status":"ready","url":"https://exa mple.com/"}}`,
			"as above", "format"},
		{"duplicate key", KindEvent, strings.Replace(tool(`{"a":1,"a":2}`), `"eventId":"e"`, `"eventId":"e","eventId":"e"`, 1),
			"the validator and the store must never read different values; encoding/json keeps the last one", "duplicateKey"},
		{"duplicate key in a free value", KindEvent, tool(`{"a":1,"a":2}`), "as above, at any depth", "duplicateKey"},
		{"invalid UTF-8", KindEvent, tool("\"\xff\xfe\""), "encoding/json silently replaces it with U+FFFD; we refuse to change what was sent", "utf8"},
		{"lone surrogate escape", KindEvent, tool(`"\ud800"`), "it is not a Unicode character; encoding/json replaces it with U+FFFD", "utf8"},
		{"nesting 129", KindEvent, tool(nested("[", "]", 127)), "bounded work: the depth limit is 128; encoding/json allows 10000", "maxDepth"},
		{"number beyond float64", KindEvent, tool(`{"n":1e400}`), "numbers must be representable; the oracle keeps the literal (json.Number)", "numberRange"},
		{"leap second", KindSession, rec("S-1", "2016-12-31T23:59:60Z"), "timestamps are instants Go can represent; RFC 3339 leap seconds are not", "format"},
		{"sign inside a time field", KindSession, rec("S-1", "2026-03-01T+1:00:00Z"), "not RFC 3339; the oracle reads the fields with strconv.Atoi, which accepts a sign", "format"},
		{"sign inside the offset", KindSession, rec("S-1", "2026-03-01T01:00:00+00:+1"), "as above", "format"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sch := ev
			if c.kind == KindSession {
				sch = ss
			}
			if ok, err := oracleValid(sch, []byte(c.doc)); !ok {
				t.Fatalf("the oracle rejects it, so it is no divergence: %v", err)
			}
			probs := problemsOf(t, c.kind, []byte(c.doc))
			if len(probs) == 0 || !strings.Contains(probs[0], " "+c.rule+" ") {
				t.Errorf("our problems %q, want rule %s (%s)", probs, c.rule, c.why)
			}
			if knownDivergence(c.kind, []byte(c.doc)) == "" {
				t.Errorf("knownDivergence does not recognise it")
			}
		})
	}

	// session_id without "S-" is schema-valid (so the differential compares it, and agrees
	// with the oracle) but breaks the rule session-id-prefix: the prefix is only in the
	// schema's description.
	doc := []byte(rec("X-1", "2026-03-01T12:00:00Z"))
	if ok, _ := oracleValid(ss, doc); !ok {
		t.Error("oracle rejects a session_id without S-")
	}
	if ok, _ := schemaValid(KindSession, doc); !ok {
		t.Error("a session_id without S- should be schema-valid")
	}
	if got := problemsOf(t, KindSession, doc); len(got) != 1 || got[0] != "/session_id session-id-prefix rule" {
		t.Errorf("problems %q", got)
	}
}
