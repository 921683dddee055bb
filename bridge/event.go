package bridge

import (
	"bytes"
	"errors"
	"fmt"
	"unsafe"

	"github.com/sessiond/sessiond/contract"
)

// Event is what the projection reads of a stored event: its type, its run and the few payload
// fields the [Fold] needs, read in one pass over the stored JSON by [Decode]. An Event never
// changes once decoded, so one decoding serves every stream that projects the event (the
// server keeps it with the event in its live ring). Its byte slices, and its strings that
// needed no unescaping, share Data's bytes: Data must not change after Decode.
type Event struct {
	// Data is the event as stored (canonical JSON) and Payload its payload member.
	Data, Payload []byte
	// Type is the eventType, RunID the runId ("" without one).
	Type, RunID string
	// ID is the payload's subject: messageId, reasoningId, toolCallId, approvalId, planId,
	// taskId, artifactId, path (diff, workspace-file), testId, commandId (steer), summaryId.
	ID string
	// Role, Operation, Status, ToolName, ToolCallID (approval), Title (approval) are the
	// payload's members of these names.
	Role, Operation, Status, ToolName, ToolCallID, Title string
	// Detail is a status's or task's detail, or a tool call's error (nil when absent or null).
	Detail *string
	// Code and Message are an error event's.
	Code, Message string
	// Text is a reasoning's text, or a message's text parts concatenated; TextJSON is the
	// same text as the contents of a JSON string (escaped, no quotes), as stored.
	Text     string
	TextJSON []byte
	// Parts are a message's parts, Other those of them that are not text, in order.
	Parts, Other []contract.RawJSON
	// Input and Output are a tool call's (nil when absent).
	Input, Output []byte
	// Steps are a plan's steps.
	Steps []Step

	parts [2]contract.RawJSON // room for the parts of most messages
}

// Step is a plan step as the fold reads it.
type Step struct{ ID, Title, Status string }

var errSyntax = errors.New("malformed JSON")

// Decode reads a stored event for [Fold.Apply]. The store keeps events as validated
// canonical JSON, so Decode reads it in one pass without building a tree: the envelope's
// eventType and runId, then the payload's members the fold uses. data must not change
// afterwards (the Event shares its bytes).
func Decode(data []byte) (*Event, error) {
	e := new(Event)
	if err := e.Decode(data); err != nil {
		return nil, err
	}
	return e, nil
}

// Decode is [Decode] into e, which it resets first: a stream that does not share its events
// reads them all into one Event. What an earlier decoding left in e is then gone, but not
// what it pointed into (the stored bytes).
func (e *Event) Decode(data []byte) error {
	*e = Event{Data: data}
	s := scanner{b: data}
	ok := s.object(func(key, val []byte) bool {
		switch string(key) {
		case "eventType":
			e.Type, _ = unquote(val)
		case "runId":
			e.RunID, _ = unquote(val)
		case "payload":
			e.Payload = val
		}
		return true
	})
	if !ok || s.trailing() {
		return fmt.Errorf("bridge: decode event: %w", errSyntax)
	}
	if e.Type == "" {
		return fmt.Errorf("bridge: decode event: no eventType")
	}
	if e.Payload != nil && !e.payload() {
		return fmt.Errorf("bridge: decode %s event: payload: %w", e.Type, errSyntax)
	}
	return nil
}

// named are the payload members read as they are into the Event's string fields of the
// same names (see payload).
var named = [...]string{"role", "operation", "status", "toolName", "title", "code", "message"}

// payload reads the payload members the fold uses for the event's type.
func (e *Event) payload() bool {
	s := scanner{b: e.Payload}
	var text []byte
	dst := [len(named)]*string{&e.Role, &e.Operation, &e.Status, &e.ToolName, &e.Title, &e.Code, &e.Message}
	ok := s.object(func(key, val []byte) bool {
		switch string(key) {
		case "messageId", "reasoningId", "approvalId", "planId", "taskId", "artifactId", "testId", "summaryId":
			e.ID, _ = unquote(val)
		case "toolCallId":
			if e.Type == "approval" {
				e.ToolCallID, _ = unquote(val)
			} else {
				e.ID, _ = unquote(val)
			}
		case "path":
			if e.Type == "diff" || e.Type == "workspace-file" {
				e.ID, _ = unquote(val)
			}
		case "commandId":
			if e.Type == "steer" {
				e.ID, _ = unquote(val)
			}
		case "role", "operation", "status", "toolName", "title", "code", "message":
			for i := range named {
				if named[i] == string(key) {
					*dst[i], _ = unquote(val)
				}
			}
		case "detail", "error":
			if (key[0] == 'd') == (e.Type != "tool") && len(val) > 0 && val[0] == '"' {
				if d, ok := unquote(val); ok {
					e.Detail = &d
				}
			}
		case "text":
			if e.Type == "reasoning" && len(val) > 1 && val[0] == '"' {
				text = val[1 : len(val)-1]
			}
		case "input":
			e.Input = val
		case "output":
			e.Output = val
		case "parts":
			return e.readParts(val, &text)
		case "steps":
			return e.steps(val)
		}
		return true
	})
	if !ok {
		return false
	}
	if len(text) > 0 {
		e.TextJSON = text
		var tok bool
		if e.Text, tok = unescape(text); !tok {
			return false
		}
	}
	return true
}

