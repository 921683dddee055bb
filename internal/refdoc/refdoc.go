// Package refdoc generates docs/reference.md, the reference for runtime and UI authors, from
// the contract package's own tables (the schemas, the command policies, the meanings of the
// enumerated values) and the API's error code table, so that the page cannot drift from what
// the server checks. Its test regenerates the page and fails when the committed one differs:
//
//	go test ./internal/refdoc -run TestReferenceDoc -update
//
// rewrites it. The package is used by that test only; no binary imports it.
package refdoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
)

// Path is where the page lives, relative to the repository root.
const Path = "docs/reference.md"

// RegenerateCommand is the command that rewrites the page; the page's header shows it.
const RegenerateCommand = "go test ./internal/refdoc -run TestReferenceDoc -update"

// Generate returns the reference page. It fails when a table lacks an entry the page needs
// or an example breaks the contract.
func Generate() ([]byte, error) {
	g := &gen{}
	g.header()
	g.conventions()
	if err := g.events(); err != nil {
		return nil, err
	}
	if err := g.commands(); err != nil {
		return nil, err
	}
	if err := g.sharedObjects(); err != nil {
		return nil, err
	}
	g.capabilities()
	if err := g.runs(); err != nil {
		return nil, err
	}
	if err := g.statuses(); err != nil {
		return nil, err
	}
	if err := g.errorCodes(); err != nil {
		return nil, err
	}
	return g.b.Bytes(), nil
}

type gen struct{ b bytes.Buffer }

func (g *gen) p(format string, args ...any) { fmt.Fprintf(&g.b, format+"\n", args...) }

func code(s string) string { return "`" + s + "`" }

func codes(list []string) string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = code(s)
	}
	return strings.Join(out, ", ")
}

// table writes a Markdown table; cells must not hold "|" or newlines.
func (g *gen) table(head []string, rows [][]string) {
	g.p("| %s |", strings.Join(head, " | "))
	g.p("|%s", strings.Repeat("---|", len(head)))
	for _, r := range rows {
		g.p("| %s |", strings.Join(r, " | "))
	}
	g.p("")
}

func (g *gen) header() {
	g.p("# Reference: events, commands, capabilities, statuses, error codes")
	g.p("")
	g.p("<!-- Generated from the contract package's tables by internal/refdoc. Do not edit by hand:")
	g.p("     change the tables, then run: %s -->", RegenerateCommand)
	g.p("")
	g.p("This page is for the authors of agent runtimes (which append events and follow commands) and of")
	g.p("user interfaces (which read the log, draw it and send commands). It is generated from the tables")
	g.p("the server itself checks with, and a test fails when it is out of date; to regenerate it, run")
	g.p("`%s`. How the checks work and how to read an error: [contract.md](contract.md).", RegenerateCommand)
	g.p("The protocol a runtime follows: [runtime.md](runtime.md). Every endpoint: [api.md](api.md).")
	g.p("")
	g.p("- [Conventions](#conventions)")
	g.p("- [Events](#events): the envelope and the %d event types", len(contract.EventTypes))
	g.p("- [Commands](#commands): the envelope, the policy table, the %d command types, the command result", len(contract.CommandTypes))
	g.p("- [Shared objects](#shared-objects)")
	g.p("- [Capabilities](#capabilities)")
	g.p("- [Runs](#runs): run statuses and their transitions")
	g.p("- [Session record status and run status](#session-record-status-and-run-status), the")
	g.p("  [session record](#session-record) and the [view model](#view-model)")
	g.p("- [Error codes](#error-codes)")
	g.p("")
}

