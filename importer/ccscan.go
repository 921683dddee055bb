package importer

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxScanDepth is the deepest nesting decodeCCScan reads; a deeper line is declined.
const maxScanDepth = 512

// decodeCCScan decodes a Claude Code line in one pass over its bytes into what decodeCCRaw
// (encoding/json, the reference) gives for it, except that a message's content that is an
// array of block objects, none of them an image, comes decoded into its blocks (the blocks
// that function blocks gives for it). It declines (ok false) every line on which it could
// differ from encoding/json, and decodeCCRaw decodes those: invalid UTF-8 (which encoding/json
// replaces), a lone surrogate escape in a string it decodes, a key of a mapped object (the
// line, its message, the message's usage, toolUseResult) that is repeated, that differs from
// a field's name only in case (encoding/json ignores case, and the last key wins), or that has
// an escape or a non-ASCII byte, a mapped field of another type than the importer reads (a
// usage count that is not an integer of 64 bits, a message that is not an object), nesting
// deeper than maxScanDepth, and anything that is not one JSON object. A content array it
// cannot decode that way (an element that is not an object, a block field of another type, a
// key as above in a block, an image block) is kept raw, as decodeCCRaw keeps it.
func decodeCCScan(raw []byte) (l ccLine, ok bool) {
	if !utf8.Valid(raw) {
		return ccLine{}, false
	}
	s := ccScanner{b: raw}
	if !s.line(&l) {
		return ccLine{}, false
	}
	if s.ws(); s.i != len(s.b) {
		return ccLine{}, false
	}
	return l, true
}

// ccScanner reads one line: b from i on, nested depth deep.
type ccScanner struct {
	b     []byte
	i     int
	depth int
}

// The fields of each mapped object, in the order of the bits that record which were seen.
var (
	ccLineFields  = []string{"type", "uuid", "sessionId", "timestamp", "isSidechain", "isMeta", "agentId", "cwd", "summary", "leafUuid", "message", "toolUseResult"}
	ccMsgFields   = []string{"id", "role", "model", "content", "usage"}
	ccUsageFields = []string{"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"}
	ccBlockFields = []string{"type", "text", "thinking", "id", "name", "input", "tool_use_id", "content", "is_error"}
	ccTURFields   = []string{"agentId"}
)

// field returns the index in names of key, after checking that it is the first time the
// object has it (seen): -1 for a key that is none of them; ok false for a repeated key or one
// that matches a name only when case is ignored.
func field(key []byte, names []string, seen *uint32) (i int, ok bool) {
	for k, n := range names {
		if string(key) == n {
			if *seen&(1<<k) != 0 {
				return 0, false
			}
			*seen |= 1 << k
			return k, true
		}
	}
	for _, n := range names {
		if len(n) == len(key) && asciiEqualFold(key, n) {
			return 0, false
		}
	}
	return -1, true
}

