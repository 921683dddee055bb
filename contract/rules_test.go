package contract

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// toTree converts a parsed value into the generator's ordered tree.
func toTree(v *Value) any {
	switch v.Kind {
	case KindObject:
		o := obj{}
		for i := range v.Members {
			o = append(o, kv{v.Members[i].Key, toTree(&v.Members[i].Value)})
		}
		return o
	case KindArray:
		a := []any{}
		for i := range v.Elems {
			a = append(a, toTree(&v.Elems[i]))
		}
		return a
	case KindNumber:
		return raw(v.Raw)
	}
	return fromValue(v)
}

// edit applies edits to a JSON document: pairs of a JSON Pointer and a JSON value, or "-" to
// delete the member. It panics on a bad edit, which is a bug in the test.
func edit(doc string, edits ...string) []byte {
	v, err := Parse([]byte(doc), Limits{})
	if err != nil {
		panic(err)
	}
	tree := toTree(&v)
	for i := 0; i < len(edits); i += 2 {
		var path []any
		for _, seg := range strings.Split(edits[i], "/")[1:] {
			if n, err := strconv.Atoi(seg); err == nil {
				path = append(path, n)
			} else {
				path = append(path, strings.NewReplacer("~1", "/", "~0", "~").Replace(seg))
			}
		}
		o := op{path: path, del: edits[i+1] == "-"}
		if !o.del {
			val, err := Parse([]byte(edits[i+1]), Limits{})
			if err != nil {
				panic(fmt.Sprintf("edit value %s: %v", edits[i+1], err))
			}
			o.val = toTree(&val)
		}
		var ok bool
		if tree, ok = apply(tree, o); !ok {
			panic("edit path not found: " + edits[i])
		}
	}
	return encode(tree)
}

// want is an expected problem: "path rule layer".
func problemsOf(t *testing.T, kind string, data []byte) []string {
	t.Helper()
	err := Validate(kind, data, Limits{})
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate returned %T: %v", err, err)
	}
	var out []string
	for _, p := range ve.Problems {
		if p.Message == "" {
			t.Errorf("problem without a message: %+v", p)
		}
		if p.Layer == LayerRule && !slices.ContainsFunc(Rules, func(r Rule) bool {
			return r.Name == p.Rule && (r.Kind == kind || kind == KindView && r.Kind == KindEvent)
		}) {
			t.Errorf("rule %q of a %s is not in the Rules table (contract/meanings.go), so the reference page misses it", p.Rule, kind)
		}
		out = append(out, p.Path+" "+p.Rule+" "+p.Layer)
	}
	return out
}

type ruleCase struct {
	name string
	kind string
	doc  []byte
	want []string // every problem, as "path rule layer"; nil = valid
}

func runRuleCases(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := problemsOf(t, c.kind, c.doc)
			g, w := slices.Clone(got), slices.Clone(c.want)
			slices.Sort(g)
			slices.Sort(w)
			if !slices.Equal(g, w) {
				t.Errorf("problems:\n got  %q\n want %q\n doc: %s", got, c.want, c.doc)
			}
		})
	}
}

const (
	evHeader = `"contract":"AgentSessionEvent","eventId":"e1","sessionId":"S-1","sequence":3,"idempotencyKey":"k1","occurredAt":"2026-03-01T12:00:00Z"`
	evSteer  = `{` + evHeader + `,"runId":"r1","eventType":"steer","payload":{"commandId":"c1","targetRunId":"r1","text":"go left","status":"accepted"}}`
	evSum    = `{` + evHeader + `,"runId":"r1","eventType":"summary","payload":{"summaryId":"s1","runId":"r1","text":"t","highlights":[],"pendingItems":[],"status":"completed"}}`
	evStatus = `{` + evHeader + `,"runId":"r1","sourceMessageId":"m1","eventType":"status","payload":{"status":"running","startedAt":"2026-03-01T12:00:00Z"}}`
	cmdErr   = `{"code":"RUN_NOT_FOUND","message":"no such run","retryable":false}`
)

