package openapigen

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/wire"
)

// obj is a JSON object of the document.
type obj = map[string]any

// schemas collects the document's components/schemas: contract objects from the contract's own
// schema tables ([contract.Describe]), API objects from the Go types the server encodes
// (reflection over their JSON tags), so neither can drift from what the server sends.
type schemas struct {
	defs  obj
	names map[reflect.Type]string // Go type → component name, once generated
	err   error
}

func newSchemas() *schemas {
	return &schemas{defs: obj{}, names: map[reflect.Type]string{}}
}

func ref(name string) obj { return obj{"$ref": "#/components/schemas/" + name} }

// contractKinds maps the contract's Go types to the document kind whose schema they encode.
var contractKinds = map[reflect.Type]struct{ kind, name string }{
	reflect.TypeFor[contract.Run]():                 {contract.KindRun, "Run"},
	reflect.TypeFor[contract.SessionRecord]():       {contract.KindSession, "SessionRecord"},
	reflect.TypeFor[contract.Snapshot]():            {contract.KindSnapshot, "Snapshot"},
	reflect.TypeFor[contract.Lineage]():             {contract.KindLineage, "Lineage"},
	reflect.TypeFor[contract.ActiveBranch]():        {contract.KindActiveBranch, "ActiveBranch"},
	reflect.TypeFor[contract.CommandResult]():       {contract.KindCommandResult, "AgentSessionCommandResult"},
	reflect.TypeFor[contract.ContinuationResult]():  {contract.KindContinuationResult, "ContinuationResult"},
	reflect.TypeFor[contract.ContinuationRequest](): {contract.KindContinuationRequest, "ContinuationRequest"},
	reflect.TypeFor[contract.ViewModel]():           {contract.KindView, "ViewModel"},
}

// payloadTypes maps the contract's payload Go types to their event type.
var payloadTypes = map[reflect.Type]string{
	reflect.TypeFor[contract.MessagePayload]():       "message",
	reflect.TypeFor[contract.ReasoningPayload]():     "reasoning",
	reflect.TypeFor[contract.PlanPayload]():          "plan",
	reflect.TypeFor[contract.TaskPayload]():          "task",
	reflect.TypeFor[contract.ToolPayload]():          "tool",
	reflect.TypeFor[contract.ApprovalPayload]():      "approval",
	reflect.TypeFor[contract.StatusPayload]():        "status",
	reflect.TypeFor[contract.ArtifactPayload]():      "artifact",
	reflect.TypeFor[contract.UsagePayload]():         "usage",
	reflect.TypeFor[contract.ResumePayload]():        "resume",
	reflect.TypeFor[contract.ErrorPayload]():         "error",
	reflect.TypeFor[contract.DiffPayload]():          "diff",
	reflect.TypeFor[contract.WorkspaceFilePayload](): "workspace-file",
	reflect.TypeFor[contract.TerminalPayload]():      "terminal",
	reflect.TypeFor[contract.TestResultPayload]():    "test-result",
	reflect.TypeFor[contract.SteerPayload]():         "steer",
	reflect.TypeFor[contract.SummaryPayload]():       "summary",
}

// typeNames renames API types whose Go name is taken by a contract object or is too vague.
var typeNames = map[reflect.Type]string{
	reflect.TypeFor[wire.Lineage]():     "LineageTree",
	reflect.TypeFor[wire.LineageNode](): "LineageTreeNode",
	reflect.TypeFor[wire.Message]():     "TranscriptMessage",
	reflect.TypeFor[wire.Reasoning]():   "TranscriptReasoning",
	reflect.TypeFor[wire.Terminal]():    "TranscriptTerminal",
	reflect.TypeFor[wire.Usage]():       "TranscriptUsage",
	reflect.TypeFor[wire.Phase]():       "AssessmentPhase",
	reflect.TypeFor[wire.Note]():        "ArchiveNote",
	reflect.TypeFor[api.Error]():        "Error",
}

// nilSlices lists the types whose slices the server sends as null when empty (the transcript
// keeps "none yet" as null).
var nilSlices = map[reflect.Type]bool{
	reflect.TypeFor[wire.Transcript](): true,
}

