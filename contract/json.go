package contract

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Default limits applied by [Limits.orDefault] when a field is zero.
const (
	// DefaultMaxBytes is the largest document accepted by default (1 MiB).
	DefaultMaxBytes = 1 << 20
	// DefaultMaxDepth is the deepest nesting of arrays and objects accepted by default.
	DefaultMaxDepth = 128
)

// Limits bounds the work the parser does on one document. Zero fields take the defaults.
type Limits struct {
	// MaxBytes is the largest document size in bytes.
	MaxBytes int
	// MaxDepth is the deepest nesting of arrays and objects; the top-level value is depth 1.
	MaxDepth int
}

func (l Limits) orDefault() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	return l
}

// Kind is the JSON type of a [Value].
type Kind uint8

// The JSON kinds.
const (
	KindNull Kind = iota
	KindBool
	KindNumber
	KindString
	KindArray
	KindObject
)

var kindNames = [...]string{"null", "boolean", "number", "string", "array", "object"}

// String returns the JSON Schema name of the kind ("null", "boolean", ...).
func (k Kind) String() string { return kindNames[k] }

// Value is one parsed JSON value. It keeps the source bytes it came from so that
// free JSON values can be re-emitted verbatim.
type Value struct {
	Kind    Kind
	Bool    bool
	Str     string   // decoded string, for String
	Num     float64  // for Number; always finite
	Elems   []Value  // for Array
	Members []Member // for Object, in source order (keys are unique)
	Raw     []byte   // the exact source bytes of this value
}

// Member is one key/value pair of an object.
type Member struct {
	Key    string
	RawKey []byte // the key's exact source bytes, quotes included
	Value  Value
}

// Get returns the member value for key, or nil when absent.
func (v *Value) Get(key string) *Value {
	for i := range v.Members {
		if v.Members[i].Key == key {
			return &v.Members[i].Value
		}
	}
	return nil
}

// SyntaxError reports a document that is not acceptable JSON: malformed, invalid UTF-8,
// duplicate keys, too deep, too large, a number out of range, or trailing data.
type SyntaxError struct {
	Offset int    // byte offset where the problem was found
	Path   string // JSON Pointer of the enclosing value, "" for the root
	Rule   string // json, utf8, duplicateKey, maxDepth, maxBytes, numberRange
	Msg    string
}

// Error describes the problem with its rule, byte offset and path.
func (e *SyntaxError) Error() string {
	p := e.Path
	if p == "" {
		p = "/"
	}
	return fmt.Sprintf("%s at byte %d (%s): %s", e.Rule, e.Offset, p, e.Msg)
}

// Parse parses exactly one JSON value from data, with strict rules: valid UTF-8 only (and no
// lone surrogate escapes), no duplicate object keys, nesting at most lim.MaxDepth, at most
// lim.MaxBytes bytes, finite numbers, and nothing but whitespace after the value.
// On failure it returns a *SyntaxError.
func Parse(data []byte, lim Limits) (Value, error) {
	return parse(data, lim.orDefault())
}

// parse is [Parse] with limits already defaulted: strings are copied and the Value owns its
// memory (apart from Raw, which is part of data).
func parse(data []byte, lim Limits) (Value, error) {
	p := getParser(data, lim, false)
	v, err := p.document()
	p.release()
	return v, err
}

// accepts reports whether [Parse] accepts data within lim, without keeping the value: a scratch
// parse, which costs no allocation once the pooled parser's arenas have grown.
func accepts(data []byte, lim Limits) bool {
	p := getParser(data, lim.orDefault(), true)
	_, err := p.document()
	p.release()
	return err == nil
}

