package contract

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Document kinds accepted by [Validate] and [Decode].
const (
	KindEvent               = "event"
	KindCommand             = "command"
	KindCommandResult       = "command-result"
	KindRun                 = "run"
	KindView                = "view"
	KindSession             = "session"
	KindSnapshot            = "snapshot"
	KindLineage             = "lineage"
	KindInheritance         = "inheritance"
	KindInheritedContext    = "inherited-context"
	KindContinuationRequest = "continuation-request"
	KindContinuationResult  = "continuation-result"
	KindActiveBranch        = "active-branch"
)

// DocumentKinds lists every kind [Validate] knows.
var DocumentKinds = []string{
	KindEvent, KindCommand, KindCommandResult, KindRun, KindView, KindSession, KindSnapshot,
	KindLineage, KindInheritance, KindInheritedContext, KindContinuationRequest,
	KindContinuationResult, KindActiveBranch,
}

var plainSchemas = map[string]*schema{
	KindCommandResult:       commandResultSchema,
	KindRun:                 runSchema,
	KindSession:             sessionRecordSchema,
	KindSnapshot:            snapshotSchema,
	KindLineage:             lineageSchema,
	KindInheritance:         inheritanceSchema,
	KindInheritedContext:    inheritedContextSchema,
	KindContinuationRequest: continuationRequestSchema,
	KindContinuationResult:  continuationResultSchema,
	KindActiveBranch:        activeBranchSchema,
}

// Validate parses data as one JSON document of the given kind and checks it against the
// schema and the contract rules. It returns nil when the document is valid, a
// *[ValidationError] listing every problem otherwise (parse failures included, as one problem
// of layer "json"), or a plain error for an unknown kind.
func Validate(kind string, data []byte, lim Limits) error {
	return check(kind, data, lim, nil)
}

// check parses and validates data and, when it is valid, calls use with the parsed value
// (which is only valid during the call: its strings and arrays belong to a pooled parser).
func check(kind string, data []byte, lim Limits, use func(v *Value)) error {
	p := getParser(data, lim.orDefault(), true)
	defer p.release()
	var err error
	p.root, err = p.document()
	if err != nil {
		return syntaxProblem(err)
	}
	v := &p.root
	probs, err := ValidateValue(kind, v)
	if err != nil {
		return err
	}
	if len(probs) > 0 {
		return &ValidationError{Problems: probs}
	}
	if use != nil {
		use(v)
	}
	return nil
}

func syntaxProblem(err error) error {
	se := err.(*SyntaxError)
	return &ValidationError{Problems: []Problem{{Path: se.Path, Rule: se.Rule, Layer: LayerJSON,
		Message: fmt.Sprintf("%s (at byte %d)", se.Msg, se.Offset)}}}
}

// ValidateValue checks a parsed value against the schema and rules of kind and returns the
// problems found (none when valid). It fails only for an unknown kind.
func ValidateValue(kind string, v *Value) ([]Problem, error) {
	var c checker
	switch kind {
	case KindEvent:
		c.event(v)
	case KindCommand:
		c.command(v)
	case KindView:
		c.view(v)
	default:
		s, ok := plainSchemas[kind]
		if !ok {
			return nil, fmt.Errorf("unknown document kind %q (known: %v)", kind, DocumentKinds)
		}
		c.check(v, s)
		if len(c.problems) == 0 {
			c.plainRules(kind, v)
		}
	}
	return c.result(), nil
}

// event validates an AgentSessionEvent: the envelope, then the payload chosen by eventType,
// then (when the shape is right) the event rules of [Rules].
func (c *checker) event(v *Value) {
	c.check(v, eventHeader)
	if v.Kind != KindObject {
		return
	}
	et := v.Get("eventType")
	pl := v.Get("payload")
	if et == nil || et.Kind != KindString || pl == nil || pl.Kind != KindObject {
		return
	}
	ps, ok := payloadSchemas[et.Str]
	if !ok {
		return
	}
	before := len(c.problems)
	c.push("payload")
	c.checkObject(pl, ps)
	c.pop()
	if len(c.problems) == 0 && before == 0 {
		c.eventRules(v, et.Str, pl)
	}
}

