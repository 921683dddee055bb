package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// sampleOf builds the smallest value that fits a shape: required fields only, the first enum
// value, the shortest allowed string.
func sampleOf(s *Shape) any {
	if s.Const != "" {
		var v any
		if err := json.Unmarshal([]byte(s.Const), &v); err != nil {
			panic(err)
		}
		return v
	}
	switch s.Type {
	case "string":
		switch {
		case s.Enum != nil:
			return s.Enum[0]
		case s.Format == "timestamp" || s.Format == "date-time":
			return "2026-03-01T12:00:00Z"
		case s.Format == "uri":
			return "https://example.com/x"
		}
		return strings.Repeat("x", max(s.MinLength, 1))
	case "integer", "number":
		if s.Minimum == nil {
			return 0
		}
		if s.ExclusiveMinimum {
			return *s.Minimum + 1
		}
		return *s.Minimum
	case "boolean":
		return true
	case "array":
		out := []any{}
		for range s.MinItems {
			out = append(out, sampleOf(s.Items))
		}
		return out
	case "object":
		out := map[string]any{}
		for _, f := range s.Fields {
			if f.Required {
				out[f.Name] = sampleOf(f.Shape)
			}
		}
		return out
	}
	return "any"
}

// breaker is a value that breaks a shape, and the rule that must report it.
type breaker struct {
	value any
	rule  string
}

func breakersOf(s *Shape) []breaker {
	var out []breaker
	switch {
	case s.Type == "any":
		return nil
	case s.Type == "array":
		out = append(out, breaker{map[string]any{}, "type"})
	default:
		out = append(out, breaker{[]any{}, "type"})
	}
	switch {
	case s.Const != "" && s.Type == "string":
		out = append(out, breaker{"not-the-constant", "const"})
	case s.Enum != nil:
		out = append(out, breaker{"not-one-of-them", "enum"})
	case s.MaxLength > 0:
		out = append(out, breaker{strings.Repeat("é", s.MaxLength+1), "maxLength"})
	}
	if s.Type == "string" && s.Enum == nil && s.Const == "" && s.MinLength > 0 {
		out = append(out, breaker{"", "minLength"})
	}
	if (s.Type == "integer" || s.Type == "number") && s.Const == "" && s.Minimum != nil {
		if s.ExclusiveMinimum {
			out = append(out, breaker{*s.Minimum, "exclusiveMinimum"})
		} else {
			out = append(out, breaker{*s.Minimum - 1, "minimum"})
		}
	}
	if s.Type == "integer" && s.Maximum != nil {
		out = append(out, breaker{json.Number(fmt.Sprint(*s.Maximum) + "0"), "maximum"})
	}
	if s.Type == "array" && s.MaxItems > 0 {
		items := make([]any, s.MaxItems+1)
		for i := range items {
			items[i] = sampleOf(s.Items)
		}
		out = append(out, breaker{items, "maxItems"})
	}
	return out
}

// schemaProblems validates doc as kind and returns its problems of the json and schema layers
// as "path rule".
func schemaProblems(t *testing.T, kind string, doc any) []string {
	t.Helper()
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	err = Validate(kind, b, Limits{})
	var ve *ValidationError
	if err == nil || !errors.As(err, &ve) {
		return nil
	}
	var out []string
	for _, p := range ve.Problems {
		if p.Layer != LayerRule {
			out = append(out, p.Path+" "+p.Rule)
		}
	}
	return out
}

// checkShape holds a shape to the validator: the sample of the whole document is valid, each
// field broken in each way the shape describes is refused at that field with that rule, and an
// unknown member of a closed object is refused.
func checkShape(t *testing.T, kind string, root map[string]any, at []string, s *Shape) {
	t.Helper()
	ptr := "/" + strings.Join(at, "/")
	if len(at) == 0 {
		ptr = ""
	}
	set := func(v any) map[string]any {
		doc := deepCopy(root).(map[string]any)
		if len(at) == 0 {
			return v.(map[string]any)
		}
		m := doc
		for _, k := range at[:len(at)-1] {
			m = m[k].(map[string]any)
		}
		m[at[len(at)-1]] = v
		return doc
	}
	for _, b := range breakersOf(s) {
		if len(at) == 0 {
			continue
		}
		got := schemaProblems(t, kind, set(b.value))
		if !containsStr(got, ptr+" "+b.rule) {
			t.Errorf("%s %s set to %v: problems %q, want %q", kind, ptr, b.value, got, ptr+" "+b.rule)
		}
	}
	if s.Type != "object" {
		return
	}
	if !s.AnyFields {
		obj := deepCopy(get(root, at)).(map[string]any)
		obj["noSuchField"] = 1
		if got := schemaProblems(t, kind, set(obj)); !containsStr(got, ptr+"/noSuchField additionalProperties") {
			t.Errorf("%s %s with an unknown field: problems %q", kind, ptr, got)
		}
	}
	for _, f := range s.Fields {
		if f.Required {
			obj := deepCopy(get(root, at)).(map[string]any)
			delete(obj, f.Name)
			if got := schemaProblems(t, kind, set(obj)); !containsStr(got, ptr+"/"+f.Name+" required") {
				t.Errorf("%s %s/%s removed: problems %q", kind, ptr, f.Name, got)
			}
		}
		// Put the field in (optional ones too) and descend.
		withField := set(func() any {
			obj := deepCopy(get(root, at)).(map[string]any)
			obj[f.Name] = sampleOf(f.Shape)
			return obj
		}())
		if got := schemaProblems(t, kind, withField); got != nil {
			t.Errorf("%s %s/%s set to its sample: problems %q", kind, ptr, f.Name, got)
			continue
		}
		checkShape(t, kind, withField, append(append([]string(nil), at...), f.Name), f.Shape)
	}
}