// asciiEqualFold reports whether the ASCII texts a and b are equal when case is ignored.
func asciiEqualFold(a []byte, b string) bool {
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// object reads a mapped object, the next value: for each member it finds the key's index in
// names (field: a repeated key, or one that matches a name only when case is ignored, fails the
// object) and calls value with it, -1 for a key that is none of them, to read the member's
// value. It fails when the value is not an object or value fails.
func (s *ccScanner) object(names []string, value func(f int) bool) bool {
	var seen uint32
	return s.members(true, func(key []byte) bool {
		f, ok := field(key, names, &seen)
		return ok && value(f)
	})
}

// members reads the object that is the next value, calling value with each member's key to
// read that member's value; with plain, keys with an escape or a non-ASCII byte fail it (key).
func (s *ccScanner) members(plain bool, value func(key []byte) bool) bool {
	if !s.open('{') {
		return false
	}
	for n := 0; ; n++ {
		key, done, ok := s.key(n, plain)
		if !ok || (!done && !value(key)) {
			return false
		}
		if done {
			return true
		}
	}
}

// elements reads the array that is the next value, calling elem to read each element.
func (s *ccScanner) elements(elem func() bool) bool {
	if !s.open('[') {
		return false
	}
	if s.peek() == ']' {
		s.i++
		s.depth--
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch s.peek() {
		case ']':
			s.i++
			s.depth--
			return true
		case ',':
			s.i++
		default:
			return false
		}
	}
}

func (s *ccScanner) line(l *ccLine) bool {
	return s.object(ccLineFields, func(f int) bool {
		switch f {
		case 0:
			return s.str(&l.Type)
		case 1:
			return s.str(&l.UUID)
		case 2:
			return s.str(&l.SessionID)
		case 3:
			return s.str(&l.Timestamp)
		case 4:
			var p *bool
			ok := s.boolean(&p)
			if p != nil {
				l.IsSidechain = *p
			}
			return ok
		case 5:
			return s.boolean(&l.IsMeta)
		case 6:
			if s.null() {
				return true
			}
			var v string
			l.AgentID = &v
			return s.str(&v)
		case 7:
			return s.str(&l.Cwd)
		case 8:
			return s.str(&l.Summary)
		case 9:
			return s.str(&l.LeafUUID)
		case 10:
			return s.message(&l.Message)
		case 11:
			return s.toolUseResult(&l.ToolAgent)
		}
		return s.skip()
	})
}

// message reads a line's message: an object, or null (none).
func (s *ccScanner) message(dst **ccMessage) bool {
	if s.null() {
		return true
	}
	m := &ccMessage{}
	*dst = m
	return s.object(ccMsgFields, func(f int) bool {
		switch f {
		case 0:
			return s.str(&m.ID)
		case 1:
			return s.str(&m.Role)
		case 2:
			return s.str(&m.Model)
		case 3:
			return s.content(m)
		case 4:
			return s.usage(&m.Usage)
		}
		return s.skip()
	})
}

// content reads a message's content: decoded into blocks when it is an array that decodes so,
// else kept raw.
func (s *ccScanner) content(m *ccMessage) bool {
	peek := s.peek()
	start := s.i
	if peek == '[' {
		if parts, ok := s.blocks(); ok {
			m.decoded, m.parts = true, parts
			return true
		}
		s.i = start // blocks left the depth as it found it
	}
	raw, ok := s.raw()
	m.Content = raw
	return ok
}

// blocks reads an array of content blocks (an element null is a block with no field set, as
// encoding/json decodes it); ok false, with the scanner's position left anywhere but its depth
// as it was, for an array that does not decode so, or that holds an image block (kept raw).
func (s *ccScanner) blocks() ([]ccBlock, bool) {
	depth := s.depth
	parts := []ccBlock{}
	ok := s.elements(func() bool {
		var b ccBlock
		if !s.null() && !s.block(&b) { // an image block fails too
			return false
		}
		parts = append(parts, b)
		return true
	})
	if !ok {
		s.depth = depth
		return nil, false
	}
	return parts, true
}

func (s *ccScanner) block(b *ccBlock) bool {
	return s.object(ccBlockFields, func(f int) bool {
		var ok bool
		switch f {
		case 0:
			// An image block is kept raw: no need to read its data (often large) twice.
			return s.str(&b.Type) && b.Type != "image"
		case 1:
			return s.str(&b.Text)
		case 2:
			return s.str(&b.Thinking)
		case 3:
			return s.str(&b.ID)
		case 4:
			return s.str(&b.Name)
		case 5:
			b.Input, ok = s.raw()
			return ok
		case 6:
			return s.str(&b.ToolUseID)
		case 7:
			b.Content, ok = s.raw()
			return ok
		case 8:
			return s.boolean(&b.IsError)
		}
		return s.skip()
	})
}

// usage reads a message's usage: an object of integer counts, or null (none).
func (s *ccScanner) usage(dst **ccUsage) bool {
	if s.null() {
		return true
	}
	u := &ccUsage{}
	*dst = u
	counts := [...]*int64{&u.InputTokens, &u.OutputTokens, &u.CacheCreationInputTokens, &u.CacheReadInputTokens}
	return s.object(ccUsageFields, func(f int) bool {
		if f < 0 {
			return s.skip()
		}
		return s.integer(counts[f])
	})
}

// toolUseResult reads a line's toolUseResult for the sub-agent it names: encoding/json leaves
// the agent unset for one that is not an object or whose agentId is not a string (decodeCCRaw
// decodes it apart from the rest of the line), and so does this.
func (s *ccScanner) toolUseResult(agent *string) bool {
	if s.peek() != '{' {
		return s.skip()
	}
	return s.object(ccTURFields, func(f int) bool {
		if f == 0 && s.peek() == '"' {
			return s.str(agent)
		}
		return s.skip()
	})
}

// ws skips white space.
func (s *ccScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the first byte of the next value (0 at the end).
func (s *ccScanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// open consumes the opening bracket c of an object or array, one level deeper.
func (s *ccScanner) open(c byte) bool {
	if s.peek() != c || s.depth >= maxScanDepth {
		return false
	}
	s.i++
	s.depth++
	return true
}

// key reads the key of the object's member n (0 for the first) and the colon after it; done
// at the object's end, which it consumes. With plain, a key with an escape or a byte that is
// not ASCII is refused (ok false): a mapped object's keys are compared as they are.
func (s *ccScanner) key(n int, plain bool) (key []byte, done, ok bool) {
	c := s.peek()
	if c == '}' {
		s.i++
		s.depth--
		return nil, true, true
	}
	if n > 0 {
		if c != ',' {
			return nil, false, false
		}
		s.i++
		c = s.peek()
	}
	if c != '"' {
		return nil, false, false
	}
	start := s.i + 1
	if plain {
		j := start
		for j < len(s.b) && s.b[j] != '"' {
			if c := s.b[j]; c == '\\' || c < 0x20 || c >= 0x80 {
				return nil, false, false
			}
			j++
		}
		if j == len(s.b) {
			return nil, false, false
		}
		key, s.i = s.b[start:j], j+1
	} else if !s.skipString() {
		return nil, false, false
	}
	if s.peek() != ':' {
		return nil, false, false
	}
	s.i++
	return key, false, true
}

// null consumes a null, if the next value is one.
func (s *ccScanner) null() bool {
	return s.peek() == 'n' && s.literal("null")
}

// str decodes a string into dst; null leaves dst as it is (encoding/json's rule, and dst is
// unset: a key comes once).
func (s *ccScanner) str(dst *string) bool {
	if s.null() {
		return true
	}
	if s.peek() != '"' {
		return false
	}
	start := s.i + 1
	j := start
	for j < len(s.b) {
		c := s.b[j]
		if c == '"' {
			*dst = string(s.b[start:j])
			s.i = j + 1
			return true
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return false
		}
		j++
	}
	return s.escaped(dst, start, j)
}

// escaped decodes the rest of a string with escapes: b[start:j] is its start, without any.
func (s *ccScanner) escaped(dst *string, start, j int) bool {
	out := append(make([]byte, 0, j-start+16), s.b[start:j]...)
	for j < len(s.b) {
		c := s.b[j]
		switch {
		case c == '"':
			*dst = string(out)
			s.i = j + 1
			return true
		case c < 0x20:
			return false
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(s.b) {
			return false
		}
		switch e := s.b[j+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(s.b[j+2:])
			if !ok {
				return false
			}
			if utf16.IsSurrogate(r) {
				// Only a pair decodes as itself; encoding/json replaces a lone half.
				r2, ok := rune(0), false
				if j+12 <= len(s.b) && s.b[j+6] == '\\' && s.b[j+7] == 'u' {
					r2, ok = hex4(s.b[j+8:])
				}
				if r = utf16.DecodeRune(r, r2); !ok || r == utf8.RuneError {
					return false
				}
				j += 6
			}
			out = utf8.AppendRune(out, r)
			j += 4
		default:
			return false
		}
		j += 2
	}
	return false
}

// hex4 decodes the four hexadecimal digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// boolean decodes true or false into a new *dst; null leaves *dst as it is (nil: a key comes
// once).
func (s *ccScanner) boolean(dst **bool) bool {
	if s.null() {
		return true
	}
	var v bool
	switch {
	case s.literal("true"):
		v = true
	case s.literal("false"):
	default:
		return false
	}
	*dst = &v
	return true
}

// integer decodes an integer of 64 bits into dst (encoding/json refuses a fraction or an
// exponent for an int64); null leaves dst as it is.
func (s *ccScanner) integer(dst *int64) bool {
	if s.null() {
		return true
	}
	start := s.i
	if !s.number() {
		return false
	}
	v, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	*dst = v
	return err == nil
}

// raw returns a copy of the next value's bytes (json.RawMessage's: null is kept as "null").
func (s *ccScanner) raw() (json.RawMessage, bool) {
	s.ws()
	start := s.i
	if !s.skip() {
		return nil, false
	}
	return bytes.Clone(s.b[start:s.i]), true
}

// skip consumes the next value, checking its syntax.
func (s *ccScanner) skip() bool {
	switch s.peek() {
	case '"':
		return s.skipString()
	case '{':
		return s.members(false, func([]byte) bool { return s.skip() })
	case '[':
		return s.elements(s.skip)
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.null()
	}
	return s.number()
}

// literal consumes lit, if the input goes on with it.
func (s *ccScanner) literal(lit string) bool {
	if bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		s.i += len(lit)
		return true
	}
	return false
}

// skipString consumes a string (the line is valid UTF-8: only escapes and control characters
// need a look).
func (s *ccScanner) skipString() bool {
	j := s.i + 1
	for j < len(s.b) {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return true
		case c == '\\':
			if j+1 >= len(s.b) {
				return false
			}
			switch s.b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if _, ok := hex4(s.b[j+2:]); !ok {
					return false
				}
				j += 6
			default:
				return false
			}
		case c < 0x20:
			return false
		default:
			j++
		}
	}
	return false
}

// number consumes a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *ccScanner) number() bool {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	s.i = i
	return true
}