func strField(v *Value, name string) (string, bool) {
	f := v.Get(name)
	if f == nil || f.Kind != KindString {
		return "", false
	}
	return f.Str, true
}

// runStatusTimestamp names the timestamp each run status needs (rule run-status-timestamp).
var runStatusTimestamp = map[string]string{
	RunStatusRunning:   "startedAt",
	RunStatusStopping:  "stoppingRequestedAt",
	RunStatusStopped:   "stoppedAt",
	RunStatusCompleted: "completedAt",
	RunStatusFailed:    "failedAt",
}

// IsTerminal reports whether a run status is terminal (stopped, completed, failed).
func IsTerminal(status string) bool {
	return status == RunStatusStopped || status == RunStatusCompleted || status == RunStatusFailed
}

func (c *checker) eventRules(v *Value, eventType string, pl *Value) {
	runID, hasRun := strField(v, "runId")
	switch eventType {
	case "steer":
		target, _ := strField(pl, "targetRunId")
		if !hasRun || runID != target {
			c.rule("/runId", "steer-run-id", fmt.Sprintf("a steer event's runId must equal payload.targetRunId (%q)", target))
		}
		status, _ := strField(pl, "status")
		hasErr := pl.Get("error") != nil
		if status == "failed" && !hasErr {
			c.rule("/payload/error", "steer-error-status", "a failed steer needs payload.error")
		} else if status != "failed" && hasErr {
			c.rule("/payload/error", "steer-error-status", fmt.Sprintf("payload.error is only allowed when status is failed, not %q", status))
		}
	case "summary":
		pr, _ := strField(pl, "runId")
		if !hasRun || runID != pr {
			c.rule("/runId", "summary-run-id", fmt.Sprintf("a summary event's runId must equal payload.runId (%q)", pr))
		}
	case "status":
		if !hasRun {
			return
		}
		if _, ok := strField(v, "sourceMessageId"); !ok {
			c.rule("/sourceMessageId", "run-status-source-message", "a run status event (status with runId) needs sourceMessageId, the message that started the run")
		}
		status, _ := strField(pl, "status")
		if ts, ok := runStatusTimestamp[status]; ok && pl.Get(ts) == nil {
			c.rule("/payload/"+ts, "run-status-timestamp", fmt.Sprintf("a run status %q needs payload.%s", status, ts))
		}
		if IsTerminal(status) && pl.Get("durationMs") == nil {
			c.rule("/payload/durationMs", "run-status-duration", fmt.Sprintf("a terminal run status %q needs payload.durationMs", status))
		}
	}
}

func (c *checker) command(v *Value) {
	c.check(v, commandHeader)
	if v.Kind != KindObject {
		return
	}
	ct, _ := strField(v, "commandType")
	pl := v.Get("payload")
	ps, ok := commandPayloadSchemas[ct]
	if !ok || pl == nil || pl.Kind != KindObject {
		return
	}
	c.push("payload")
	c.checkObject(pl, ps)
	c.pop()
	if len(c.problems) > 0 {
		return
	}
	runID, hasRun := strField(v, "runId")
	if commandPolicies[ct].NeedsRunID && !hasRun {
		c.rule("/runId", "command-needs-run-id", fmt.Sprintf("a %s command needs runId, the run it targets", ct))
	}
	switch ct {
	case "retry-summary":
		if s, _ := strField(pl, "sourceRunId"); hasRun && s != runID {
			c.rule("/payload/sourceRunId", "retry-summary-run-id", fmt.Sprintf("payload.sourceRunId must equal the command's runId (%q)", runID))
		}
	case "steer":
		if s, _ := strField(pl, "targetRunId"); hasRun && s != runID {
			c.rule("/payload/targetRunId", "steer-run-id", fmt.Sprintf("payload.targetRunId must equal the command's runId (%q)", runID))
		}
	}
}