// TestEventRules covers every event rule.
func TestEventRules(t *testing.T) {
	const R = " rule"
	runRuleCases(t, []ruleCase{
		{"steer ok", KindEvent, []byte(evSteer), nil},
		{"steer runId differs", KindEvent, edit(evSteer, "/runId", `"r2"`), []string{"/runId steer-run-id" + R}},
		{"steer runId missing", KindEvent, edit(evSteer, "/runId", "-"), []string{"/runId steer-run-id" + R}},
		{"steer failed without error", KindEvent, edit(evSteer, "/payload/status", `"failed"`), []string{"/payload/error steer-error-status" + R}},
		{"steer failed with error", KindEvent, edit(evSteer, "/payload/status", `"failed"`, "/payload/error", cmdErr), nil},
		{"steer applied with error", KindEvent, edit(evSteer, "/payload/status", `"applied"`, "/payload/error", cmdErr), []string{"/payload/error steer-error-status" + R}},
		{"steer both rules at once", KindEvent, edit(evSteer, "/runId", `"r9"`, "/payload/error", cmdErr), []string{"/runId steer-run-id" + R, "/payload/error steer-error-status" + R}},
		{"summary ok", KindEvent, []byte(evSum), nil},
		{"summary runId differs", KindEvent, edit(evSum, "/payload/runId", `"r2"`), []string{"/runId summary-run-id" + R}},
		{"summary runId missing", KindEvent, edit(evSum, "/runId", "-"), []string{"/runId summary-run-id" + R}},
		{"status without runId is not a run status", KindEvent, edit(evStatus, "/runId", "-", "/sourceMessageId", "-", "/payload/status", `"completed"`), nil},
		{"run status running ok", KindEvent, []byte(evStatus), nil},
		{"run status without sourceMessageId", KindEvent, edit(evStatus, "/sourceMessageId", "-"), []string{"/sourceMessageId run-status-source-message" + R}},
		{"run status running without startedAt", KindEvent, edit(evStatus, "/payload/startedAt", "-"), []string{"/payload/startedAt run-status-timestamp" + R}},
		{"run status queued needs nothing", KindEvent, edit(evStatus, "/payload/status", `"queued"`, "/payload/startedAt", "-"), nil},
		{"run status waiting_approval needs nothing", KindEvent, edit(evStatus, "/payload/status", `"waiting_approval"`, "/payload/startedAt", "-"), nil},
		{"run status stopping", KindEvent, edit(evStatus, "/payload/status", `"stopping"`), []string{"/payload/stoppingRequestedAt run-status-timestamp" + R}},
		{"run status stopping ok", KindEvent, edit(evStatus, "/payload/status", `"stopping"`, "/payload/stoppingRequestedAt", `"2026-03-01T12:01:00Z"`), nil},
		{"run status stopped", KindEvent, edit(evStatus, "/payload/status", `"stopped"`), []string{"/payload/stoppedAt run-status-timestamp" + R, "/payload/durationMs run-status-duration" + R}},
		{"run status completed", KindEvent, edit(evStatus, "/payload/status", `"completed"`, "/payload/durationMs", "12"), []string{"/payload/completedAt run-status-timestamp" + R}},
		{"run status failed ok", KindEvent, edit(evStatus, "/payload/status", `"failed"`, "/payload/failedAt", `"2026-03-01T12:00:09Z"`, "/payload/durationMs", "0"), nil},
		{"run status failed, all three rules", KindEvent, edit(evStatus, "/payload/status", `"failed"`, "/sourceMessageId", "-"), []string{
			"/sourceMessageId run-status-source-message" + R, "/payload/failedAt run-status-timestamp" + R, "/payload/durationMs run-status-duration" + R}},
		// rules run only on a schema-valid event: a schema problem hides them
		{"schema problem hides rules", KindEvent, edit(evSteer, "/runId", `"r2"`, "/payload/status", `"bogus"`), []string{"/payload/status enum schema"}},
	})
}

