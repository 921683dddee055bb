package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
)

// A deterministic, schema-driven corpus generator. It reads the published JSON Schema itself
// (so a field added to the schema is covered without touching this file), builds a valid base
// document per event kind (one with every field, one with only the required ones), and derives
// cases from it: every field removed, replaced by a value of every JSON type, every enum value
// and a bad one, strings at the length bounds in ASCII, emoji and CJK, integers and numbers in
// every notation and at every bound, timestamps around every rule of the pattern, an unknown
// field at every object level, eventType/payload mismatches; then seeded random combinations of
// two or three of those mutations.

// obj is a JSON object with ordered members; raw is a JSON literal written verbatim (numbers).
type (
	obj []kv
	kv  struct {
		k string
		v any
	}
	raw string
)

func encodeTo(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case raw:
		b.WriteString(string(x))
	case string:
		enc := json.NewEncoder(b)
		enc.SetEscapeHTML(false)
		enc.Encode(x)
		b.Truncate(b.Len() - 1) // Encode's newline
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			encodeTo(b, e)
		}
		b.WriteByte(']')
	case obj:
		b.WriteByte('{')
		for i, m := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			encodeTo(b, m.k)
			b.WriteByte(':')
			encodeTo(b, m.v)
		}
		b.WriteByte('}')
	default:
		panic(fmt.Sprintf("encode %T", v))
	}
}

func encode(v any) []byte {
	var b bytes.Buffer
	encodeTo(&b, v)
	return b.Bytes()
}

// encodeEscaped writes v with every character of every string and key as a \u escape (a
// surrogate pair beyond the BMP), so that decoding of escapes is exercised everywhere.
func encodeEscaped(v any) []byte {
	var b bytes.Buffer
	var walk func(v any)
	str := func(s string) {
		b.WriteByte('"')
		for _, r := range s {
			if r > 0xFFFF {
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(&b, `\u%04x\u%04X`, r1, r2)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		}
		b.WriteByte('"')
	}
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			str(x)
		case []any:
			b.WriteByte('[')
			for i, e := range x {
				if i > 0 {
					b.WriteByte(',')
				}
				walk(e)
			}
			b.WriteByte(']')
		case obj:
			b.WriteByte('{')
			for i, m := range x {
				if i > 0 {
					b.WriteByte(',')
				}
				str(m.k)
				b.WriteByte(':')
				walk(m.v)
			}
			b.WriteByte('}')
		default:
			encodeTo(&b, v)
		}
	}
	walk(v)
	return b.Bytes()
}

func clone(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = clone(e)
		}
		return out
	case obj:
		out := make(obj, len(x))
		for i, m := range x {
			out[i] = kv{m.k, clone(m.v)}
		}
		return out
	}
	return v
}

func (o obj) get(k string) (any, bool) {
	for _, m := range o {
		if m.k == k {
			return m.v, true
		}
	}
	return nil, false
}

// op is one mutation: set the value at path (adding the member when absent) or delete it.
type op struct {
	path []any // string keys and int indexes
	val  any
	del  bool
	desc string
}

// apply returns a mutated copy of doc, or false when the path no longer exists in doc.
func apply(doc any, o op) (any, bool) {
	if len(o.path) == 0 {
		if o.del {
			return nil, false
		}
		return clone(o.val), true
	}
	switch x := doc.(type) {
	case obj:
		k, ok := o.path[0].(string)
		if !ok {
			return nil, false
		}
		out := make(obj, 0, len(x)+1)
		found := false
		for _, m := range x {
			if m.k != k {
				out = append(out, m)
				continue
			}
			found = true
			if len(o.path) == 1 {
				if !o.del {
					out = append(out, kv{k, clone(o.val)})
				}
				continue
			}
			nv, ok := apply(m.v, op{path: o.path[1:], val: o.val, del: o.del})
			if !ok {
				return nil, false
			}
			out = append(out, kv{k, nv})
		}
		if !found {
			if len(o.path) != 1 || o.del {
				return nil, false
			}
			out = append(out, kv{k, clone(o.val)})
		}
		return out, true
	case []any:
		i, ok := o.path[0].(int)
		if !ok || i >= len(x) {
			return nil, false
		}
		out := append([]any(nil), x...)
		if len(o.path) == 1 && o.del {
			return append(out[:i], out[i+1:]...), true
		}
		nv, ok := apply(x[i], op{path: o.path[1:], val: o.val, del: o.del})
		if !ok {
			return nil, false
		}
		out[i] = nv
		return out, true
	}
	return nil, false
}