// getParser returns a parser for data from the pool. With scratch set, the parse is for use
// inside this package only: decoded strings without escapes share memory with data, and the
// members and elements live in arenas that the parser reuses after release. Such a Value must
// not be used after p.release(), and data must not change while it is in use.
func getParser(data []byte, lim Limits, scratch bool) *parser {
	p := parserPool.Get().(*parser)
	p.data, p.pos, p.maxDepth, p.scratch = data, 0, lim.MaxDepth, scratch
	p.maxBytes = lim.MaxBytes
	if !scratch {
		p.marena, p.earena = nil, nil
	}
	p.mused, p.eused = 0, 0
	// A first guess at the number of members: about one per 24 bytes.
	p.arenaHint = min(max(len(data)/24, 16), 4096)
	return p
}

// document parses the whole input as one JSON value.
func (p *parser) document() (Value, error) {
	if len(p.data) > p.maxBytes {
		return Value{}, &SyntaxError{Offset: p.maxBytes, Rule: "maxBytes",
			Msg: fmt.Sprintf("document is %d bytes; the limit is %d", len(p.data), p.maxBytes)}
	}
	p.skipWS()
	v, err := p.value(1)
	if err != nil {
		return Value{}, err
	}
	p.skipWS()
	if p.pos < len(p.data) {
		return Value{}, p.fail("json", "unexpected data after the JSON value")
	}
	return v, nil
}

// parser holds the state of one parse. Members and elements of the objects and arrays being
// parsed collect on two scratch stacks; when a container closes, its items move into an arena
// chunk, so a document costs a few allocations instead of one or more per container (none at
// all for a scratch parse once the pooled arenas have grown to the workload).
type parser struct {
	data     []byte
	pos      int
	maxDepth int
	maxBytes int
	scratch  bool

	mstack []Member // members of the open objects
	estack []Value  // elements of the open arrays
	marena []Member // current member chunk; marena[:mused] is taken
	earena []Value  // current element chunk; earena[:eused] is taken
	mused  int
	eused  int
	sbuf   []byte // decoded strings with escapes, for a scratch parse
	root   Value  // the document's value, for a scratch parse

	arenaHint int
}

var parserPool = sync.Pool{New: func() any { return new(parser) }}

// Pooled scratch space above these sizes is dropped rather than kept.
const (
	maxPooledMembers = 1 << 12
	maxPooledStack   = 1 << 10
)

// release returns the parser to the pool. After it, a scratch Value is invalid.
func (p *parser) release() {
	p.data = nil
	p.root = Value{}
	p.mstack, p.estack = p.mstack[:0], p.estack[:0]
	p.sbuf = p.sbuf[:0]
	if cap(p.sbuf) > 1<<16 {
		p.sbuf = nil
	}
	if !p.scratch || len(p.marena) > maxPooledMembers || len(p.earena) > maxPooledMembers {
		p.marena, p.earena = nil, nil
	}
	if cap(p.mstack) > maxPooledStack || cap(p.estack) > maxPooledStack {
		return // do not keep huge scratch space alive
	}
	parserPool.Put(p)
}

// members moves the members above mark from the stack into the arena and returns them.
func (p *parser) members(mark int) []Member {
	n := len(p.mstack) - mark
	if p.mused+n > len(p.marena) {
		p.marena = make([]Member, max(n, p.arenaHint, 2*len(p.marena)))
		p.mused = 0
	}
	out := p.marena[p.mused : p.mused+n : p.mused+n]
	p.mused += n
	copy(out, p.mstack[mark:])
	p.mstack = p.mstack[:mark]
	return out
}

// elems moves the elements above mark from the stack into the arena and returns them.
func (p *parser) elems(mark int) []Value {
	n := len(p.estack) - mark
	if p.eused+n > len(p.earena) {
		p.earena = make([]Value, max(n, p.arenaHint/2, 2*len(p.earena)))
		p.eused = 0
	}
	out := p.earena[p.eused : p.eused+n : p.eused+n]
	p.eused += n
	copy(out, p.estack[mark:])
	p.estack = p.estack[:mark]
	return out
}

func (p *parser) fail(rule, msg string) *SyntaxError {
	return &SyntaxError{Offset: p.pos, Rule: rule, Msg: msg}
}