// requestRequired lists, for each request body type, the fields the server requires; the
// others may be left out (a request type's fields are optional unless listed here).
var requestRequired = map[reflect.Type][]string{
	reflect.TypeFor[api.CreateSessionRequest](): {"agent_id", "role", "snapshot"},
	reflect.TypeFor[api.PatchSessionRequest]():  {"updated_by_gate"},
	reflect.TypeFor[api.WarmRequest]():          nil,
	reflect.TypeFor[api.ArchiveRequest]():       nil,
	reflect.TypeFor[api.RestoreRequest]():       nil,
	reflect.TypeFor[wire.AssessRequest]():       nil,
	reflect.TypeFor[wire.Note]():                nil,
}

// fieldOverrides gives the schema of fields whose Go type says less than the wire does.
var fieldOverrides = map[string]func(s *schemas) obj{
	// The events of a page are stored contract events, sent as they were stored.
	"EventPage.events": func(s *schemas) obj {
		return obj{"type": "array", "items": s.contractEvent()}
	},
	// An error's code is one of the API's codes.
	"Error.code": func(s *schemas) obj {
		return ref("ErrorCode")
	},
}

// payloadName is the component name of an event type's payload: "test-result" → TestResultPayload.
func payloadName(eventType string) string {
	return camel(eventType) + "Payload"
}

func camel(s string) string {
	var b strings.Builder
	for _, part := range strings.Split(s, "-") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

// sharedName is the component name of a shared contract object ([contract.SharedShapes]).
func sharedName(name string) string {
	if name == "event" {
		return "AgentSessionEvent"
	}
	return camel(name)
}

// ofType returns the schema of a Go value the server encodes.
func (s *schemas) ofType(t reflect.Type) obj {
	if t == reflect.TypeFor[json.RawMessage]() {
		return obj{}
	}
	if t == reflect.TypeFor[contract.ErrorCode]() {
		return obj{"type": "string"}
	}
	if t == reflect.TypeFor[time.Time]() {
		return obj{"type": "string", "format": "date-time"}
	}
	if ck, ok := contractKinds[t]; ok {
		return s.contractKind(ck.kind, ck.name)
	}
	if et, ok := payloadTypes[t]; ok {
		return s.payload(et)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return nullable(s.ofType(t.Elem()))
	case reflect.String:
		return obj{"type": "string"}
	case reflect.Bool:
		return obj{"type": "boolean"}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return obj{"type": "integer"}
	case reflect.Float64:
		return obj{"type": "number"}
	case reflect.Slice:
		return obj{"type": "array", "items": s.ofType(t.Elem())}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			break
		}
		if t.Elem().Kind() == reflect.Interface {
			return obj{"type": "object"}
		}
		return obj{"type": "object", "additionalProperties": s.ofType(t.Elem())}
	case reflect.Struct:
		return s.structRef(t)
	}
	s.fail(fmt.Errorf("no schema for Go type %s", t))
	return obj{}
}

func (s *schemas) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// nullable accepts null besides what sch accepts.
func nullable(sch obj) obj {
	if _, ok := sch["$ref"]; ok {
		return obj{"oneOf": []any{sch, obj{"type": "null"}}}
	}
	c := obj{}
	for k, v := range sch {
		c[k] = v
	}
	switch t := c["type"].(type) {
	case string:
		c["type"] = []any{t, "null"}
	case nil:
		return c // any value
	}
	if e, ok := c["enum"].([]any); ok {
		c["enum"] = append(append([]any(nil), e...), nil)
	}
	return c
}

// structRef generates the component of an API struct (once) and returns a reference to it.
func (s *schemas) structRef(t reflect.Type) obj {
	if name, ok := s.names[t]; ok {
		return ref(name)
	}
	name := t.Name()
	if n, ok := typeNames[t]; ok {
		name = n
	}
	if _, taken := s.defs[name]; taken {
		s.fail(fmt.Errorf("component %s: two types have this name (%s); add one to typeNames", name, t))
	}
	s.names[t] = name
	s.defs[name] = obj{} // reserve: a type may refer to itself
	props, required := obj{}, []any{}
	s.fields(t, name, props, &required)
	def := obj{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		def["required"] = required
	}
	s.defs[name] = def
	return ref(name)
}