// TestSchemaProblemsAllListed checks that every schema problem of a document is reported, each
// at its own JSON Pointer with its keyword.
func TestSchemaProblemsAllListed(t *testing.T) {
	const S = " schema"
	runRuleCases(t, []ruleCase{
		{"many at once", KindEvent, edit(evSteer,
			"/eventId", `""`, "/sequence", `-1`, "/occurredAt", `"2023-02-29T00:00Z"`, "/extra", `1`,
			"/payload/text", `""`, "/payload/status", `"nope"`, "/payload/commandId", "-", "/contract", `"X"`),
			[]string{"/contract const" + S, "/eventId minLength" + S, "/sequence minimum" + S, "/occurredAt pattern" + S,
				"/extra additionalProperties" + S, "/payload/commandId required" + S, "/payload/text minLength" + S, "/payload/status enum" + S}},
		{"nested array item", KindEvent, []byte(`{` + evHeader + `,"eventType":"plan","payload":{"planId":"p","status":"running","steps":[{"id":"a","title":"t","status":"done"},{"id":"","title":1,"status":"skipped","x":null}]}}`),
			[]string{"/payload/steps/0/status enum" + S, "/payload/steps/1/id minLength" + S, "/payload/steps/1/title type" + S, "/payload/steps/1/x additionalProperties" + S}},
		{"pointer escaping", KindEvent, edit(evSteer, "/a~0b", "1", "/c~1d", "2"), []string{"/a~0b additionalProperties" + S, "/c~1d additionalProperties" + S}},
		{"integer bounds", KindEvent, []byte(`{` + evHeader + `,"eventType":"usage","payload":{"inputTokens":1.5,"outputTokens":9007199254740992,"totalTokens":-1,"contextTokens":1e2,"contextWindow":0}}`),
			[]string{"/payload/inputTokens type" + S, "/payload/outputTokens maximum" + S, "/payload/totalTokens minimum" + S, "/payload/contextWindow exclusiveMinimum" + S}},
		{"exitCode bounds", KindEvent, []byte(`{` + evHeader + `,"eventType":"terminal","payload":{"terminalId":"t","stream":"stdout","chunk":"","exitCode":-9007199254740992}}`),
			[]string{"/payload/exitCode minimum" + S}},
		{"durationMs", KindEvent, []byte(`{` + evHeader + `,"eventType":"test-result","payload":{"testId":"t","name":"n","status":"passed","durationMs":-1e-400}}`),
			[]string{"/payload/durationMs minimum" + S}},
		{"unknown eventType", KindEvent, edit(evSteer, "/eventType", `"steering"`), []string{"/eventType enum" + S}},
		{"not an object", KindEvent, []byte(`[]`), []string{" type" + S}},
		{"payload not an object", KindEvent, edit(evSteer, "/payload", `"x"`), []string{"/payload type" + S}},
	})
}

const (
	cmdHeader = `"contract":"AgentSessionCommand","commandId":"c1","sessionId":"S-1","idempotencyKey":"k1","expectedSequence":-1,"issuedAt":"2026-03-01T12:00:00Z"`
	inherit   = `{"messages":"through-source-message","attachments":"inherit","summaries":"exclude","toolResults":"inherit","codeChanges":"exclude"}`
)

func cmd(ct, runID, payload string) string {
	r := ""
	if runID != "" {
		r = `,"runId":"` + runID + `"`
	}
	return `{` + cmdHeader + r + `,"commandType":"` + ct + `","payload":` + payload + `}`
}