func (g *gen) conventions() {
	g.p("## Conventions")
	g.p("")
	g.p("- **Objects are closed**: a member a table does not list is refused (rule `additionalProperties`),")
	g.p("  except inside values of type *any JSON* (message `parts`, tool `input` and `output`, ...).")
	g.p("- **Lengths count Unicode code points**, not bytes: an identifier of 1–256 characters may hold")
	g.p("  256 emoji.")
	g.p("- **Integers** are whole numbers in any notation (`1`, `1.0`, `1e2`), within the JavaScript safe")
	g.p("  range (at most %d).", contract.MaxSafeInteger)
	g.p("- **Timestamps** are RFC 3339 with a mandatory `Z` or `±hh:mm`, seconds and fraction optional, on")
	g.p("  a date that exists: `2026-03-01T12:00:00Z`, `2026-03-01T12:00Z`, `2026-03-01T12:00:00.123+05:30`.")
	g.p("  The session record's `*_at` fields are RFC 3339 date-times (seconds required).")
	g.p("- **Not blank** means at least one non-whitespace character.")
	g.p("- **Rules** are checked once the shape is right; each is named in the problem that reports it.")
	g.p("")
}

// typeText describes a shape's type, linking shared objects to their section.
func typeText(s *contract.Shape) string {
	var t string
	switch {
	case s.Type == "any":
		t = "any JSON"
	case s.Type == "array":
		t = "array of " + typeText(s.Items)
	case s.Type == "object" && s.Name == "event":
		t = "[event](#events)"
	case s.Type == "object" && s.Name != "":
		t = "[" + s.Name + "](#" + s.Name + "-object)"
	case s.Type == "object" && s.AnyFields && len(s.Fields) == 0:
		t = "object of any JSON"
	default:
		t = s.Type
	}
	if s.Nullable {
		t += " or null"
	}
	return t
}