// fields adds the JSON fields of the struct t, the component name, to props and required.
func (s *schemas) fields(t reflect.Type, name string, props obj, required *[]any) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" {
			continue
		}
		jname, opts, _ := strings.Cut(tag, ",")
		if jname == "" && f.Anonymous && f.Type.Kind() == reflect.Struct {
			// An embedded struct: encoding/json puts its fields beside the outer ones.
			s.embed(f.Type, name, props, required)
			continue
		}
		if jname == "" {
			jname = f.Name
		}
		optional := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
		var sch obj
		if o, ok := fieldOverrides[name+"."+jname]; ok {
			sch = o(s)
		} else if f.Type.Kind() == reflect.Pointer && optional {
			sch = s.ofType(f.Type.Elem()) // omitted when nil, never null
		} else if inner, ok := nullableOf(f.Type); ok {
			sch = nullable(s.ofType(inner))
		} else {
			sch = s.ofType(f.Type)
		}
		if nilSlices[t] && f.Type.Kind() == reflect.Slice {
			sch = nullable(sch)
		}
		props[jname] = sch
		if req, isRequest := requestRequired[t]; isRequest {
			optional = !slices.Contains(req, jname)
		}
		if !optional {
			*required = append(*required, jname)
		}
	}
}

// embed adds the fields of the embedded struct t to the component name's props and required:
// an API struct's own fields, or the properties of a contract kind's component.
func (s *schemas) embed(t reflect.Type, name string, props obj, required *[]any) {
	if _, isKind := contractKinds[t]; !isKind {
		s.fields(t, name, props, required)
		return
	}
	r, _ := s.ofType(t)["$ref"].(string)
	def, ok := s.defs[strings.TrimPrefix(r, "#/components/schemas/")].(obj)
	inner, hasProps := def["properties"].(obj)
	if !ok || !hasProps {
		s.fail(fmt.Errorf("embedded %s: its schema is not an object with properties", t))
		return
	}
	for k, v := range inner {
		props[k] = v
	}
	if req, ok := def["required"].([]any); ok {
		*required = append(*required, req...)
	}
}

// nullableOf reports the T of a contract.Nullable[T].
func nullableOf(t reflect.Type) (reflect.Type, bool) {
	if t.Kind() != reflect.Struct || !strings.HasPrefix(t.Name(), "Nullable[") || t.PkgPath() != "github.com/sessiond/sessiond/contract" {
		return nil, false
	}
	f, ok := t.FieldByName("Value")
	if !ok {
		return nil, false
	}
	return f.Type, true
}

// contractKind generates the component of a contract document kind and returns a reference.
func (s *schemas) contractKind(kind, name string) obj {
	if _, ok := s.defs[name]; ok {
		return ref(name)
	}
	s.defs[name] = obj{}
	d, err := contract.Describe(kind)
	if err != nil {
		s.fail(err)
		return obj{}
	}
	s.defs[name] = s.shape(d, true)
	return ref(name)
}

// payload generates the component of an event type's payload and returns a reference.
func (s *schemas) payload(eventType string) obj {
	name := payloadName(eventType)
	if _, ok := s.defs[name]; ok {
		return ref(name)
	}
	s.defs[name] = obj{}
	d, ok := contract.DescribeEventPayload(eventType)
	if !ok {
		s.fail(fmt.Errorf("no payload schema for event type %q", eventType))
		return obj{}
	}
	s.defs[name] = s.shape(d, true)
	return ref(name)
}

// commandPayload generates the component of a command type's payload and returns a reference.
func (s *schemas) commandPayload(commandType string) obj {
	name := camel(commandType) + "CommandPayload"
	if _, ok := s.defs[name]; ok {
		return ref(name)
	}
	s.defs[name] = obj{}
	d, ok := contract.DescribeCommandPayload(commandType)
	if !ok {
		s.fail(fmt.Errorf("no payload schema for command type %q", commandType))
		return obj{}
	}
	s.defs[name] = s.shape(d, true)
	return ref(name)
}