func pathString(p []any) string {
	var b strings.Builder
	for _, s := range p {
		fmt.Fprintf(&b, "/%v", s)
	}
	return b.String()
}

// genCase is one generated document.
type genCase struct {
	name string
	data []byte
}

// Sample values.
var (
	typeSamples = []any{"s", raw("1"), raw("1.5"), true, false, nil, []any{}, obj{}}

	lengthSamples = []any{
		"", "a", " ", strings.Repeat("a", 255), strings.Repeat("a", 256), strings.Repeat("a", 257),
		strings.Repeat("😀", 1), strings.Repeat("😀", 256), strings.Repeat("😀", 257),
		strings.Repeat("中", 100), strings.Repeat("中", 256), strings.Repeat("中", 257),
		strings.Repeat("é", 256), strings.Repeat("é", 257), strings.Repeat("e\u0301", 128),
		strings.Repeat("e\u0301", 129), "\u0000", "\t\n", "\u2028", "a/b~c",
	}

	numberSamples = []any{
		raw("1"), raw("1.0"), raw("1e2"), raw("1E2"), raw("1e+2"), raw("100e-2"), raw("1.5"),
		raw("-1"), raw("0"), raw("-0"), raw("-0.0"), raw("0.0"), raw("0e5"), raw("-0e-5"),
		raw("9007199254740991"), raw("9007199254740992"), raw("9007199254740991.0"),
		raw("9.007199254740991e15"), raw("9.007199254740992e15"), raw("9007199254740993"),
		raw("-9007199254740991"), raw("-9007199254740992"), raw("-9.007199254740991e15"),
		raw("1e20"), raw("-1e20"), raw("0.5"), raw("-0.5"), raw("-1e-400"), raw("1e-400"),
		raw("1e308"), raw("-1e308"), raw("5e-324"), raw("12345678901234567890"),
		raw("0.1e1"), raw("10000000000000000000000e-22"), raw("90071992547409910e-1"),
		raw("9007199254740991.5"), raw("4503599627370495.5"), raw("2"), raw("42"),
		raw("-9007199254740990.9"), raw("1e-7"), raw("123456789012345678"),
		raw("1234567890123456789"),
	}

	timestampSamples = []any{
		// valid by the pattern
		"2026-03-01T12:00:00Z", "2024-02-29T00:00:00Z", "2000-02-29T12:00Z", "0000-02-29T00:00Z",
		"2400-02-29T00:00Z", "1996-02-29T00:00Z", "2026-04-30T00:00Z", "2026-12-31T23:59:59-23:59",
		"2026-03-01T12:00:00.123456789+05:30", "2026-03-01T12:00:00.5Z", "2026-03-01T00:00+00:00",
		"9999-12-31T23:59:59.999Z", "2026-01-31T00:00Z", "2026-02-28T00:00Z",
		// invalid by the pattern
		"2023-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2100-02-29T00:00Z", "2026-04-31T00:00Z",
		"2026-02-30T00:00Z", "2026-03-01t12:00:00Z", "2026-03-01T12:00:00z", "2026-03-01T12:00:00",
		"2026-03-01 12:00:00Z", "2026-03-01T24:00:00Z", "2026-03-01T12:60Z", "2026-03-01T12:00:60Z",
		"2016-12-31T23:59:60Z", "2026-03-01T12:00:00.Z", "2026-03-01T12:00.5Z",
		"2026-03-01T12:00:00+24:00", "2026-03-01T12:00:00+0530", "2026-03-01T12:00:00+05:60",
		"٢٠٢٦-03-01T12:00:00Z", "２０２６-03-01T12:00:00Z", "2026-03-01T12:00:00.٣Z",
		"2026-03-01T12:00:00Z\n", "\n2026-03-01T12:00:00Z", "2026-03-01", "+2026-03-01T12:00Z",
		"2026-13-01T00:00Z", "2026-00-01T00:00Z", "2026-01-00T00:00Z", "26-03-01T12:00Z",
		"2026-03-01T1:00Z", "2026-03-01T12:00:00+1:00", "2026-03-01T+1:00:00Z",
		"2026-03-01T12:00:00Z ", "12026-03-01T12:00Z", "2026-3-01T12:00Z", "2023-02-29T00:00Z",
	}

	// dateTimeSamples are for "format": "date-time" (the session record, draft-07): seconds
	// required, t and z in either case.
	dateTimeSamples = []any{
		"2026-03-01T12:00:00Z", "2026-03-01t12:00:00z", "2024-02-29T00:00:00+05:30",
		"2026-03-01T12:00:00.123-01:00", "2026-03-01T12:00Z", "2023-02-29T00:00:00Z",
		"2026-03-01T24:00:00Z", "2026-03-01T12:00:00", "2026-03-01 12:00:00Z",
		"2026-03-01T12:00:00.Z", "2026-03-01T12:00:00+0100", "２０２６-03-01T12:00:00Z",
		"2026-03-01T12:00:00.٣Z", "1900-02-29T00:00:00Z", "2000-02-29T00:00:00Z",
		"2026-03-01T12:00:60Z",
	}

	freeSamples = []any{
		obj{{"a", obj{{"b", []any{raw("1e2"), nil, true, "x"}}}}},
		[]any{[]any{[]any{obj{}}}}, raw("-0.0e-0"), "ü\u0000", obj{{"", raw("0")}},
	}
)