func (c *checker) view(v *Value) {
	c.check(v, viewSchema)
	if v.Kind != KindObject {
		return
	}
	evs := v.Get("events")
	if evs == nil || evs.Kind != KindArray {
		return
	}
	c.push("events")
	for i := range evs.Elems {
		c.push(strconv.Itoa(i))
		var sub checker
		sub.event(&evs.Elems[i])
		for _, p := range sub.problems {
			p.Path = c.pointer() + p.Path
			c.record(p)
		}
		c.dropped += sub.dropped
		c.pop()
	}
	c.pop()
	if len(c.problems) > 0 {
		return
	}
	sid, _ := strField(v, "sessionId")
	last := int64(-1)
	ids := map[string]bool{}
	keys := map[string]bool{}
	for i := range evs.Elems {
		e := &evs.Elems[i]
		at := "/events/" + strconv.Itoa(i)
		if s, _ := strField(e, "sessionId"); s != sid {
			c.rule(at+"/sessionId", "view-session-id", fmt.Sprintf("event belongs to session %q, not the view's %q", s, sid))
		}
		seq, _ := parseLiteral(e.Get("sequence").Raw).int64()
		if i > 0 && seq <= last {
			c.rule(at+"/sequence", "view-sequence-order", fmt.Sprintf("sequence %d does not follow %d; sequences must strictly increase", seq, last))
		}
		last = seq
		if id, _ := strField(e, "eventId"); ids[id] {
			c.rule(at+"/eventId", "view-unique-event-id", fmt.Sprintf("eventId %q appears twice", id))
		} else {
			ids[id] = true
		}
		if k, _ := strField(e, "idempotencyKey"); keys[k] {
			c.rule(at+"/idempotencyKey", "view-unique-idempotency-key", fmt.Sprintf("idempotencyKey %q appears twice", k))
		} else {
			keys[k] = true
		}
	}
	ls, _ := parseLiteral(v.Get("lastSequence").Raw).int64()
	if ls != last {
		c.rule("/lastSequence", "view-last-sequence", fmt.Sprintf("lastSequence is %d but the last event's sequence is %d (-1 when there are no events)", ls, last))
	}
}

// plainRules applies the cross-field rules of the objects without a payload union.
func (c *checker) plainRules(kind string, v *Value) {
	switch kind {
	case KindCommandResult:
		outcome, _ := strField(v, "outcome")
		failed := outcome == "rejected" || outcome == "failed"
		if hasErr := v.Get("error") != nil; failed && !hasErr {
			c.rule("/error", "result-error-outcome", fmt.Sprintf("outcome %q needs error", outcome))
		} else if !failed && hasErr {
			c.rule("/error", "result-error-outcome", fmt.Sprintf("error is only allowed when outcome is rejected or failed, not %q", outcome))
		}
		status, _ := strField(v, "sessionStatus")
		switch term, _ := strField(v, "termination"); term {
		case "requested":
			if status != RunStatusStopping {
				c.rule("/termination", "result-termination", fmt.Sprintf("termination requested needs sessionStatus stopping, not %q", status))
			}
		case "confirmed":
			if !IsTerminal(status) {
				c.rule("/termination", "result-termination", fmt.Sprintf("termination confirmed needs a terminal sessionStatus, not %q", status))
			}
		}
		if op := v.Get("operation"); op != nil {
			ab := op.Get("activeBranch")
			if abl := ab.Get("lineage"); abl == nil || !sameJSON(abl, op.Get("lineage")) {
				c.rule("/operation/activeBranch/lineage", "result-operation-lineage", "operation.activeBranch.lineage must equal operation.lineage")
			}
			runID, _ := strField(v, "runId")
			if br, _ := strField(ab, "runId"); br != runID {
				c.rule("/operation/activeBranch/runId", "result-operation-run-id", fmt.Sprintf("operation.activeBranch.runId must equal the result's runId (%q)", runID))
			}
		}
	case KindRun:
		for _, p := range RunProblems(func(name string) bool { return v.Get(name) != nil }, mustStr(v, "status")) {
			c.record(p)
		}
	case KindSession:
		if s, _ := strField(v, "session_id"); len(s) < 2 || s[:2] != "S-" {
			c.rule("/session_id", "session-id-prefix", fmt.Sprintf("session_id %s must start with \"S-\"", quote(s)))
		}
	}
}