func (p *parser) skipWS() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// prefixPath adds one path segment in front of a syntax error's path as the recursion unwinds.
func prefixPath(err error, seg string) error {
	if se, ok := err.(*SyntaxError); ok {
		se.Path = "/" + escapePointer(seg) + se.Path
	}
	return err
}

func (p *parser) value(depth int) (Value, error) {
	if p.pos >= len(p.data) {
		return Value{}, p.fail("json", "unexpected end of input; expected a value")
	}
	start := p.pos
	switch c := p.data[p.pos]; {
	case c == '{':
		if depth > p.maxDepth {
			return Value{}, p.fail("maxDepth", fmt.Sprintf("nesting deeper than %d levels", p.maxDepth))
		}
		return p.object(depth, start)
	case c == '[':
		if depth > p.maxDepth {
			return Value{}, p.fail("maxDepth", fmt.Sprintf("nesting deeper than %d levels", p.maxDepth))
		}
		return p.array(depth, start)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return Value{}, err
		}
		return Value{Kind: KindString, Str: s, Raw: p.data[start:p.pos]}, nil
	case c == 't':
		return p.literal("true", Value{Kind: KindBool, Bool: true})
	case c == 'f':
		return p.literal("false", Value{Kind: KindBool})
	case c == 'n':
		return p.literal("null", Value{Kind: KindNull})
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		return Value{}, p.fail("json", fmt.Sprintf("unexpected character %q; expected a value", rune(c)))
	}
}

func (p *parser) literal(word string, v Value) (Value, error) {
	if len(p.data)-p.pos < len(word) || string(p.data[p.pos:p.pos+len(word)]) != word {
		return Value{}, p.fail("json", "invalid literal; expected "+word)
	}
	v.Raw = p.data[p.pos : p.pos+len(word)]
	p.pos += len(word)
	return v, nil
}

func (p *parser) object(depth, start int) (Value, error) {
	p.pos++ // {
	v := Value{Kind: KindObject}
	p.skipWS()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		v.Raw = p.data[start:p.pos]
		return v, nil
	}
	mark := len(p.mstack)
	var seen map[string]struct{} // for large objects, so that the duplicate check stays linear
	for {
		p.skipWS()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return Value{}, p.fail("json", "expected a string object key")
		}
		keyPos := p.pos
		key, err := p.str()
		if err != nil {
			return Value{}, err
		}
		keyEnd := p.pos
		open := p.mstack[mark:]
		dup := false
		if seen != nil {
			_, dup = seen[key]
			seen[key] = struct{}{}
		} else {
			for i := range open {
				if open[i].Key == key {
					dup = true
					break
				}
			}
			if !dup && len(open) >= 32 {
				seen = make(map[string]struct{}, 2*len(open))
				for i := range open {
					seen[open[i].Key] = struct{}{}
				}
				seen[key] = struct{}{}
			}
		}
		if dup {
			p.pos = keyPos
			return Value{}, p.fail("duplicateKey", fmt.Sprintf("key %q appears more than once in the object", key))
		}
		p.skipWS()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return Value{}, p.fail("json", "expected ':' after object key")
		}
		p.pos++
		p.skipWS()
		elem, err := p.value(depth + 1)
		if err != nil {
			return Value{}, prefixPath(err, key)
		}
		p.mstack = append(p.mstack, Member{Key: key, RawKey: p.data[keyPos:keyEnd], Value: elem})
		p.skipWS()
		if p.pos >= len(p.data) {
			return Value{}, p.fail("json", "unexpected end of input in object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			v.Raw = p.data[start:p.pos]
			v.Members = p.members(mark)
			return v, nil
		default:
			return Value{}, p.fail("json", "expected ',' or '}' in object")
		}
	}
}