// schemaGen walks a JSON Schema document (parsed with our own order-preserving parser).
type schemaGen struct {
	root *Value
}

func loadSchema(tb testing.TB, file string) *schemaGen {
	data, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	v, err := Parse(data, Limits{})
	if err != nil {
		tb.Fatal(err)
	}
	return &schemaGen{root: &v}
}

func (g *schemaGen) isFree(s *Value) bool { return s.Get("$ref") != nil }

// types returns the schema's "type" keyword as a list.
func types(s *Value) []string {
	t := s.Get("type")
	if t == nil {
		return nil
	}
	if t.Kind == KindString {
		return []string{t.Str}
	}
	var out []string
	for _, e := range t.Elems {
		out = append(out, e.Str)
	}
	return out
}

func hasType(s *Value, name string) bool {
	for _, t := range types(s) {
		if t == name {
			return true
		}
	}
	return false
}

func fromValue(v *Value) any {
	switch v.Kind {
	case KindString:
		return v.Str
	case KindNumber:
		return raw(v.Raw)
	case KindBool:
		return v.Bool
	case KindNull:
		return nil
	}
	panic("fromValue: unsupported kind")
}

// build returns a valid instance of s; full includes every optional property.
func (g *schemaGen) build(s *Value, name string, full bool) any {
	if g.isFree(s) {
		return obj{{"type", "text"}, {"text", "hello ü"}, {"n", []any{raw("1"), raw("2.5e3"), nil, true}}}
	}
	if c := s.Get("const"); c != nil {
		return fromValue(c)
	}
	if e := s.Get("enum"); e != nil {
		for i := range e.Elems {
			if e.Elems[i].Kind != KindNull {
				return fromValue(&e.Elems[i])
			}
		}
	}
	switch {
	case hasType(s, "object"):
		out := obj{}
		props := s.Get("properties")
		if props == nil {
			return obj{{"k", g.build(s.Get("additionalProperties"), "k", full)}}
		}
		for _, m := range props.Members {
			if full || isRequired(s, m.Key) {
				out = append(out, kv{m.Key, g.build(&m.Value, m.Key, full)})
			}
		}
		return out
	case hasType(s, "array"):
		return []any{g.build(s.Get("items"), name, full)}
	case hasType(s, "string"):
		switch {
		case s.Get("pattern") != nil, s.Get("format") != nil && s.Get("format").Str == "date-time":
			return "2026-03-01T12:00:00Z"
		case s.Get("format") != nil && s.Get("format").Str == "uri":
			return "https://example.com/files/report.pdf"
		case name == "session_id":
			return "S-20260301-1"
		case s.Get("minLength") != nil:
			return name + "-1"
		}
		return "some " + name
	case hasType(s, "integer"):
		return raw("42")
	case hasType(s, "number"):
		return raw("12.5")
	case hasType(s, "boolean"):
		return true
	}
	panic("build: unsupported schema for " + name)
}

func isRequired(s *Value, key string) bool {
	if r := s.Get("required"); r != nil {
		for _, e := range r.Elems {
			if e.Str == key {
				return true
			}
		}
	}
	return false
}

