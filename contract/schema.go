package contract

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file holds a small, closed schema language that mirrors exactly the JSON Schema keywords
// the contract uses, and the validator that walks a parsed [Value] against it. The schemas of
// every contract object are written with it in schemas.go.

type stype uint8

const (
	tAny     stype = iota // any JSON value (the free values: parts, input, output, ...)
	tString               // "type": "string"
	tInteger              // "type": "integer": a whole-valued number
	tNumber               // "type": "number"
	tBool                 // "type": "boolean"
	tObject               // "type": "object"
	tArray                // "type": "array"
)

var stypeNames = [...]string{"any", "string", "integer", "number", "boolean", "object", "array"}

type sformat uint8

const (
	fNone      sformat = iota
	fTimestamp         // the event schema's timestamp pattern (RFC 3339, seconds optional)
	fDateTime          // format date-time (RFC 3339, seconds required), for the session record
	fURI               // format uri: an absolute URI
	fNotBlank          // at least one non-whitespace character ("not blank")
)

type schema struct {
	typ      stype
	nullable bool // "type": [T, "null"]

	// strings
	minLen, maxLen int // code points; maxLen 0 = unbounded
	enum           []string
	hasConst       bool
	constStr       string
	format         sformat

	// numbers (exact, on the literal)
	hasMin, hasMax bool
	min, max       int64
	exclusiveMin   bool
	constInt       *int64

	// objects
	props    []prop
	open     *schema // additionalProperties schema for open objects (nil = closed)
	maxProps int     // 0 = unbounded

	// arrays
	items              *schema
	minItems, maxItems int // maxItems 0 = unbounded
}

type prop struct {
	name     string
	s        *schema
	required bool
}

// Problem is one reason a document was rejected.
type Problem struct {
	// Path is the JSON Pointer (RFC 6901) of the offending value, "" for the whole document.
	// For a missing required field it is the pointer the field would have.
	Path string `json:"path"`
	// Rule is the JSON Schema keyword (required, type, enum, const, minLength, maxLength,
	// minimum, maximum, exclusiveMinimum, minItems, maxItems, pattern, format,
	// additionalProperties), a parser rule (json, utf8, duplicateKey, maxDepth, maxBytes,
	// numberRange), or the name of a contract rule (steer-run-id, ...).
	Rule string `json:"rule"`
	// Layer says which check found it: "json" (the document is not acceptable JSON),
	// "schema" (the shape the schemas define) or "rule" (a cross-field rule, one of [Rules]).
	Layer string `json:"layer"`
	// Message says in plain words what is wrong and what is expected.
	Message string `json:"message"`
}

// Layers of a [Problem].
const (
	LayerJSON   = "json"
	LayerSchema = "schema"
	LayerRule   = "rule"
)

// ValidationError is returned when a document breaks the contract. It lists every problem
// found (schema problems and, when the shape is right, rule problems).
type ValidationError struct {
	Problems []Problem
}

// Error lists every problem as "path: message (rule)", separated by "; ".
func (e *ValidationError) Error() string {
	if len(e.Problems) == 0 {
		return "invalid document"
	}
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		path := p.Path
		if path == "" {
			path = "/"
		}
		fmt.Fprintf(&b, "%s: %s (%s)", path, p.Message, p.Rule)
	}
	return b.String()
}

// HasLayer reports whether any problem belongs to the given layer.
func (e *ValidationError) HasLayer(layer string) bool {
	for _, p := range e.Problems {
		if p.Layer == layer {
			return true
		}
	}
	return false
}

// checker accumulates problems while walking a document. The path is a stack of segments that
// is only joined into a pointer when a problem is reported, so valid documents cost nothing.
type checker struct {
	segs     [16]string // the first path segments, inline so that a checker needs no allocation
	deep     []string   // segments beyond len(segs)
	n        int        // path length
	problems []Problem
	dropped  int // problems not recorded because MaxProblems were already listed
}

// MaxProblems is the most problems a [ValidationError] lists; a document with more (only a
// hostile one gets there) ends its list with one problem of rule "maxProblems" saying how many
// were left out. It bounds the memory an error can take.
const MaxProblems = 1000

func (c *checker) record(p Problem) {
	if len(c.problems) >= MaxProblems {
		c.dropped++
		return
	}
	c.problems = append(c.problems, p)
}

// result returns the problems, with the maxProblems notice when some were dropped.
func (c *checker) result() []Problem {
	if c.dropped > 0 {
		return append(c.problems, Problem{Rule: "maxProblems", Layer: LayerSchema,
			Message: fmt.Sprintf("%d more problems were found but are not listed (at most %d are)", c.dropped, MaxProblems)})
	}
	return c.problems
}