func (p *parser) array(depth, start int) (Value, error) {
	p.pos++ // [
	v := Value{Kind: KindArray}
	p.skipWS()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		v.Raw = p.data[start:p.pos]
		return v, nil
	}
	mark := len(p.estack)
	for {
		p.skipWS()
		elem, err := p.value(depth + 1)
		if err != nil {
			return Value{}, prefixPath(err, strconv.Itoa(len(p.estack)-mark))
		}
		p.estack = append(p.estack, elem)
		p.skipWS()
		if p.pos >= len(p.data) {
			return Value{}, p.fail("json", "unexpected end of input in array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			v.Raw = p.data[start:p.pos]
			v.Elems = p.elems(mark)
			return v, nil
		default:
			return Value{}, p.fail("json", "expected ',' or ']' in array")
		}
	}
}

func (p *parser) number() (Value, error) {
	start := p.pos
	d := p.data
	if p.pos < len(d) && d[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(d) && d[p.pos] == '0':
		p.pos++
	case p.pos < len(d) && d[p.pos] >= '1' && d[p.pos] <= '9':
		for p.pos < len(d) && d[p.pos] >= '0' && d[p.pos] <= '9' {
			p.pos++
		}
	default:
		return Value{}, p.fail("json", "invalid number: expected a digit")
	}
	if p.pos < len(d) && d[p.pos] == '.' {
		p.pos++
		if p.pos >= len(d) || d[p.pos] < '0' || d[p.pos] > '9' {
			return Value{}, p.fail("json", "invalid number: expected a digit after '.'")
		}
		for p.pos < len(d) && d[p.pos] >= '0' && d[p.pos] <= '9' {
			p.pos++
		}
	}
	if p.pos < len(d) && (d[p.pos] == 'e' || d[p.pos] == 'E') {
		p.pos++
		if p.pos < len(d) && (d[p.pos] == '+' || d[p.pos] == '-') {
			p.pos++
		}
		if p.pos >= len(d) || d[p.pos] < '0' || d[p.pos] > '9' {
			return Value{}, p.fail("json", "invalid number: expected a digit in the exponent")
		}
		for p.pos < len(d) && d[p.pos] >= '0' && d[p.pos] <= '9' {
			p.pos++
		}
	}
	raw := d[start:p.pos]
	if f, ok := smallInt(raw); ok {
		return Value{Kind: KindNumber, Num: f, Raw: raw}, nil
	}
	f, err := strconv.ParseFloat(unsafe.String(&raw[0], len(raw)), 64)
	if err != nil && (math.IsInf(f, 0) || math.IsNaN(f)) {
		p.pos = start
		return Value{}, p.fail("numberRange", "number is too large to represent")
	}
	return Value{Kind: KindNumber, Num: f, Raw: raw}, nil
}