// TestCommands covers the payload of each of the 8 commands and the command rules.
func TestCommands(t *testing.T) {
	const S, R = " schema", " rule"
	needsRun := func(ct, payload string) []ruleCase {
		return []ruleCase{
			{ct + " ok", KindCommand, []byte(cmd(ct, "r1", payload)), nil},
			{ct + " without runId", KindCommand, []byte(cmd(ct, "", payload)), []string{"/runId command-needs-run-id" + R}},
		}
	}
	var cases []ruleCase
	cases = append(cases, needsRun("stop", `{"reason":"user asked"}`)...)
	cases = append(cases, needsRun("stop", `{}`)...)
	cases = append(cases, needsRun("resume", `{"resumeEventId":"e1"}`)...)
	cases = append(cases, needsRun("retry", `{"sourceEventId":"e1"}`)...)
	cases = append(cases, needsRun("retry-summary", `{"sourceEventId":"e1","sourceRunId":"r1"}`)...)
	cases = append(cases, needsRun("approval", `{"approvalId":"a1","decision":"approved"}`)...)
	cases = append(cases, needsRun("steer", `{"targetRunId":"r1","text":"left"}`)...)
	cases = append(cases, []ruleCase{
		{"stop blank reason", KindCommand, []byte(cmd("stop", "r1", `{"reason":" \t"}`)), []string{"/payload/reason notBlank" + S}},
		{"stop unknown field", KindCommand, []byte(cmd("stop", "r1", `{"force":true}`)), []string{"/payload/force additionalProperties" + S}},
		{"resume empty id", KindCommand, []byte(cmd("resume", "r1", `{"resumeEventId":""}`)), []string{"/payload/resumeEventId minLength" + S}},
		{"retry missing source", KindCommand, []byte(cmd("retry", "r1", `{}`)), []string{"/payload/sourceEventId required" + S}},
		{"retry-summary run differs", KindCommand, []byte(cmd("retry-summary", "r1", `{"sourceEventId":"e1","sourceRunId":"r2"}`)), []string{"/payload/sourceRunId retry-summary-run-id" + R}},
		{"approval bad decision", KindCommand, []byte(cmd("approval", "r1", `{"approvalId":"a1","decision":"maybe","reason":""}`)), []string{"/payload/decision enum" + S, "/payload/reason notBlank" + S}},
		{"approval rejected with reason", KindCommand, []byte(cmd("approval", "r1", `{"approvalId":"a1","decision":"rejected","reason":"no"}`)), nil},
		{"fork ok without runId", KindCommand, []byte(cmd("fork", "", `{"sourceThreadId":"S-1","sourceMessageId":"m1","sourceRunId":"r1","inheritance":`+inherit+`}`)), nil},
		{"fork bad inheritance", KindCommand, []byte(cmd("fork", "", `{"sourceThreadId":"S-1","sourceMessageId":"m1","sourceRunId":"r1","inheritance":{"messages":"inherit","attachments":"inherit","summaries":"exclude","toolResults":"inherit"}}`)),
			[]string{"/payload/inheritance/messages enum" + S, "/payload/inheritance/codeChanges required" + S}},
		{"edit-and-rerun ok", KindCommand, []byte(cmd("edit-and-rerun", "", `{"sourceThreadId":"S-1","sourceMessageId":"m1","sourceRunId":"r1","replacementParts":[{"type":"text","text":"hi"}],"inheritance":`+inherit+`}`)), nil},
		{"edit-and-rerun no parts", KindCommand, []byte(cmd("edit-and-rerun", "", `{"sourceThreadId":"S-1","sourceMessageId":"m1","sourceRunId":"r1","replacementParts":[],"inheritance":`+inherit+`}`)), []string{"/payload/replacementParts minItems" + S}},
		{"steer target differs", KindCommand, []byte(cmd("steer", "r1", `{"targetRunId":"r2","text":"left"}`)), []string{"/payload/targetRunId steer-run-id" + R}},
		{"steer blank text", KindCommand, []byte(cmd("steer", "r1", `{"targetRunId":"r1","text":"  "}`)), []string{"/payload/text notBlank" + S}},
		{"unknown commandType", KindCommand, []byte(cmd("pause", "r1", `{}`)), []string{"/commandType enum" + S}},
		{"expectedSequence below -1", KindCommand, edit(cmd("stop", "r1", `{}`), "/expectedSequence", "-2"), []string{"/expectedSequence minimum" + S}},
		{"header problems all listed", KindCommand, edit(cmd("stop", "r1", `{}`), "/contract", `"AgentSessionEvent"`, "/issuedAt", `"yesterday"`, "/commandId", "-"),
			[]string{"/contract const" + S, "/issuedAt pattern" + S, "/commandId required" + S}},
	}...)
	runRuleCases(t, cases)
}

const result = `{"contract":"AgentSessionCommandResult","commandId":"c1","sessionId":"S-1","runId":"r1","idempotencyKey":"k1","outcome":"accepted","sessionStatus":"running","acceptedSequence":4,"resultEventIds":["e4"],"occurredAt":"2026-03-01T12:00:00Z"}`

