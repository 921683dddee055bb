package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestGoldenProblems pins the full error output (path, rule, layer and message of every
// problem, and the Error() string) for a handful of bad documents. Run with -update after an
// intended change of wording and review the diff.
func TestGoldenProblems(t *testing.T) {
	cases := []struct {
		name, kind string
		doc        []byte
	}{
		{"event with many schema problems", KindEvent, edit(evSteer,
			"/eventId", `""`, "/sequence", `1.5`, "/occurredAt", `"2023-02-29T12:00:00Z"`, "/extra", `1`,
			"/payload/text", `""`, "/payload/status", `"nope"`, "/payload/commandId", "-")},
		{"run status event breaking three rules", KindEvent, edit(evStatus, "/payload/status", `"failed"`, "/sourceMessageId", "-")},
		{"artifact with a relative url", KindEvent, []byte(`{` + evHeader + `,"eventType":"artifact","payload":{"artifactId":"a","name":"n","kind":"file","status":"ready","url":"files/report.pdf","size":-1}}`)},
		{"identifier of 257 emoji", KindEvent, edit(evSteer, "/eventId", `"`+strings.Repeat("😀", 257)+`"`)},
		{"duplicate key", KindEvent, []byte(`{"contract":"AgentSessionEvent","payload":{"a":1,"a":2}}`)},
		{"invalid UTF-8", KindEvent, []byte("{\"contract\":\"Agent\xffSessionEvent\"}")},
		{"trailing garbage", KindEvent, []byte(evSteer + ` {}`)},
		{"command with wrong payload", KindCommand, []byte(cmd("approval", "", `{"approvalId":"a1","decision":"maybe"}`))},
		{"command result breaking rules", KindCommandResult, edit(result, "/outcome", `"rejected"`, "/termination", `"confirmed"`)},
		{"view with an out-of-order event", KindView, []byte(`{"sessionId":"S-1","snapshot":{"mode":"chat","modelId":"m","capabilities":{}},"status":"running","events":[{"contract":"AgentSessionEvent","eventId":"e1","sessionId":"S-2","sequence":2,"idempotencyKey":"k","occurredAt":"2026-03-01T12:00:00Z","eventType":"usage","payload":{}}],"lastSequence":3}`)},
		{"session record", KindSession, []byte(`{"schema_version":1,"session_id":"X-1","agent_id":"","role":"boss","status":"running","started_at":"2026-03-01T12:00:60Z","zzz":1}`)},
	}
	var out bytes.Buffer
	for _, c := range cases {
		fmt.Fprintf(&out, "## %s (%s)\n", c.name, c.kind)
		err := Validate(c.kind, c.doc, Limits{})
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("%s: Validate = %v, want a *ValidationError", c.name, err)
		}
		for _, p := range ve.Problems {
			b, _ := json.Marshal(p)
			out.Write(b)
			out.WriteByte('\n')
		}
		fmt.Fprintf(&out, "Error(): %s\n\n", err)
	}
	const file = "testdata/problems.golden"
	if *update {
		if err := os.WriteFile(file, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGoldenProblems -update to create it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		gl, wl := strings.Split(out.String(), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("golden mismatch at line %d:\n got  %s\n want %s\n(run with -update if the change is intended)", i+1, g, w)
			}
		}
	}
}