func (c *checker) seg(i int) string {
	if i < len(c.segs) {
		return c.segs[i]
	}
	return c.deep[i-len(c.segs)]
}

func (c *checker) pointer(extra ...string) string {
	if c.n == 0 && len(extra) == 0 {
		return ""
	}
	var b strings.Builder
	for i := 0; i < c.n; i++ {
		b.WriteByte('/')
		b.WriteString(escapePointer(c.seg(i)))
	}
	for _, s := range extra {
		b.WriteByte('/')
		b.WriteString(escapePointer(s))
	}
	return b.String()
}

func (c *checker) add(rule, msg string) {
	if len(c.problems) >= MaxProblems {
		c.dropped++
		return
	}
	c.record(Problem{Path: c.pointer(), Rule: rule, Layer: LayerSchema, Message: msg})
}

func (c *checker) addAt(field, rule, msg string) {
	if len(c.problems) >= MaxProblems {
		c.dropped++
		return
	}
	c.record(Problem{Path: c.pointer(field), Rule: rule, Layer: LayerSchema, Message: msg})
}

func (c *checker) rule(path, name, msg string) {
	c.record(Problem{Path: path, Rule: name, Layer: LayerRule, Message: msg})
}

func (c *checker) push(seg string) {
	if c.n < len(c.segs) {
		c.segs[c.n] = seg
	} else {
		c.deep = append(c.deep, seg)
	}
	c.n++
}

func (c *checker) pop() {
	c.n--
	if c.n >= len(c.segs) {
		c.deep = c.deep[:len(c.deep)-1]
	}
}

func describe(v *Value) string {
	switch v.Kind {
	case KindNumber:
		if l := parseLiteral(v.Raw); l.isWhole() {
			return "integer"
		}
	}
	return v.Kind.String()
}

func quote(s string) string {
	if utf8.RuneCountInString(s) > 64 {
		s = string([]rune(s)[:64]) + "…"
	}
	return strconv.Quote(s)
}

// check validates v against s, appending problems to c.
func (c *checker) check(v *Value, s *schema) {
	if s.nullable && v.Kind == KindNull {
		return
	}
	switch s.typ {
	case tAny:
		return
	case tString:
		if v.Kind != KindString {
			c.add("type", c.typeMsg(s, v))
			return
		}
		c.checkString(v.Str, s)
	case tInteger, tNumber:
		if v.Kind != KindNumber {
			c.add("type", c.typeMsg(s, v))
			return
		}
		c.checkNumber(v, s)
	case tBool:
		if v.Kind != KindBool {
			c.add("type", c.typeMsg(s, v))
		}
	case tArray:
		if v.Kind != KindArray {
			c.add("type", c.typeMsg(s, v))
			return
		}
		if len(v.Elems) < s.minItems {
			c.add("minItems", fmt.Sprintf("has %d items; at least %d required", len(v.Elems), s.minItems))
		}
		if s.maxItems > 0 && len(v.Elems) > s.maxItems {
			c.add("maxItems", fmt.Sprintf("has %d items; at most %d allowed", len(v.Elems), s.maxItems))
		}
		if s.items != nil && s.items.typ != tAny {
			for i := range v.Elems {
				c.push(strconv.Itoa(i))
				c.check(&v.Elems[i], s.items)
				c.pop()
			}
		}
	case tObject:
		if v.Kind != KindObject {
			c.add("type", c.typeMsg(s, v))
			return
		}
		c.checkObject(v, s)
	}
}

func (c *checker) typeMsg(s *schema, v *Value) string {
	want := stypeNames[s.typ]
	if s.nullable {
		want += " or null"
	}
	return fmt.Sprintf("must be %s, not %s", want, describe(v))
}

func (c *checker) checkObject(v *Value, s *schema) {
	for i := range s.props {
		p := &s.props[i]
		if p.required && v.Get(p.name) == nil {
			c.addAt(p.name, "required", fmt.Sprintf("required field %q is missing", p.name))
		}
	}
	if s.maxProps > 0 && len(v.Members) > s.maxProps {
		c.add("maxProperties", fmt.Sprintf("has %d fields; at most %d allowed", len(v.Members), s.maxProps))
	}
	for i := range v.Members {
		m := &v.Members[i]
		ps := s.lookup(m.Key)
		if ps == nil {
			if s.open == nil {
				c.addAt(m.Key, "additionalProperties", fmt.Sprintf("unknown field %q; allowed fields: %s", m.Key, s.fieldList()))
				continue
			}
			ps = s.open
		}
		if ps.typ == tAny {
			continue
		}
		c.push(m.Key)
		c.check(&m.Value, ps)
		c.pop()
	}
}