// TestCommandResultRules covers the rules of a command result.
func TestCommandResultRules(t *testing.T) {
	const R = " rule"
	lin := `{"forkedFromThreadId":"S-1","forkedFromMessageId":"m1","sourceRunId":"r0"}`
	branch := func(runID, lineage string) string {
		return `{"lineage":` + lin + `,"activeBranch":{"branchId":"b1","threadId":"S-2","sourceMessageId":"m1","runId":"` + runID + `","lineage":` + lineage + `,"createdAt":"2026-03-01T12:00:00Z"}}`
	}
	runRuleCases(t, []ruleCase{
		{"accepted ok", KindCommandResult, []byte(result), nil},
		{"rejected without error", KindCommandResult, edit(result, "/outcome", `"rejected"`), []string{"/error result-error-outcome" + R}},
		{"failed with error", KindCommandResult, edit(result, "/outcome", `"failed"`, "/error", cmdErr), nil},
		{"accepted with error", KindCommandResult, edit(result, "/error", cmdErr), []string{"/error result-error-outcome" + R}},
		{"duplicate with error", KindCommandResult, edit(result, "/outcome", `"duplicate"`, "/error", cmdErr), []string{"/error result-error-outcome" + R}},
		{"termination requested ok", KindCommandResult, edit(result, "/termination", `"requested"`, "/sessionStatus", `"stopping"`), nil},
		{"termination requested wrong status", KindCommandResult, edit(result, "/termination", `"requested"`), []string{"/termination result-termination" + R}},
		{"termination confirmed ok", KindCommandResult, edit(result, "/termination", `"confirmed"`, "/sessionStatus", `"stopped"`), nil},
		{"termination confirmed not terminal", KindCommandResult, edit(result, "/termination", `"confirmed"`, "/sessionStatus", `"stopping"`), []string{"/termination result-termination" + R}},
		{"operation ok", KindCommandResult, edit(result, "/operation", branch("r1", lin)), nil},
		{"operation lineage differs", KindCommandResult, edit(result, "/operation", branch("r1", `{"forkedFromThreadId":"S-9","forkedFromMessageId":"m1","sourceRunId":"r0"}`)), []string{"/operation/activeBranch/lineage result-operation-lineage" + R}},
		{"operation run differs and error", KindCommandResult, edit(result, "/operation", branch("r2", lin), "/outcome", `"failed"`), []string{"/operation/activeBranch/runId result-operation-run-id" + R, "/error result-error-outcome" + R}},
		{"operation lineage missing", KindCommandResult, edit(result, "/operation", branch("r1", lin), "/operation/activeBranch/lineage", "-"), []string{"/operation/activeBranch/lineage result-operation-lineage" + R}},
		{"acceptedSequence negative", KindCommandResult, edit(result, "/acceptedSequence", "-1"), []string{"/acceptedSequence minimum schema"}},
		{"bad error code", KindCommandResult, edit(result, "/outcome", `"failed"`, "/error", `{"code":"OOPS","message":"m","retryable":true}`), []string{"/error/code enum schema"}},
	})
}

const runDoc = `{"runId":"r1","sessionId":"S-1","sourceMessageId":"m1","status":"running","startedAt":"2026-03-01T12:00:00Z"}`

// TestRunInvariants covers the invariants of a run record.
func TestRunInvariants(t *testing.T) {
	const R = " run-invariant rule"
	ts := `"2026-03-01T12:05:00Z"`
	runRuleCases(t, []ruleCase{
		{"running ok", KindRun, []byte(runDoc), nil},
		{"queued ok", KindRun, edit(runDoc, "/status", `"queued"`), nil},
		{"completed ok", KindRun, edit(runDoc, "/status", `"completed"`, "/completedAt", ts, "/durationMs", "300000"), nil},
		{"completed without timestamp and duration", KindRun, edit(runDoc, "/status", `"completed"`), []string{"/completedAt" + R, "/durationMs" + R}},
		{"stopped ok", KindRun, edit(runDoc, "/status", `"stopped"`, "/stoppingRequestedAt", ts, "/stoppedAt", ts, "/durationMs", "1.5"), nil},
		{"stopped without stoppingRequestedAt", KindRun, edit(runDoc, "/status", `"stopped"`, "/stoppedAt", ts, "/durationMs", "1"), []string{"/stoppingRequestedAt" + R}},
		{"stopping without stoppingRequestedAt", KindRun, edit(runDoc, "/status", `"stopping"`), []string{"/stoppingRequestedAt" + R}},
		{"two terminal timestamps", KindRun, edit(runDoc, "/status", `"failed"`, "/failedAt", ts, "/completedAt", ts, "/durationMs", "1"), []string{"" + R}},
		{"running with terminal timestamp and duration", KindRun, edit(runDoc, "/completedAt", ts, "/durationMs", "1"), []string{"" + R, "/durationMs" + R}},
		{"failed with the wrong timestamp", KindRun, edit(runDoc, "/status", `"failed"`, "/stoppedAt", ts, "/durationMs", "1"), []string{"/failedAt" + R}},
		{"negative duration is a schema problem", KindRun, edit(runDoc, "/durationMs", "-1"), []string{"/durationMs minimum schema"}},
	})
}

