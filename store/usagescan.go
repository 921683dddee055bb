package store

import (
	"bytes"
	"encoding/json"
)

// scanUsage reads the members of an event the rollup needs (usageFields) without decoding the
// rest: a walk over the JSON that skips every other value (a tool's input and output can be
// large) and copies nothing but the few strings it keeps. It does not validate what it skips:
// the events it reads were validated before they were stored. It reports false when the
// event is not in the plain form it expects (an escaped key, a string it needs that has
// escapes in it); the caller then decodes the event with encoding/json.
func scanUsage(data []byte, f *usageFields) bool {
	s := scanner{b: data}
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "occurredAt":
			v, ok := s.plainString()
			f.OccurredAt = string(v)
			return ok
		case "runId":
			v, ok := s.plainString()
			f.RunID = string(v)
			return ok
		case "payload":
			return s.object(func(key []byte) bool {
				p := &f.Payload
				switch string(key) {
				case "inputTokens":
					return s.number(&p.InputTokens)
				case "outputTokens":
					return s.number(&p.OutputTokens)
				case "totalTokens":
					return s.number(&p.TotalTokens)
				case "durationMs":
					return s.number(&p.DurationMs)
				case "status":
					v, ok := s.plainString()
					p.Status = string(v)
					return ok
				case "toolName":
					v, ok := s.str()
					if !ok {
						return false
					}
					if bytes.IndexByte(v, '\\') < 0 {
						p.ToolName = string(v)
						return true
					}
					return json.Unmarshal(append(append([]byte{'"'}, v...), '"'), &p.ToolName) == nil
				}
				return s.skip()
			})
		}
		return s.skip()
	}) && s.end()
}

// scanner walks JSON text.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// object walks an object, calling member for each key (without escapes) with the scanner at
// its value; member must consume the value.
func (s *scanner) object(member func(key []byte) bool) bool {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	for {
		s.ws()
		key, ok := s.plainString()
		if !ok {
			return false
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.ws()
		if !member(key) {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// str reads a string and answers its raw contents (escapes as written).
func (s *scanner) str() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch s.b[j] {
		case '\\':
			j++
		case '"':
			s.i = j + 1
			return s.b[start:j], true
		}
	}
	return nil, false
}

// plainString reads a string without escapes.
func (s *scanner) plainString() ([]byte, bool) {
	v, ok := s.str()
	return v, ok && bytes.IndexByte(v, '\\') < 0
}

// number reads a number into n.
func (s *scanner) number(n *json.Number) bool {
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			s.i++
			continue
		}
		break
	}
	*n = json.Number(s.b[start:s.i])
	return s.i > start
}

// skip passes over one value.
func (s *scanner) skip() bool {
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; c {
	case '"':
		_, ok := s.str()
		return ok
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if _, ok := s.str(); !ok {
					return false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return true
				}
			}
			s.i++
		}
		return false
	default:
		start := s.i
		for s.i < len(s.b) {
			c := s.b[s.i]
			if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				break
			}
			s.i++
		}
		return s.i > start
	}
}

// decodeUsage reads the rollup's members of an event: by scanUsage, or by encoding/json when
// the scan declines.
func decodeUsage(data []byte, f *usageFields) error {
	if scanUsage(data, f) {
		return nil
	}
	*f = usageFields{}
	return json.Unmarshal(data, f)
}