// rulesText lists a shape's limits in words.
func rulesText(s *contract.Shape) string {
	var r []string
	switch {
	case s.Const != "":
		r = append(r, "always "+code(s.Const))
	case s.Enum != nil:
		r = append(r, "one of "+codes(s.Enum))
	}
	switch {
	case s.MinLength > 0 && s.MaxLength > 0:
		r = append(r, fmt.Sprintf("%d–%d characters", s.MinLength, s.MaxLength))
	case s.MinLength > 0:
		r = append(r, fmt.Sprintf("at least %d character%s", s.MinLength, plural(s.MinLength)))
	case s.MaxLength > 0:
		r = append(r, fmt.Sprintf("at most %d characters", s.MaxLength))
	}
	switch s.Format {
	case "timestamp":
		r = append(r, "timestamp")
	case "date-time":
		r = append(r, "RFC 3339 date-time")
	case "uri":
		r = append(r, "absolute URI")
	case "non-blank":
		r = append(r, "not blank")
	}
	if s.Const == "" {
		switch {
		case s.Minimum != nil && s.ExclusiveMinimum:
			r = append(r, fmt.Sprintf("> %d", *s.Minimum))
		case s.Minimum != nil && s.Maximum != nil:
			r = append(r, fmt.Sprintf("%d … %d", *s.Minimum, *s.Maximum))
		case s.Minimum != nil:
			r = append(r, fmt.Sprintf("≥ %d", *s.Minimum))
		}
		if s.Maximum != nil && (s.Minimum == nil || s.ExclusiveMinimum) {
			r = append(r, fmt.Sprintf("≤ %d", *s.Maximum))
		}
	}
	if s.MinItems > 0 {
		r = append(r, fmt.Sprintf("at least %d item%s", s.MinItems, plural(s.MinItems)))
	}
	if s.MaxItems > 0 {
		r = append(r, fmt.Sprintf("at most %d items", s.MaxItems))
	}
	if s.Type == "array" && s.Items != nil && s.Items.Type != "object" {
		if ir := rulesText(s.Items); ir != "" {
			r = append(r, "each: "+ir)
		}
	}
	return strings.Join(r, "; ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// fieldRows lists an object's fields, inline nested objects as dotted names (`steps[].id`).
func fieldRows(prefix string, s *contract.Shape) [][]string {
	var rows [][]string
	for _, f := range s.Fields {
		name := prefix + f.Name
		req := "no"
		if f.Required {
			req = "yes"
		}
		rows = append(rows, []string{code(name), typeText(f.Shape), req, rulesText(f.Shape)})
		switch sub := f.Shape; {
		case sub.Type == "object" && sub.Name == "" && len(sub.Fields) > 0:
			rows = append(rows, fieldRows(name+".", sub)...)
		case sub.Type == "array" && sub.Items.Type == "object" && sub.Items.Name == "" && len(sub.Items.Fields) > 0:
			rows = append(rows, fieldRows(name+"[].", sub.Items)...)
		}
	}
	return rows
}

func (g *gen) fields(s *contract.Shape) {
	if len(s.Fields) == 0 {
		g.p("No fields: the payload is `{}`.")
		g.p("")
		return
	}
	g.table([]string{"field", "type", "required", "rules"}, fieldRows("", s))
}

// example validates doc as kind and writes it in a JSON block, one top-level member a line.
func (g *gen) example(kind, what string, doc string) error {
	if err := contract.Validate(kind, []byte(doc), contract.Limits{}); err != nil {
		return fmt.Errorf("the example of %s breaks the contract: %w", what, err)
	}
	d := json.NewDecoder(strings.NewReader(doc))
	if _, err := d.Token(); err != nil { // {
		return fmt.Errorf("the example of %s: %w", what, err)
	}
	var members []string
	for d.More() {
		key, err := d.Token()
		if err != nil {
			return fmt.Errorf("the example of %s: %w", what, err)
		}
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return fmt.Errorf("the example of %s: %w", what, err)
		}
		members = append(members, fmt.Sprintf("  %q: %s", key, v))
	}
	g.p("```json")
	g.p("{\n%s\n}", strings.Join(members, ",\n"))
	g.p("```")
	g.p("")
	return nil
}

// rulesFor lists the rules of kind that apply to a type, or to every document when typ is "".
func rulesFor(kind, typ string) []contract.Rule {
	var out []contract.Rule
	for _, r := range contract.Rules {
		if r.Kind != kind {
			continue
		}
		for _, item := range strings.Split(r.AppliesTo, ", ") {
			if item == typ || strings.HasPrefix(item, typ+" ") || typ == "" {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

func (g *gen) rules(list []contract.Rule) {
	if len(list) == 0 {
		return
	}
	g.p("Rules:")
	g.p("")
	for _, r := range list {
		g.p("- `%s` (%s): %s.", r.Name, r.AppliesTo, r.Requires)
	}
	g.p("")
}

func (g *gen) events() error {
	env, err := contract.Describe(contract.KindEvent)
	if err != nil {
		return err
	}
	g.p("## Events")
	g.p("")
	g.p("An event (`AgentSessionEvent`) is one entry in a session's log. A runtime appends events with")
	g.p("`POST /v1/sessions/{id}/events`; a UI reads them with `GET /v1/sessions/{id}/events` or follows")
	g.p("them live on the stream. `eventType` selects the payload.")
	g.p("")
	g.p("### Envelope")
	g.p("")
	g.fields(env)
	g.p("The server assigns `sequence` (0, 1, 2, … per session): send any valid value, such as 0. The")
	g.p("`idempotencyKey` makes an append safe to retry: the same key with the same content answers")
	g.p("`duplicate`. Events that belong to a run carry its `runId`.")
	g.p("")
	g.p("| event type | what it is |")
	g.p("|---|---|")
	for _, et := range contract.EventTypes {
		purpose, ok := eventPurposes[et]
		if !ok {
			return fmt.Errorf("event type %s has no purpose in eventPurposes", et)
		}
		g.p("| [%s](#%s-event) | %s |", code(et), et, purpose)
	}
	g.p("")
	for i, et := range contract.EventTypes {
		ex, ok := eventExamples[et]
		if !ok {
			return fmt.Errorf("event type %s has no example in eventExamples", et)
		}
		pl, _ := contract.DescribeEventPayload(et)
		g.p("### `%s` event", et)
		g.p("")
		g.p("%s", eventPurposes[et])
		g.p("")
		g.fields(pl)
		if note, ok := eventNotes[et]; ok {
			g.p("%s", note)
			g.p("")
		}
		g.rules(rulesFor(contract.KindEvent, et))
		doc := fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"ev-%d","sessionId":"S-demo",%s"sequence":0,"idempotencyKey":"k-%d","occurredAt":"2026-03-01T12:00:%02dZ","eventType":%q,"payload":%s}`,
			i+1, ex.envelope, i+1, i, et, ex.payload)
		if err := g.example(contract.KindEvent, et+" event", doc); err != nil {
			return err
		}
	}
	return nil
}

func (g *gen) commands() error {
	env, err := contract.Describe(contract.KindCommand)
	if err != nil {
		return err
	}
	g.p("## Commands")
	g.p("")
	g.p("A command (`AgentSessionCommand`) is what a person or a program asks of a session: `POST")
	g.p("/v1/sessions/{id}/commands`. The server judges it by the policy table and, when it is")
	g.p("accepted, appends events to the log; the runtime sees them on its stream ([runtime.md](runtime.md)).")
	g.p("The answer is a [command result](#command-result).")
	g.p("")
	g.p("### Envelope")
	g.p("")
	g.fields(env)
	g.rules(rulesFor(contract.KindCommand, ""))
	g.p("### Policy table")
	g.p("")
	g.p("A command is judged in this order, and the first failing check answers: the capability")
	g.p("(`CAPABILITY_UNAVAILABLE`), the run it targets (`ACTIVE_RUN_NOT_FOUND`, `RUN_NOT_FOUND`,")
	g.p("`RUN_ALREADY_FINISHED`), what it points at (`APPROVAL_NOT_FOUND`, `TARGET_EVENT_NOT_FOUND`, ...),")
	g.p("the run status (`INVALID_SESSION_STATE`), and last the sequence rule (`SEQUENCE_CONFLICT`). The run")
	g.p("status is the status of the session's current (most recent) run; for a command that needs an")
	g.p("active run, it is the status of the target run.")
	g.p("")
	g.p("- `%s`: `expectedSequence` must equal the session's last sequence (-1 for an empty log), else", contract.SequenceMatchCurrent)
	g.p("  `SEQUENCE_CONFLICT` (read the new events and send the command again).")
	g.p("- `%s`: the command targets a run, not the head of the log; events appended since the sender", contract.SequenceTargetRun)
	g.p("  looked do not make it conflict while the target run is active.")
	g.p("")
	g.p("The same `idempotencyKey` again answers the first accepted result with outcome `duplicate` and")
	g.p("changes nothing. Rejections change nothing and are not stored.")
	g.p("")
	var rows [][]string
	for _, ct := range contract.CommandTypes {
		p, ok := contract.PolicyOf(ct)
		if !ok {
			return fmt.Errorf("command type %s has no policy", ct)
		}
		rows = append(rows, []string{"[" + code(ct) + "](#" + ct + "-command)", capText(p.Capability), statusesText(p), yesNo(p.NeedsRunID), code(p.Sequence), p.Effect})
	}
	g.table([]string{"command", "capability", "allowed run statuses", "needs `runId`", "sequence rule", "effect on the session"}, rows)
	for _, ct := range contract.CommandTypes {
		ex, ok := commandExamples[ct]
		if !ok {
			return fmt.Errorf("command type %s has no example in commandExamples", ct)
		}
		purpose, ok := commandPurposes[ct]
		if !ok {
			return fmt.Errorf("command type %s has no purpose in commandPurposes", ct)
		}
		p, _ := contract.PolicyOf(ct)
		pl, _ := contract.DescribeCommandPayload(ct)
		g.p("### `%s` command", ct)
		g.p("")
		g.p("%s Capability: %s. Allowed run statuses: %s. Needs `runId`: %s. Sequence rule: `%s`. Effect: %s.",
			purpose, capText(p.Capability), statusesText(p), yesNo(p.NeedsRunID), p.Sequence, p.Effect)
		g.p("")
		g.fields(pl)
		var own []contract.Rule
		for _, r := range rulesFor(contract.KindCommand, ct) {
			if r.Name != "command-needs-run-id" {
				own = append(own, r)
			}
		}
		g.rules(own)
		run := ""
		if ex.runID != "" {
			run = fmt.Sprintf(`"runId":%q,`, ex.runID)
		}
		doc := fmt.Sprintf(`{"contract":"AgentSessionCommand","commandId":"c-%s","sessionId":"S-demo",%s"idempotencyKey":"%s-1","expectedSequence":7,"issuedAt":"2026-03-01T12:05:00Z","commandType":%q,"payload":%s}`,
			ct, run, ct, ct, ex.payload)
		if err := g.example(contract.KindCommand, ct+" command", doc); err != nil {
			return err
		}
	}
	res, err := contract.Describe(contract.KindCommandResult)
	if err != nil {
		return err
	}
	g.p("### Command result")
	g.p("")
	g.p("The answer to every command (`AgentSessionCommandResult`). `sessionStatus` is the status of the")
	g.p("session's current run after the command, or `%s` when the session has no run yet", contract.StatusIdle)
	g.p("([why](#session-record-status-and-run-status)). HTTP status: 200 for `accepted` and `duplicate`; the")
	g.p("status of the error code for `rejected` and `failed` (the body is the result either way).")
	g.p("")
	g.fields(res)
	g.rules(rulesFor(contract.KindCommandResult, ""))
	return g.example(contract.KindCommandResult, "command result",
		`{"contract":"AgentSessionCommandResult","commandId":"c-stop","sessionId":"S-demo","runId":"r-1","idempotencyKey":"stop-1","outcome":"accepted","sessionStatus":"stopping","acceptedSequence":8,"resultEventIds":["cmd-8f10fb38aa7343cf7d3b1e48-0"],"termination":"requested","occurredAt":"2026-03-01T12:05:00.120Z"}`)
}

func capText(c string) string {
	if c == "" {
		return "none"
	}
	return "[" + code(c) + "](#capabilities)"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// statusesText says in which run statuses a command is allowed: "any", or which run must be
// in which statuses.
func statusesText(p contract.CommandPolicy) string {
	if p.AllowedStatuses == nil {
		return "any"
	}
	if p.NeedsActiveRun {
		return "the target run is " + orList(p.AllowedStatuses)
	}
	return "the current run is " + orList(p.AllowedStatuses)
}

func orList(list []string) string {
	quoted := make([]string, len(list))
	for i, s := range list {
		quoted[i] = code(s)
	}
	if len(quoted) == 1 {
		return quoted[0]
	}
	return strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
}

// sharedPurposes says what each shared object is.
var sharedPurposes = map[string]string{
	"command-error":        "The error of a rejected or failed command result, and of a failed `steer` event. `code` is a command error code ([Error codes](#error-codes)).",
	"inheritance":          "What a new thread takes from its source (fork, edit-and-rerun, continuation); see [forks.md](forks.md).",
	"lineage":              "Where a forked thread came from (a thread is a session).",
	"active-branch":        "The branch a session currently works on, after a fork.",
	"unavailable-resource": "A resource of the source that a new thread does not get, and why.",
	"snapshot":             "The session's mode, model and capabilities, given at creation (`POST /v1/sessions`) and replaced as a whole by `PATCH /v1/sessions/{id}` (`sessiond patch`); commands are judged against the current one.",
	"capabilities":         "The capability flags of a snapshot; an absent flag takes its default ([Capabilities](#capabilities)).",
}

func (g *gen) sharedObjects() error {
	g.p("## Shared objects")
	g.p("")
	g.p("Objects that appear in several places; the tables above link here.")
	g.p("")
	for _, n := range contract.SharedShapes {
		s, _ := contract.DescribeShared(n)
		purpose, ok := sharedPurposes[n]
		if !ok {
			return fmt.Errorf("shared object %s has no purpose in sharedPurposes", n)
		}
		g.p("### `%s` object", n)
		g.p("")
		g.p("%s", purpose)
		g.p("")
		if n == "capabilities" {
			g.p("Each of the %d capabilities is an optional boolean; see [Capabilities](#capabilities).", len(contract.CapabilityNames))
			g.p("")
			continue
		}
		g.fields(s)
	}
	return nil
}

func (g *gen) capabilities() {
	g.p("## Capabilities")
	g.p("")
	g.p("A session's snapshot says which capabilities its agent has. An absent flag takes its default:")
	g.p("`text` is on, every other one is off. In sessiond a capability **gates commands**: a command")
	g.p("whose policy needs a capability the snapshot lacks is rejected with `CAPABILITY_UNAVAILABLE`.")
	g.p("Events are never gated: a runtime may append any event type whatever the snapshot says. For")
	g.p("the other capabilities the flag is a promise to UIs about which event types to expect: a")
	g.p("capability is honest only if the session can show the events or commands behind it.")
	g.p("`sessiond create` turns on the preset of its `--snapshot-mode` (`chat` or `work`, default `work`);")
	g.p("`--cap` adds more. `sessiond patch SESSION --enable CAP` (`PATCH /v1/sessions/{id}` with a")
	g.p("`snapshot`) turns one on later; commands are judged against the current snapshot.")
	g.p("")
	var rows [][]string
	for _, name := range contract.CapabilityNames {
		var gates []string
		for _, ct := range contract.CommandTypes {
			if p, _ := contract.PolicyOf(ct); p.Capability == name {
				gates = append(gates, "the `"+ct+"` command")
			}
		}
		gated := "nothing"
		if len(gates) > 0 {
			gated = strings.Join(gates, ", ")
		}
		var presets []string
		for _, mode := range []string{"chat", "work"} {
			if slices.Contains(contract.CapabilityPresets[mode], name) {
				presets = append(presets, mode)
			}
		}
		ev := contract.CapabilityEvidence[name]
		var shown []string
		for _, e := range ev.Events {
			shown = append(shown, "["+code(e)+"](#"+e+"-event) events")
		}
		for _, c := range ev.Commands {
			shown = append(shown, "["+code(c)+"](#"+c+"-command) commands")
		}
		rows = append(rows, []string{code(name), strconv.FormatBool(name == "text"), strings.Join(presets, ", "), gated, strings.Join(shown, ", ")})
	}
	g.table([]string{"capability", "default", "in preset", "gates", "shown by"}, rows)
}

func (g *gen) runs() error {
	run, err := contract.Describe(contract.KindRun)
	if err != nil {
		return err
	}
	g.p("## Runs")
	g.p("")
	g.p("A run is one execution of the agent in a session, started by a source message. Runs are not")
	g.p("appended directly: the server keeps them from the session's *run status events* (`status` events")
	g.p("with `runId` and `sourceMessageId`). The first one creates the run; each later one must be a")
	g.p("transition the table allows (a status may always be re-applied to itself), else `422")
	g.p("INVALID_RUN_TRANSITION` and nothing of the batch is written. A session has one active run at a")
	g.p("time: a run status event that would create a second active run is refused with `409")
	g.p("INVALID_SESSION_STATE`. `GET /v1/sessions/{id}/runs` lists them.")
	g.p("")
	var rows [][]string
	for _, s := range contract.RunStatuses {
		next := "none (terminal)"
		if t := contract.RunTransitions(s); len(t) > 0 {
			next = codes(t)
		}
		needs := "—"
		if ts := contract.RunStatusTimestamp(s); ts != "" {
			needs = code(ts)
		}
		if contract.IsTerminal(s) {
			needs += ", `durationMs`"
		}
		m := contract.RunStatusMeaning(s)
		if m == "" {
			return fmt.Errorf("run status %s has no meaning", s)
		}
		rows = append(rows, []string{code(s), next, needs, m})
	}
	g.table([]string{"status", "may become", "its run status event needs", "meaning"}, rows)
	g.p("Terminal statuses: `stopped`, `completed`, `failed`; the other four are active. The run object:")
	g.p("")
	g.fields(run)
	g.rules(rulesFor(contract.KindRun, ""))
	return nil
}

func (g *gen) statuses() error {
	rec, err := contract.Describe(contract.KindSession)
	if err != nil {
		return err
	}
	g.p("## Session record status and run status")
	g.p("")
	g.p("Two different status words describe a session, and they answer different questions:")
	g.p("")
	g.p("- The **record status** (`record.status` in `GET /v1/sessions/{id}`, `status` in the session")
	g.p("  record) is the session's *lifecycle*: is it open for work, paused, closed, silent, archived?")
	g.p("  It changes by `PATCH /v1/sessions/{id}`, heartbeats, the stale sweeper, archive and restore")
	g.p("  ([lifecycle.md](lifecycle.md)).")
	g.p("- The **run status** (`currentRun.status` in the session resource, `status` in the view model,")
	g.p("  `sessionStatus` in a command result) is what the agent is doing *right now*: the status of the")
	g.p("  session's current (most recent) run, or `%s` when it has had no run yet.", contract.StatusIdle)
	g.p("")
	g.p("So a new session is `running` in its record (it is open and its runtime may work) but `%s` in", contract.StatusIdle)
	g.p("its view (nothing has run yet). A session can be `running` with its last run `completed` (open,")
	g.p("waiting for the next message), or `paused` while a run is still `running` (the owner set it")
	g.p("aside; the runtime decides what to do). Changing one status does not change the other, with one")
	g.p("exception: when the stale sweeper marks a silent session `stale`, it first fails its active run.")
	g.p("")
	var rows [][]string
	for _, s := range contract.SessionStatuses {
		m := contract.SessionStatusMeaning(s)
		if m == "" {
			return fmt.Errorf("session status %s has no meaning", s)
		}
		rows = append(rows, []string{code(s), m})
	}
	g.p("Record statuses (the allowed changes are in [lifecycle.md](lifecycle.md#statuses-and-allowed-changes)):")
	g.p("")
	g.table([]string{"record status", "meaning"}, rows)
	rows = nil
	for _, s := range contract.SessionRunStatuses {
		rows = append(rows, []string{code(s), contract.RunStatusMeaning(s)})
	}
	g.p("Run status values, as `sessionStatus` and the view's `status` report them:")
	g.p("")
	g.table([]string{"run status", "meaning"}, rows)
	g.p("### Session record")
	g.p("")
	g.p("`record` in the session resource (`GET /v1/sessions/{id}`). The server sets `schema_version`,")
	g.p("`status`, `started_at`, `updated_at`, `last_heartbeat_at`, `closed_at` and `archive_path`; create")
	g.p("and `PATCH` take the others ([api.md](api.md#sessions)).")
	g.p("")
	g.fields(rec)
	g.rules(rulesFor(contract.KindSession, ""))
	view, err := contract.Describe(contract.KindView)
	if err != nil {
		return err
	}
	g.p("### View model")
	g.p("")
	g.p("`GET /v1/sessions/{id}/view` (`AgentSessionViewModel`): the snapshot, the run status, and every")
	g.p("event of the log in order. `resumable` is the latest `resume` event's flag, false when there is none.")
	g.p("")
	g.fields(view)
	g.rules(rulesFor(contract.KindView, ""))
	return nil
}

func (g *gen) errorCodes() error {
	g.p("## Error codes")
	g.p("")
	g.p("Every failed request answers `{\"error\":{\"code\":…,\"message\":…}}` with the code's HTTP status")
	g.p("([api.md](api.md#errors)); a rejected or failed command answers its command result, whose")
	g.p("`error.code` is one of the command error codes, with the same HTTP status. Branch on the code;")
	g.p("the message says what to do next. A code marked retryable refused the request for the server's")
	g.p("state, not the request's: the same request, sent again unchanged (the same idempotency keys),")
	g.p("is safe and may succeed; the server's `Retry-After` header gives the wait it suggests. Every")
	g.p("other code is final for the request as sent.")
	g.p("")
	var rows [][]string
	for _, c := range api.Codes() {
		m := api.CodeMeaning(c)
		if m == "" {
			return fmt.Errorf("error code %s has no meaning", c)
		}
		inCommand := slices.Contains(contract.ErrorCodes, c)
		where := "HTTP API"
		switch cm := contract.CommandErrorMeaning(c); {
		case inCommand && cm != m:
			where = "HTTP API, command result"
			m = "HTTP API: " + m + ". Command result: " + cm
		case inCommand:
			where = "command result"
		}
		st := api.HTTPStatus(c)
		retry := "no"
		if r := contract.RetryFor(c); r.Retryable {
			retry = "yes"
			if r.AfterSeconds > 0 {
				retry = fmt.Sprintf("yes, after %d s", r.AfterSeconds)
			}
		}
		rows = append(rows, []string{code(string(c)), fmt.Sprintf("%d %s", st, http.StatusText(st)), where, retry, m})
	}
	g.table([]string{"code", "HTTP status", "answered in", "retryable", "meaning"}, rows)
	return nil
}