// plainASCII marks the bytes a string can hold as they are: printable ASCII except '"' and '\\'.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// smallInt returns the value of an integer literal of at most 15 digits (exact in float64)
// without going through strconv.
func smallInt(raw []byte) (float64, bool) {
	i, neg := 0, false
	if raw[0] == '-' {
		neg, i = true, 1
	}
	if len(raw)-i > 15 {
		return 0, false
	}
	var n int64
	for ; i < len(raw); i++ {
		c := raw[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	f := float64(n)
	if neg {
		f = -f
	}
	return f, true
}

// str parses a JSON string at p.pos (which holds '"') and returns its decoded value.
func (p *parser) str() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	d := p.data
	// Fast path: no escapes, ASCII or valid UTF-8.
	for p.pos < len(d) {
		i := p.pos
		for i < len(d) && plainASCII[d[i]] {
			i++
		}
		p.pos = i
		if i >= len(d) {
			break
		}
		c := d[i]
		if c == '"' {
			var s string
			if p.scratch {
				s = unsafe.String(unsafe.SliceData(d[start:p.pos]), p.pos-start)
			} else {
				s = string(d[start:p.pos])
			}
			p.pos++
			return s, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.fail("json", "control character in string; it must be escaped")
		}
		if c < utf8.RuneSelf {
			p.pos++
			continue
		}
		r, size := utf8.DecodeRune(d[p.pos:])
		if r == utf8.RuneError && size <= 1 {
			return "", p.fail("utf8", "invalid UTF-8 in string")
		}
		p.pos += size
	}
	if p.pos >= len(d) {
		return "", p.fail("json", "unterminated string")
	}
	return p.strEscaped(start)
}

// strEscaped finishes the string that begins at start and holds an escape at p.pos (the slow
// path of str): it decodes the string into a new slice, or for a scratch parse into the
// parser's reusable buffer (strings already handed out keep pointing at the old array if it
// grows).
func (p *parser) strEscaped(start int) (string, error) {
	d := p.data
	var b []byte
	if p.scratch {
		b = p.sbuf
	}
	mark := len(b)
	b = append(b, d[start:p.pos]...)
	for p.pos < len(d) {
		c := d[p.pos]
		switch {
		case c == '"':
			p.pos++
			if p.scratch {
				p.sbuf = b
			}
			if len(b) == mark {
				return "", nil
			}
			return unsafe.String(&b[mark], len(b)-mark), nil
		case c == '\\':
			if p.pos+1 < len(d) && unescaped[d[p.pos+1]] != 0 { // the common one-byte escapes, inline
				b = append(b, unescaped[d[p.pos+1]])
				p.pos += 2
				continue
			}
			var err error
			if b, err = p.escape(b); err != nil {
				return "", err
			}
		case c < 0x20:
			return "", p.fail("json", "control character in string; it must be escaped")
		case c < utf8.RuneSelf:
			b = append(b, c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(d[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.fail("utf8", "invalid UTF-8 in string")
			}
			b = append(b, d[p.pos:p.pos+size]...)
			p.pos += size
		}
	}
	return "", p.fail("json", "unterminated string")
}

// unescaped maps the letter of each one-byte escape (\", \\, \/, \b, \f, \n, \r, \t) to the byte
// it stands for; it is 0 for every other byte.
var unescaped = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// escape decodes the escape sequence at p.pos (which holds '\\'), appends what it stands for to
// b and moves past it. strEscaped decodes the one-byte escapes inline and calls this for the
// rest (\u escapes and the errors).
func (p *parser) escape(b []byte) ([]byte, error) {
	d := p.data
	if p.pos+1 >= len(d) {
		return b, p.fail("json", "unterminated escape in string")
	}
	e := d[p.pos+1]
	if u := unescaped[e]; u != 0 {
		p.pos += 2
		return append(b, u), nil
	}
	if e != 'u' {
		return b, p.fail("json", fmt.Sprintf("invalid escape '\\%c' in string", e))
	}
	p.pos += 2
	r, err := p.unicodeEscape()
	if err != nil {
		return b, err
	}
	return utf8.AppendRune(b, r), nil
}

// unicodeEscape decodes the 4 hex digits of a \u escape at p.pos and, for the high half of a
// UTF-16 surrogate pair, the \u escape of the low half that must follow it.
func (p *parser) unicodeEscape() (rune, error) {
	d := p.data
	r, ok := p.hex4()
	if !ok {
		return 0, p.fail("json", `invalid \u escape: expected 4 hex digits`)
	}
	if utf16.IsSurrogate(r) {
		if r >= 0xDC00 || p.pos+1 >= len(d) || d[p.pos] != '\\' || d[p.pos+1] != 'u' {
			return 0, p.fail("utf8", "lone UTF-16 surrogate in \\u escape")
		}
		p.pos += 2
		r2, ok := p.hex4()
		if !ok || r2 < 0xDC00 || r2 > 0xDFFF {
			return 0, p.fail("utf8", "lone UTF-16 surrogate in \\u escape")
		}
		r = utf16.DecodeRune(r, r2)
	}
	return r, nil
}

func (p *parser) hex4() (rune, bool) {
	if p.pos+4 > len(p.data) {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	p.pos += 4
	return r, true
}

// escapePointer escapes one JSON Pointer reference token (RFC 6901).
func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