func (s *schema) lookup(name string) *schema {
	for i := range s.props {
		if s.props[i].name == name {
			return s.props[i].s
		}
	}
	return nil
}

func (s *schema) fieldList() string {
	names := make([]string, len(s.props))
	for i, p := range s.props {
		names[i] = p.name
	}
	return strings.Join(names, ", ")
}

func (c *checker) checkString(str string, s *schema) {
	if s.hasConst {
		if str != s.constStr {
			c.add("const", fmt.Sprintf("must be %q, not %s", s.constStr, quote(str)))
		}
		return
	}
	if s.enum != nil {
		for _, e := range s.enum {
			if e == str {
				return
			}
		}
		c.add("enum", fmt.Sprintf("%s is not one of: %s", quote(str), strings.Join(s.enum, ", ")))
		return
	}
	if s.minLen > 0 || s.maxLen > 0 {
		n := len(str) // byte count bounds the code-point count from above
		if (s.maxLen > 0 && n > s.maxLen) || n < s.minLen*4 {
			n = utf8.RuneCountInString(str)
		}
		if n < s.minLen {
			if s.minLen == 1 {
				c.add("minLength", "must not be empty")
			} else {
				c.add("minLength", fmt.Sprintf("is %d characters long; at least %d required", n, s.minLen))
			}
		} else if s.maxLen > 0 && n > s.maxLen {
			c.add("maxLength", fmt.Sprintf("is %d characters long; at most %d allowed", n, s.maxLen))
		}
	}
	switch s.format {
	case fTimestamp:
		if !IsTimestamp(str) {
			c.add("pattern", fmt.Sprintf("%s is not a valid timestamp: use RFC 3339, e.g. 2026-03-01T12:00:00Z (seconds and fraction optional, Z or ±hh:mm required, the date must exist)", quote(str)))
		}
	case fDateTime:
		if !isDateTime(str) {
			c.add("format", fmt.Sprintf("%s is not an RFC 3339 date-time, e.g. 2026-03-01T12:00:00Z", quote(str)))
		}
	case fURI:
		if !isAbsoluteURI(str) {
			c.add("format", fmt.Sprintf("%s is not an absolute URI (it needs a scheme, e.g. https://example.com/file)", quote(str)))
		}
	case fNotBlank:
		if strings.TrimFunc(str, unicode.IsSpace) == "" {
			c.add("notBlank", "must contain a non-whitespace character")
		}
	}
}

func (c *checker) checkNumber(v *Value, s *schema) {
	l := parseLiteral(v.Raw)
	if s.typ == tInteger && !l.isWhole() {
		c.add("type", fmt.Sprintf("must be integer, not %s", string(v.Raw)))
		return
	}
	if s.constInt != nil {
		n, ok := l.int64()
		if !ok || n != *s.constInt {
			c.add("const", fmt.Sprintf("must be %d, not %s", *s.constInt, string(v.Raw)))
		}
		return
	}
	if s.typ == tNumber {
		// Only "minimum: 0" (and exclusive) appears on plain numbers in the contract.
		if s.hasMin && l.isNegative() {
			c.add("minimum", fmt.Sprintf("is %s; must be at least 0", string(v.Raw)))
		}
		return
	}
	n, fits := l.int64()
	switch {
	case s.hasMin && (!fits && l.neg || fits && (n < s.min || s.exclusiveMin && n == s.min)):
		if s.exclusiveMin {
			c.add("exclusiveMinimum", fmt.Sprintf("is %s; must be greater than %d", string(v.Raw), s.min))
		} else {
			c.add("minimum", fmt.Sprintf("is %s; must be at least %d", string(v.Raw), s.min))
		}
	case s.hasMax && (!fits && !l.neg || fits && n > s.max):
		c.add("maximum", fmt.Sprintf("is %s; must be at most %d", string(v.Raw), s.max))
	}
}

// isAbsoluteURI reports whether s is an absolute URI: a scheme followed by ':' and a part Go's
// URL parser accepts.
func isAbsoluteURI(s string) bool {
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() {
		return false
	}
	if h := u.Hostname(); strings.Contains(h, ":") && !strings.Contains(u.Host, "[") {
		return false
	}
	return true
}