// contractEvent is the AgentSessionEvent component: the envelope, with each event type's
// payload schema chosen by eventType.
func (s *schemas) contractEvent() obj {
	const name = "AgentSessionEvent"
	if _, ok := s.defs[name]; ok {
		return ref(name)
	}
	s.defs[name] = obj{}
	d, err := contract.Describe(contract.KindEvent)
	if err != nil {
		s.fail(err)
		return obj{}
	}
	def := s.shape(d, true)
	var byType []any
	for _, et := range contract.EventTypes {
		byType = append(byType, obj{
			"if":   obj{"properties": obj{"eventType": obj{"const": et}}, "required": []any{"eventType"}},
			"then": obj{"properties": obj{"payload": s.payload(et)}},
		})
	}
	def["allOf"] = byType
	def["description"] = "A contract event (AgentSessionEvent): the envelope, and the payload of its eventType. The contract's cross-field rules are checked by the server and listed in docs/reference.md."
	s.defs[name] = def
	return ref(name)
}

// contractCommand is the AgentSessionCommand component, each command type's payload chosen
// by commandType.
func (s *schemas) contractCommand() obj {
	const name = "AgentSessionCommand"
	if _, ok := s.defs[name]; ok {
		return ref(name)
	}
	s.defs[name] = obj{}
	d, err := contract.Describe(contract.KindCommand)
	if err != nil {
		s.fail(err)
		return obj{}
	}
	def := s.shape(d, true)
	var byType []any
	for _, ct := range contract.CommandTypes {
		byType = append(byType, obj{
			"if":   obj{"properties": obj{"commandType": obj{"const": ct}}, "required": []any{"commandType"}},
			"then": obj{"properties": obj{"payload": s.commandPayload(ct)}},
		})
	}
	def["allOf"] = byType
	def["description"] = "A contract command (AgentSessionCommand): the envelope, and the payload of its commandType."
	s.defs[name] = def
	return ref(name)
}

// shape converts a contract shape to JSON Schema 2020-12. A named shared object becomes a
// reference to its component, unless top (the component itself is being generated).
func (s *schemas) shape(d *contract.Shape, top bool) obj {
	if d.Name != "" && !top {
		name := sharedName(d.Name)
		if d.Name == "event" {
			return s.contractEvent()
		}
		if _, ok := s.defs[name]; !ok {
			s.defs[name] = obj{}
			c := *d
			c.Nullable = false
			s.defs[name] = s.shape(&c, true)
		}
		if d.Nullable {
			return nullable(ref(name))
		}
		return ref(name)
	}
	out := obj{}
	if d.Type != "any" {
		out["type"] = d.Type
	}
	if d.Const != "" {
		var v any
		if err := json.Unmarshal([]byte(d.Const), &v); err != nil {
			s.fail(err)
		}
		out["const"] = v
	}
	if d.Enum != nil {
		var e []any
		for _, v := range d.Enum {
			e = append(e, v)
		}
		out["enum"] = e
	}
	if d.MinLength > 0 {
		out["minLength"] = d.MinLength
	}
	if d.MaxLength > 0 {
		out["maxLength"] = d.MaxLength
	}
	switch d.Format {
	case "date-time", "uri":
		out["format"] = d.Format
	case "timestamp":
		out["description"] = "RFC 3339 timestamp (seconds optional), an existing date, Z or ±hh:mm"
	case "non-blank":
		out["pattern"] = `\S`
	}
	if d.Minimum != nil {
		if d.ExclusiveMinimum {
			out["exclusiveMinimum"] = *d.Minimum
		} else {
			out["minimum"] = *d.Minimum
		}
	}
	if d.Maximum != nil {
		out["maximum"] = *d.Maximum
	}
	if d.Type == "object" {
		props, required := obj{}, []any{}
		for _, f := range d.Fields {
			props[f.Name] = s.shape(f.Shape, false)
			if f.Required {
				required = append(required, f.Name)
			}
		}
		if len(d.Fields) > 0 {
			out["properties"] = props
		}
		if len(required) > 0 {
			out["required"] = required
		}
		if !d.AnyFields {
			out["additionalProperties"] = false
		}
	}
	if d.Items != nil {
		out["items"] = s.shape(d.Items, false)
	}
	if d.MinItems > 0 {
		out["minItems"] = d.MinItems
	}
	if d.MaxItems > 0 {
		out["maxItems"] = d.MaxItems
	}
	if d.Nullable {
		return nullable(out)
	}
	return out
}
