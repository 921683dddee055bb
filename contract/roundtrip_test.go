package contract

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// freeFields are the members whose values are free JSON, kept byte-for-byte.
var freeFields = map[string]bool{"parts": true, "input": true, "output": true, "requestedAction": true, "state": true, "details": true, "replacementParts": true}

// normalized reads a document the way encoding/json does (numbers kept as written) and writes
// it back with sorted keys, so that two documents compare equal when they differ only in
// member order and whitespace.
func normalized(t *testing.T, data []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("normalize %s: %v", data, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// collectFree returns the raw bytes of every free value in v, by JSON Pointer. Elements of
// free arrays (parts, replacementParts) are collected one by one.
func collectFree(v *Value, path string, out map[string]string) {
	switch v.Kind {
	case KindObject:
		for i := range v.Members {
			m := &v.Members[i]
			p := path + "/" + m.Key
			if freeFields[m.Key] && !(m.Key == "output" && m.Value.Kind == KindString && strings.Contains(path, "test")) {
				out[p] = string(m.Value.Raw)
				continue
			}
			collectFree(&m.Value, p, out)
		}
	case KindArray:
		for i := range v.Elems {
			collectFree(&v.Elems[i], path+"/"+itoa(i), out)
		}
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func compact(t *testing.T, s string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// roundTrip decodes data as kind into out, encodes it with Marshal and checks that the result
// is the canonical document (same JSON, member order aside) and that free values survive
// byte-for-byte in compact form.
func roundTrip(t *testing.T, kind string, data []byte, out any) {
	t.Helper()
	if err := Decode(kind, data, Limits{}, out); err != nil {
		t.Fatalf("decode: %v\n%s", err, data)
	}
	enc, err := Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(kind, enc, Limits{}); err != nil {
		t.Errorf("re-encoded document is invalid: %v\n%s", err, enc)
	}
	in, _ := Parse(data, Limits{})
	canon := canonical(kind, &in)
	if g, w := normalized(t, enc), normalized(t, canon); g != w {
		t.Errorf("round trip changed the document:\n in:  %s\n out: %s", w, g)
	}
	wantFree, gotFree := map[string]string{}, map[string]string{}
	collectFree(&in, "", wantFree)
	outV, err := Parse(enc, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	collectFree(&outV, "", gotFree)
	for p, w := range wantFree {
		if g := gotFree[p]; g != compact(t, w) {
			t.Errorf("free value %s changed:\n in:  %s\n out: %s", p, compact(t, w), g)
		}
	}
}

// TestRoundTripEvents round-trips every generated base event (all 17 kinds, with every field
// and with only the required ones), the benchmark events and the valid sample lines.
func TestRoundTripEvents(t *testing.T) {
	var docs []genCase
	_, bases := eventBases(t)
	for _, b := range bases {
		docs = append(docs, genCase{b.name, encode(b.doc)})
	}
	for i, e := range benchEvents(t) {
		docs = append(docs, genCase{"bench/" + itoa(i), e})
	}
	for _, s := range loadSample(t) {
		if s.Valid {
			docs = append(docs, genCase{s.ID, s.Event})
		}
	}
	// free values with tricky content: number spellings, key order, escapes, nesting
	docs = append(docs, genCase{"free values", []byte(`{"contract":"AgentSessionEvent","eventId":"e","sessionId":"s","sequence":1.0,"idempotencyKey":"k","occurredAt":"2026-03-01T12:00Z","eventType":"tool","payload":{"toolCallId":"t","toolName":"n","status":"running","input":{ "z" : 1.50, "a":[1e2, -0.0, 1E+2, "\u00e9\n\/", {"":null}], "m":true },"output":"x"}}`)})
	for _, d := range docs {
		t.Run(d.name, func(t *testing.T) {
			var e Event
			roundTrip(t, KindEvent, d.data, &e)
			if e.Payload == nil || e.Payload.EventType() != e.EventType {
				t.Errorf("payload %T for eventType %q", e.Payload, e.EventType)
			}
		})
	}
}

// TestRoundTripOtherKinds round-trips commands of all 8 types and one document of every other
// kind.
func TestRoundTripOtherKinds(t *testing.T) {
	lin := `{"forkedFromThreadId":"S-1","forkedFromMessageId":"m1","sourceRunId":"r0"}`
	cases := []struct {
		name, kind string
		doc        string
		out        func() any
	}{
		{"stop", KindCommand, cmd("stop", "r1", `{"reason":"enough"}`), func() any { return new(Command) }},
		{"stop empty", KindCommand, cmd("stop", "r1", `{}`), func() any { return new(Command) }},
		{"resume", KindCommand, cmd("resume", "r1", `{"resumeEventId":"e1"}`), func() any { return new(Command) }},
		{"retry", KindCommand, cmd("retry", "r1", `{"sourceEventId":"e1"}`), func() any { return new(Command) }},
		{"retry-summary", KindCommand, cmd("retry-summary", "r1", `{"sourceEventId":"e1","sourceRunId":"r1"}`), func() any { return new(Command) }},
		{"approval", KindCommand, cmd("approval", "r1", `{"approvalId":"a","decision":"rejected","reason":"no"}`), func() any { return new(Command) }},
		{"fork", KindCommand, cmd("fork", "", `{"sourceThreadId":"S-1","sourceMessageId":"m1","sourceRunId":"r1","inheritance":`+inherit+`}`), func() any { return new(Command) }},
		{"edit-and-rerun", KindCommand, cmd("edit-and-rerun", "", `{"sourceThreadId":"S-1","sourceMessageId":"m1","sourceRunId":"r1","replacementParts":[{"b":2,"a":1.0},"x",[]],"inheritance":`+inherit+`}`), func() any { return new(Command) }},
		{"steer", KindCommand, cmd("steer", "r1", `{"targetRunId":"r1","text":"left"}`), func() any { return new(Command) }},
		{"command-result", KindCommandResult, result, func() any { return new(CommandResult) }},
		{"command-result without resultEventIds", KindCommandResult, string(edit(result, "/resultEventIds", "-")), func() any { return new(CommandResult) }},
		{"command-result with empty resultEventIds", KindCommandResult, string(edit(result, "/resultEventIds", "[]")), func() any { return new(CommandResult) }},
		{"command-result with operation", KindCommandResult, string(edit(result, "/operation", `{"lineage":`+lin+`,"activeBranch":{"branchId":"b","threadId":"S-2","sourceMessageId":"m1","runId":"r1","lineage":`+lin+`,"createdAt":"2026-03-01T12:00:00Z"}}`, "/outcome", `"failed"`, "/error", cmdErr)), func() any { return new(CommandResult) }},
		{"run", KindRun, string(edit(runDoc, "/status", `"stopped"`, "/stoppingRequestedAt", `"2026-03-01T12:00:01Z"`, "/stoppedAt", `"2026-03-01T12:00:02Z"`, "/durationMs", "2000.5")), func() any { return new(Run) }},
		{"view", KindView, `{"sessionId":"S-1","snapshot":{"mode":"work","modelId":"m","capabilities":{"text":false,"shell":true},"permissionProfile":"full-access"},"status":"running","events":[` + evSteer + `],"lastSequence":3,"resumable":true,"lineage":` + lin + `}`, func() any { return new(ViewModel) }},
		{"view without resumable", KindView, `{"sessionId":"S-1","snapshot":{"mode":"chat","modelId":"m","capabilities":{}},"status":"queued","events":[],"lastSequence":-1}`, func() any { return new(ViewModel) }},
		{"view with resumable false", KindView, `{"sessionId":"S-1","snapshot":{"mode":"chat","modelId":"m","capabilities":{}},"status":"queued","events":[],"lastSequence":-1,"resumable":false}`, func() any { return new(ViewModel) }},
		{"session", KindSession, `{"schema_version":1,"session_id":"S-1","project":null,"agent_id":"a","role":"user","mode":"code","status":"paused","phase":"p","started_at":"2026-03-01T12:00:00Z","last_heartbeat_at":null,"updated_by_gate":"owner"}`, func() any { return new(SessionRecord) }},
		{"snapshot", KindSnapshot, `{"mode":"work","modelId":"m","capabilities":{"steering":true,"summary":false}}`, func() any { return new(Snapshot) }},
		{"lineage", KindLineage, lin, func() any { return new(Lineage) }},
		{"inheritance", KindInheritance, inherit, func() any { return new(Inheritance) }},
		{"inherited-context", KindInheritedContext, `{"sourceThreadId":"S-1","sourceMessageId":"m","sourceRunId":"r","messages":[{"messageId":"m","role":"user","parts":[{"type":"text","text":"hi","n":1e0}]}],"summary":"s","unavailableResources":[{"messageId":"m","kind":"attachment","reason":"excluded"}],"capturedAt":"2026-03-01T12:00:00Z"}`, func() any { return new(InheritedContext) }},
		{"continuation-request", KindContinuationRequest, `{"idempotencyKey":"k","sourceMessageId":"m","sourceRunId":"r","inheritance":` + inherit + `}`, func() any { return new(ContinuationRequest) }},
		{"continuation-result", KindContinuationResult, `{"idempotencyKey":"k","threadId":"S-2","lineage":` + lin + `,"inheritance":` + inherit + `,"unavailableResources":[],"duplicate":false,"createdAt":"2026-03-01T12:00:00Z"}`, func() any { return new(ContinuationResult) }},
		{"active-branch", KindActiveBranch, `{"branchId":"b","threadId":"S-2","sourceMessageId":"m","runId":"r","createdAt":"2026-03-01T12:00:00Z"}`, func() any { return new(ActiveBranch) }},
	}
	kinds := map[string]bool{}
	for _, c := range cases {
		kinds[c.kind] = true
		t.Run(c.name, func(t *testing.T) { roundTrip(t, c.kind, []byte(c.doc), c.out()) })
	}
	for _, k := range DocumentKinds {
		if k != KindEvent && !kinds[k] {
			t.Errorf("kind %s has no round-trip case", k)
		}
	}
}