// samples returns the values tried at a field of schema s.
func (g *schemaGen) samples(s *Value) []any {
	out := append([]any(nil), typeSamples...)
	if g.isFree(s) {
		return append(out, freeSamples...)
	}
	if c := s.Get("const"); c != nil {
		if c.Kind == KindString {
			out = append(out, c.Str, c.Str+"x", strings.ToLower(c.Str))
		} else {
			out = append(out, numberSamples...)
		}
	}
	if e := s.Get("enum"); e != nil {
		for i := range e.Elems {
			out = append(out, fromValue(&e.Elems[i]))
		}
		if first := e.Elems[len(e.Elems)-1]; first.Kind == KindString {
			out = append(out, "bogus", strings.ToUpper(first.Str), first.Str+" ", " "+first.Str)
		}
	}
	if hasType(s, "string") {
		out = append(out, lengthSamples...)
		if s.Get("pattern") != nil {
			out = append(out, timestampSamples...)
		}
		if f := s.Get("format"); f != nil && f.Str == "date-time" {
			out = append(out, dateTimeSamples...)
		}
		if f := s.Get("format"); f != nil && f.Str == "uri" {
			out = append(out, "https://example.com/a b", "mailto:x@example.com", "urn:isbn:0451450523",
				"file:///tmp/x", "relative/path", "//example.com/x", "http://[::1]:80/", "http://::1/")
		}
	}
	if hasType(s, "integer") || hasType(s, "number") {
		out = append(out, numberSamples...)
	}
	return out
}

// walk collects the mutation ops for the instance at path, read with schema s.
func (g *schemaGen) walk(inst any, s *Value, path []any, ops *[]op) {
	at := func(k any) []any { return append(append([]any(nil), path...), k) }
	if g.isFree(s) {
		if o, ok := inst.(obj); ok && len(o) > 0 {
			*ops = append(*ops, op{path: at("zzExtra"), val: raw("1"), desc: "free extra member"})
		}
		return
	}
	switch x := inst.(type) {
	case obj:
		*ops = append(*ops, op{path: at("zzExtra"), val: raw("1"), desc: "additional property"})
		props := s.Get("properties")
		if props == nil {
			if ap := s.Get("additionalProperties"); ap != nil && ap.Kind == KindObject {
				for _, m := range x {
					for _, v := range g.samples(ap) {
						*ops = append(*ops, op{path: at(m.k), val: v})
					}
				}
			}
			return
		}
		for _, m := range props.Members {
			p := at(m.Key)
			cur, present := x.get(m.Key)
			if present {
				*ops = append(*ops, op{path: p, del: true, desc: "remove"})
			} else {
				*ops = append(*ops, op{path: p, val: g.build(&m.Value, m.Key, true), desc: "add"})
			}
			for _, v := range g.samples(&m.Value) {
				*ops = append(*ops, op{path: p, val: v})
			}
			if present {
				g.walk(cur, &m.Value, p, ops)
			}
		}
	case []any:
		items := s.Get("items")
		*ops = append(*ops, op{path: path, val: []any{}, desc: "empty array"})
		if len(x) > 0 {
			*ops = append(*ops, op{path: path, val: []any{x[0], x[0]}, desc: "two items"})
			for _, v := range g.samples(items) {
				*ops = append(*ops, op{path: at(0), val: v})
			}
			g.walk(x[0], items, at(0), ops)
		}
	}
}

// fixRules adjusts a schema-valid event base so that it also passes the rules layer.
func fixRules(et string, ev obj) obj {
	pl, _ := ev.get("payload")
	p := pl.(obj)
	set := func(o obj, k string, v any) obj { n, _ := apply(o, op{path: []any{k}, val: v}); return n.(obj) }
	_, hasRun := ev.get("runId")
	switch et {
	case "steer":
		if hasRun {
			t, _ := p.get("targetRunId")
			ev = set(ev, "runId", t)
		} else {
			t, _ := p.get("targetRunId")
			ev = append(ev, kv{"runId", t})
		}
		if _, hasErr := p.get("error"); hasErr {
			p = set(p, "status", "failed")
		}
	case "summary":
		r, _ := p.get("runId")
		ev = set(ev, "runId", r)
	case "status":
		if hasRun {
			// a completed run status with everything it needs
			p = set(p, "status", "completed")
		}
	}
	return set(ev, "payload", p)
}