func get(doc map[string]any, at []string) any {
	var v any = doc
	for _, k := range at {
		v = v.(map[string]any)[k]
	}
	return v
}

func deepCopy(v any) any {
	b, _ := json.Marshal(v)
	var out any
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	_ = d.Decode(&out)
	return out
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestDescribeAgreesWithValidator walks every described shape (the kinds, the 17 event
// payloads and the 8 command payloads) and checks the validator enforces what it says.
func TestDescribeAgreesWithValidator(t *testing.T) {
	for _, kind := range DocumentKinds {
		s, err := Describe(kind)
		if err != nil {
			t.Fatal(err)
		}
		switch kind {
		case KindEvent:
			for _, et := range EventTypes {
				p, ok := DescribeEventPayload(et)
				if !ok {
					t.Fatalf("no payload shape for %s", et)
				}
				doc := sampleOf(s).(map[string]any)
				doc["eventType"], doc["payload"] = et, sampleOf(p)
				if got := schemaProblems(t, kind, doc); got != nil {
					t.Errorf("sample %s event: %q", et, got)
				}
				checkShape(t, kind, doc, []string{"payload"}, p)
			}
			doc := sampleOf(s).(map[string]any)
			doc["payload"] = sampleOf(mustPayload(t, DescribeEventPayload, doc["eventType"].(string)))
			checkShape(t, kind, doc, nil, withoutPayload(s))
		case KindCommand:
			for _, ct := range CommandTypes {
				p, ok := DescribeCommandPayload(ct)
				if !ok {
					t.Fatalf("no payload shape for %s", ct)
				}
				doc := sampleOf(s).(map[string]any)
				doc["commandType"], doc["payload"], doc["runId"] = ct, sampleOf(p), "x"
				if got := schemaProblems(t, kind, doc); got != nil {
					t.Errorf("sample %s command: %q", ct, got)
				}
				checkShape(t, kind, doc, []string{"payload"}, p)
			}
		default:
			doc := sampleOf(s).(map[string]any)
			if got := schemaProblems(t, kind, doc); got != nil {
				t.Errorf("sample %s: %q", kind, got)
			}
			checkShape(t, kind, doc, nil, s)
		}
	}
	if _, err := Describe("novel"); err == nil {
		t.Error("Describe of an unknown kind did not fail")
	}
	if _, ok := DescribeEventPayload("novel"); ok {
		t.Error("DescribeEventPayload of an unknown type succeeded")
	}
	if _, ok := DescribeCommandPayload("novel"); ok {
		t.Error("DescribeCommandPayload of an unknown type succeeded")
	}
	for _, n := range SharedShapes {
		if s, ok := DescribeShared(n); !ok || s.Name != n {
			t.Errorf("DescribeShared(%q) = %v, %v", n, s, ok)
		}
	}
	if len(SharedShapes) != len(sharedNames) {
		t.Errorf("SharedShapes lists %d names, the table has %d", len(SharedShapes), len(sharedNames))
	}
}

func mustPayload(t *testing.T, f func(string) (*Shape, bool), typ string) *Shape {
	s, ok := f(typ)
	if !ok {
		t.Fatalf("no payload shape for %s", typ)
	}
	return s
}

// withoutPayload is the envelope shape without its payload, which the payload shapes cover.
func withoutPayload(s *Shape) *Shape {
	c := *s
	c.Fields = nil
	for _, f := range s.Fields {
		if f.Name != "payload" {
			c.Fields = append(c.Fields, f)
		}
	}
	return &c
}