// TestViewRules covers the rules of a view model.
func TestViewRules(t *testing.T) {
	const R = " rule"
	snap := `{"mode":"work","modelId":"m-1","capabilities":{"text":true,"steering":true},"permissionProfile":"auto-approve"}`
	ev := func(id string, seq int, key string) string {
		return `{"contract":"AgentSessionEvent","eventId":"` + id + `","sessionId":"S-1","sequence":` + strconv.Itoa(seq) + `,"idempotencyKey":"` + key + `","occurredAt":"2026-03-01T12:00:00Z","eventType":"reasoning","payload":{"reasoningId":"x","text":"t","status":"completed"}}`
	}
	view := func(last int, events ...string) string {
		return `{"sessionId":"S-1","snapshot":` + snap + `,"status":"running","events":[` + strings.Join(events, ",") + `],"lastSequence":` + strconv.Itoa(last) + `,"resumable":false}`
	}
	runRuleCases(t, []ruleCase{
		{"empty ok", KindView, []byte(view(-1)), nil},
		{"two events ok", KindView, []byte(view(5, ev("e1", 1, "k1"), ev("e2", 5, "k2"))), nil},
		{"empty with lastSequence 0", KindView, []byte(view(0)), []string{"/lastSequence view-last-sequence" + R}},
		{"lastSequence not the last", KindView, []byte(view(4, ev("e1", 1, "k1"), ev("e2", 5, "k2"))), []string{"/lastSequence view-last-sequence" + R}},
		{"sequence not increasing", KindView, []byte(view(1, ev("e1", 1, "k1"), ev("e2", 1, "k2"))), []string{"/events/1/sequence view-sequence-order" + R}},
		{"duplicate id and key", KindView, []byte(view(2, ev("e1", 1, "k1"), ev("e1", 2, "k1"))), []string{"/events/1/eventId view-unique-event-id" + R, "/events/1/idempotencyKey view-unique-idempotency-key" + R}},
		{"event of another session", KindView, edit(view(1, ev("e1", 1, "k1")), "/events/0/sessionId", `"S-2"`), []string{"/events/0/sessionId view-session-id" + R}},
		{"event schema problem inside", KindView, edit(view(1, ev("e1", 1, "k1")), "/events/0/payload/status", `"x"`), []string{"/events/0/payload/status enum schema"}},
		{"event rule problem inside", KindView, []byte(view(3, `{"contract":"AgentSessionEvent","eventId":"e3","sessionId":"S-1","sequence":3,"idempotencyKey":"k3","occurredAt":"2026-03-01T12:00:00Z","eventType":"summary","payload":{"summaryId":"s","runId":"r1","text":"","highlights":[],"pendingItems":[],"status":"completed"}}`)),
			[]string{"/events/0/runId summary-run-id" + R}},
		{"snapshot problems", KindView, edit(view(-1), "/snapshot/mode", `"chat!"`, "/snapshot/modelId", `" "`, "/snapshot/capabilities/telepathy", "true"),
			[]string{"/snapshot/mode enum schema", "/snapshot/modelId notBlank schema", "/snapshot/capabilities/telepathy additionalProperties schema"}},
	})
}

// TestSessionRecordRules covers the session record's rule and a few schema checks.
func TestSessionRecordRules(t *testing.T) {
	rec := `{"schema_version":1,"session_id":"S-20260301-1","agent_id":"a","role":"implementer","status":"running","started_at":"2026-03-01T12:00:00Z","mode":null,"closed_at":null}`
	runRuleCases(t, []ruleCase{
		{"ok", KindSession, []byte(rec), nil},
		{"schema_version 1.0", KindSession, edit(rec, "/schema_version", "1.0"), nil},
		{"prefix", KindSession, edit(rec, "/session_id", `"20260301-1"`), []string{"/session_id session-id-prefix rule"}},
		{"schema_version 2", KindSession, edit(rec, "/schema_version", "2"), []string{"/schema_version const schema"}},
		{"date-time needs seconds", KindSession, edit(rec, "/started_at", `"2026-03-01T12:00Z"`), []string{"/started_at format schema"}},
		{"bad mode", KindSession, edit(rec, "/mode", `"chat"`), []string{"/mode enum schema"}},
	})
}