// eventBases returns, per event type in schema order, a full and a minimal valid event.
func eventBases(tb testing.TB) (g *schemaGen, bases []genBase) {
	g = loadSchema(tb, eventSchemaFile)
	for i := range g.root.Get("anyOf").Elems {
		br := &g.root.Get("anyOf").Elems[i]
		et := br.Get("properties").Get("eventType").Get("const").Str
		for _, full := range []bool{true, false} {
			ev := g.build(br, "event", full).(obj)
			ev = fixRules(et, ev)
			bases = append(bases, genBase{name: fmt.Sprintf("%s/full=%v", et, full), eventType: et, doc: ev, schema: br})
		}
	}
	return g, bases
}

type genBase struct {
	name      string
	eventType string
	doc       obj
	schema    *Value
}

// generateEvents returns the event corpus.
func generateEvents(tb testing.TB, seed uint64, randomCombos int) []genCase {
	g, bases := eventBases(tb)
	var out []genCase
	var allOps [][]op
	for _, b := range bases {
		out = append(out, genCase{b.name + "/base", encode(b.doc)})
		var ops []op
		g.walk(b.doc, b.schema, nil, &ops)
		for _, o := range ops {
			if d, ok := apply(b.doc, o); ok {
				name := fmt.Sprintf("%s%s=%s%s", b.name, pathString(o.path), short(o.val, o.del), o.desc)
				out = append(out, genCase{name, encode(d)})
				if _, isStr := o.val.(string); isStr && len(out)%7 == 0 {
					out = append(out, genCase{name + " (escaped)", encodeEscaped(d)})
				}
			}
		}
		out = append(out, genCase{b.name + "/base (escaped)", encodeEscaped(b.doc)})
		// eventType/payload mismatches
		for _, other := range EventTypes {
			if other != b.eventType {
				d, _ := apply(b.doc, op{path: []any{"eventType"}, val: other})
				out = append(out, genCase{b.name + "/eventType=" + other, encode(d)})
			}
		}
		allOps = append(allOps, ops)
	}
	// whole documents of other types
	for _, v := range append(append([]any(nil), typeSamples...), obj{{"contract", "AgentSessionEvent"}}) {
		out = append(out, genCase{"root=" + short(v, false), encode(v)})
	}
	// seeded random combinations of 2-3 mutations
	r := rand.New(rand.NewPCG(seed, 0x5e55))
	for n := 0; n < randomCombos; n++ {
		bi := r.IntN(len(bases))
		doc := any(bases[bi].doc)
		name := bases[bi].name + "/combo"
		for k := 2 + r.IntN(2); k > 0; k-- {
			ops := allOps[bi]
			o := ops[r.IntN(len(ops))]
			if d, ok := apply(doc, o); ok {
				doc = d
				name += fmt.Sprintf(" %s=%s", pathString(o.path), short(o.val, o.del))
			}
		}
		out = append(out, genCase{name, encode(doc)})
	}
	return out
}

// generateSessions returns the session record corpus.
func generateSessions(tb testing.TB, seed uint64, randomCombos int) []genCase {
	g := loadSchema(tb, sessionSchemaFile)
	var out []genCase
	for _, full := range []bool{true, false} {
		base := g.build(g.root, "session", full).(obj)
		name := fmt.Sprintf("session/full=%v", full)
		out = append(out, genCase{name + "/base", encode(base)})
		var ops []op
		g.walk(base, g.root, nil, &ops)
		for _, o := range ops {
			if d, ok := apply(base, o); ok {
				out = append(out, genCase{fmt.Sprintf("%s%s=%s%s", name, pathString(o.path), short(o.val, o.del), o.desc), encode(d)})
			}
		}
		r := rand.New(rand.NewPCG(seed, 0xc0de))
		for n := 0; n < randomCombos; n++ {
			doc := any(base)
			cname := name + "/combo"
			for k := 2 + r.IntN(2); k > 0; k-- {
				o := ops[r.IntN(len(ops))]
				if d, ok := apply(doc, o); ok {
					doc = d
					cname += fmt.Sprintf(" %s=%s", pathString(o.path), short(o.val, o.del))
				}
			}
			out = append(out, genCase{cname, encode(doc)})
		}
	}
	for _, v := range typeSamples {
		out = append(out, genCase{"root=" + short(v, false), encode(v)})
	}
	return out
}

func short(v any, del bool) string {
	if del {
		return "<deleted>"
	}
	s := string(encode(v))
	if len(s) > 40 {
		s = fmt.Sprintf("%.30s…(%d bytes)", s, len(s))
	}
	return s
}