func mustStr(v *Value, name string) string { s, _ := strField(v, name); return s }

// RunProblems checks the invariants of a run record (rule run-invariant) given which optional
// fields are present and its status.
func RunProblems(has func(string) bool, status string) []Problem {
	var out []Problem
	add := func(path, msg string) {
		out = append(out, Problem{Path: path, Rule: "run-invariant", Layer: LayerRule, Message: msg})
	}
	terminalTS := 0
	for _, f := range []string{"stoppedAt", "completedAt", "failedAt"} {
		if has(f) {
			terminalTS++
		}
	}
	if terminalTS > 1 {
		add("", "a run has at most one of stoppedAt, completedAt, failedAt")
	}
	if IsTerminal(status) {
		if ts := runStatusTimestamp[status]; !has(ts) {
			add("/"+ts, fmt.Sprintf("a %s run needs %s", status, ts))
		}
		if !has("durationMs") {
			add("/durationMs", fmt.Sprintf("a %s run needs durationMs", status))
		}
	} else {
		if terminalTS > 0 {
			add("", fmt.Sprintf("a %s run has no terminal timestamp", status))
		}
		if has("durationMs") {
			add("/durationMs", fmt.Sprintf("durationMs is only present on a terminal run, not %s", status))
		}
	}
	if (status == RunStatusStopping || status == RunStatusStopped) && !has("stoppingRequestedAt") {
		add("/stoppingRequestedAt", fmt.Sprintf("a %s run needs stoppingRequestedAt", status))
	}
	return out
}

// sameJSON reports whether two parsed values are equal as JSON (object key order ignored).
func sameJSON(a, b *Value) bool {
	if a == nil || b == nil || a.Kind != b.Kind {
		return a == nil && b == nil
	}
	switch a.Kind {
	case KindString:
		return a.Str == b.Str
	case KindNumber:
		return a.Num == b.Num
	case KindBool:
		return a.Bool == b.Bool
	case KindArray:
		if len(a.Elems) != len(b.Elems) {
			return false
		}
		for i := range a.Elems {
			if !sameJSON(&a.Elems[i], &b.Elems[i]) {
				return false
			}
		}
	case KindObject:
		if len(a.Members) != len(b.Members) {
			return false
		}
		for i := range a.Members {
			if !sameJSON(&a.Members[i].Value, b.Get(a.Members[i].Key)) {
				return false
			}
		}
	}
	return true
}

// Decode validates data as a document of kind and decodes it into out (a pointer to the
// matching type: *Event, *Command, *CommandResult, *Run, *ViewModel, *SessionRecord, ...).
// Integers written as 1.0 or 1e2 are accepted and decoded as integers.
func Decode(kind string, data []byte, lim Limits, out any) error {
	var canon []byte
	if err := check(kind, data, lim, func(v *Value) { canon = canonical(kind, v) }); err != nil {
		return err
	}
	if err := json.Unmarshal(canon, out); err != nil {
		return fmt.Errorf("decode %s: %w", kind, err)
	}
	return nil
}

// DecodeEvent validates data as an event and decodes it.
func DecodeEvent(data []byte, lim Limits) (*Event, error) {
	var e Event
	if err := Decode(KindEvent, data, lim, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// DecodeCommand validates data as a command and decodes it.
func DecodeCommand(data []byte, lim Limits) (*Command, error) {
	var c Command
	if err := Decode(KindCommand, data, lim, &c); err != nil {
		return nil, err
	}
	return &c, nil
}