// parts reads a message's parts: every part, those that are not text, and the text parts'
// contents concatenated (as stored).
func (e *Event) readParts(val []byte, text *[]byte) bool {
	s := scanner{b: val}
	n := 0
	e.Parts = e.parts[:0]
	ok := s.array(func(part []byte) bool {
		e.Parts = append(e.Parts, contract.RawJSON(part))
		t, ok := partText(part)
		if !ok {
			e.Other = append(e.Other, contract.RawJSON(part))
			return true
		}
		switch n++; n {
		case 1: // the text of one part stays where it is stored
			*text = t
		case 2:
			*text = append(append([]byte(nil), *text...), t...)
		default:
			*text = append(*text, t...)
		}
		return true
	})
	return ok
}

func (e *Event) steps(val []byte) bool {
	s := scanner{b: val}
	return s.array(func(step []byte) bool {
		var st Step
		ss := scanner{b: step}
		ok := ss.object(func(key, v []byte) bool {
			switch string(key) {
			case "id":
				st.ID, _ = unquote(v)
			case "title":
				st.Title, _ = unquote(v)
			case "status":
				st.Status, _ = unquote(v)
			}
			return true
		})
		e.Steps = append(e.Steps, st)
		return ok
	})
}

// partText returns the text of a message part as stored (the contents of its JSON string):
// a text part's text, or a part that is a plain string (the contract allows any JSON value
// as a part).
func partText(part []byte) ([]byte, bool) {
	if len(part) >= 2 && part[0] == '"' {
		return part[1 : len(part)-1], true
	}
	if len(part) == 0 || part[0] != '{' {
		return nil, false
	}
	var typ, text []byte
	isText := false
	s := scanner{b: part}
	ok := s.object(func(key, val []byte) bool {
		switch string(key) {
		case "type":
			typ = val
		case "text":
			if len(val) >= 2 && val[0] == '"' {
				text, isText = val[1:len(val)-1], true
			}
		}
		return true
	})
	if !ok || !isText || string(typ) != `"text"` {
		return nil, false
	}
	return text, true
}

// PartText is the text of a message part: a text part's text, or a part that is a plain
// string (the contract allows any JSON value as a part).
// The text may share part's bytes, which must not change afterwards.
func PartText(part contract.RawJSON) (string, bool) {
	t, ok := partText(part)
	if !ok {
		return "", false
	}
	return unescape(t)
}

// scanner reads JSON that is known to be well-formed (the store's canonical JSON) without
// building a tree; it still checks what it walks, so malformed input is an error, not a panic.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// trailing reports whether anything but whitespace follows.
func (s *scanner) trailing() bool { s.ws(); return s.i < len(s.b) }

// str skips the string at s.i (its opening quote) and reports whether it was closed.
func (s *scanner) str() bool {
	s.i++
	for {
		j := bytes.IndexByte(s.b[s.i:], '"')
		if j < 0 {
			s.i = len(s.b)
			return false
		}
		s.i += j + 1
		// The quote is escaped when an odd number of backslashes precede it.
		k := s.i - 2
		for k >= 0 && s.b[k] == '\\' {
			k--
		}
		if (s.i-2-k)%2 == 0 {
			return true
		}
	}
}

// value skips one value and returns its bytes (nil when malformed).
func (s *scanner) value() []byte {
	s.ws()
	if s.i >= len(s.b) {
		return nil
	}
	start := s.i
	switch s.b[s.i] {
	case '"':
		if !s.str() {
			return nil
		}
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if !s.str() {
					return nil
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				return s.b[start:s.i]
			}
		}
		return nil
	default:
		for s.i < len(s.b) {
			c := s.b[s.i]
			if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				break
			}
			s.i++
		}
		if s.i == start {
			return nil
		}
	}
	return s.b[start:s.i]
}

// object calls fn with each member of the object at s.i (its key decoded, its value's bytes)
// until fn returns false; it reports whether the object was well-formed and fn never refused.
func (s *scanner) object(fn func(key, val []byte) bool) bool {
	if !s.eat('{') {
		return false
	}
	if s.eat('}') {
		return true
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		k0 := s.i
		if !s.str() {
			return false
		}
		key := s.b[k0+1 : s.i-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			k, ok := unescape(key)
			if !ok {
				return false
			}
			key = []byte(k)
		}
		if !s.eat(':') {
			return false
		}
		val := s.value()
		if val == nil || !fn(key, val) {
			return false
		}
		if s.eat(',') {
			continue
		}
		return s.eat('}')
	}
}

// array calls fn with each element of the array at s.i, as object does with members.
func (s *scanner) array(fn func(val []byte) bool) bool {
	if !s.eat('[') {
		return false
	}
	if s.eat(']') {
		return true
	}
	for {
		val := s.value()
		if val == nil || !fn(val) {
			return false
		}
		if s.eat(',') {
			continue
		}
		return s.eat(']')
	}
}

// unquote decodes a JSON string value; false when val is not a string.
func unquote(val []byte) (string, bool) {
	if len(val) < 2 || val[0] != '"' {
		return "", false
	}
	return unescape(val[1 : len(val)-1])
}

// unescape decodes the contents of a JSON string. Without escapes the string is a view of
// the bytes (the callers' bytes never change, see Decode); with escapes the contract's strict
// parser decodes it, so JSON's escapes are read in one place.
func unescape(s []byte) (string, bool) {
	if bytes.IndexByte(s, '\\') < 0 {
		if len(s) == 0 {
			return "", true
		}
		return unsafe.String(&s[0], len(s)), true
	}
	q := make([]byte, 0, len(s)+2)
	q = append(append(append(q, '"'), s...), '"')
	v, err := contract.Parse(q, contract.Limits{MaxBytes: len(q)})
	if err != nil || v.Kind != contract.KindString {
		return "", false
	}
	return v.Str, true
}
