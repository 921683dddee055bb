package contract

import (
	"strconv"
	"unsafe"
)

// The canonical form of a validated document is its compact JSON, members in source order,
// strings and free values byte-for-byte as sent (only insignificant whitespace removed), and
// every schema integer written in plain form (1.0 and 1e2 become 1 and 100). It is what the
// store keeps and what readers get back.

var (
	eventSchemas   = map[string]*schema{}
	commandSchemas = map[string]*schema{}
)

func init() {
	for et, ps := range payloadSchemas {
		eventSchemas[et] = withPayload(eventHeader, ps)
	}
	for ct, ps := range commandPayloadSchemas {
		commandSchemas[ct] = withPayload(commandHeader, ps)
	}
}

func withPayload(header, payload *schema) *schema {
	s := *header
	s.props = append([]prop(nil), header.props...)
	for i := range s.props {
		if s.props[i].name == "payload" {
			s.props[i].s = payload
		}
	}
	return &s
}

func eventSchemaFor(v *Value) *schema {
	if et, ok := strField(v, "eventType"); ok {
		if s := eventSchemas[et]; s != nil {
			return s
		}
	}
	return eventHeader
}

// canonical returns the canonical encoding of a valid document of kind.
func canonical(kind string, v *Value) []byte {
	switch kind {
	case KindEvent:
		return appendCanonical(make([]byte, 0, len(v.Raw)), v, eventSchemaFor(v))
	case KindCommand:
		s := commandHeader
		if ct, ok := strField(v, "commandType"); ok && commandSchemas[ct] != nil {
			s = commandSchemas[ct]
		}
		return appendCanonical(nil, v, s)
	case KindView:
		buf := []byte{'{'}
		for i := range v.Members {
			m := &v.Members[i]
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendKey(buf, m)
			if m.Key == "events" && m.Value.Kind == KindArray {
				buf = append(buf, '[')
				for j := range m.Value.Elems {
					if j > 0 {
						buf = append(buf, ',')
					}
					e := &m.Value.Elems[j]
					buf = appendCanonical(buf, e, eventSchemaFor(e))
				}
				buf = append(buf, ']')
				continue
			}
			buf = appendCanonical(buf, &m.Value, viewSchema.lookup(m.Key))
		}
		return append(buf, '}')
	}
	return appendCanonical(nil, v, plainSchemas[kind])
}

// appendCanonical appends the canonical encoding of v, read with schema s (nil: free JSON).
func appendCanonical(buf []byte, v *Value, s *schema) []byte {
	if s != nil && s.typ == tAny {
		s = nil
	}
	switch v.Kind {
	case KindObject:
		buf = append(buf, '{')
		for i := range v.Members {
			m := &v.Members[i]
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendKey(buf, m)
			var cs *schema
			if s != nil {
				if cs = s.lookup(m.Key); cs == nil {
					cs = s.open
				}
			}
			buf = appendCanonical(buf, &m.Value, cs)
		}
		return append(buf, '}')
	case KindArray:
		buf = append(buf, '[')
		var is *schema
		if s != nil {
			is = s.items
		}
		for i := range v.Elems {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendCanonical(buf, &v.Elems[i], is)
		}
		return append(buf, ']')
	case KindNumber:
		if s != nil && (s.typ == tInteger || s.constInt != nil) {
			if n, ok := parseLiteral(v.Raw).int64(); ok {
				return strconv.AppendInt(buf, n, 10)
			}
		}
		return append(buf, v.Raw...)
	default:
		return append(buf, v.Raw...)
	}
}

// appendKey writes a member's key exactly as it was sent.
func appendKey(buf []byte, m *Member) []byte {
	buf = append(buf, m.RawKey...)
	return append(buf, ':')
}

// EncodedEvent is a validated event in canonical form with its envelope fields at hand, ready
// to be stored: the server replaces the sequence and keeps everything else as is.
type EncodedEvent struct {
	EventID         string
	SessionID       string
	RunID           string // "" when absent
	SourceMessageID string // "" when absent
	IdempotencyKey  string
	EventType       string
	OccurredAt      string
	Sequence        int64 // the sequence the event was sent with
	// RunStatus is set for a run status event (a status event with runId), nil otherwise.
	RunStatus *RunStatusFields

	body             []byte
	seqStart, seqEnd int // where the sequence digits sit in body
}

// CheckEvent parses and validates one event (schema and rules) and returns it encoded. On
// failure it returns a *[ValidationError] listing every problem.
func CheckEvent(data []byte, lim Limits) (*EncodedEvent, error) {
	var e *EncodedEvent
	if err := check(KindEvent, data, lim, func(v *Value) { e = encodeEvent(v) }); err != nil {
		return nil, err
	}
	return e, nil
}

// EncodeEvent validates a typed event and returns it encoded; it fails like [CheckEvent].
func EncodeEvent(e *Event) (*EncodedEvent, error) {
	data, err := Marshal(e)
	if err != nil {
		return nil, err
	}
	return CheckEvent(data, Limits{})
}

func encodeEvent(v *Value) *EncodedEvent {
	e := &EncodedEvent{}
	s := eventSchemaFor(v)
	buf := make([]byte, 0, len(v.Raw))
	buf = append(buf, '{')
	for i := range v.Members {
		m := &v.Members[i]
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendKey(buf, m)
		switch m.Key {
		case "sequence":
			n, _ := parseLiteral(m.Value.Raw).int64()
			e.Sequence = n
			e.seqStart = len(buf)
			buf = strconv.AppendInt(buf, n, 10)
			e.seqEnd = len(buf)
			continue
		case "eventId":
			e.EventID = m.Value.Str
		case "sessionId":
			e.SessionID = m.Value.Str
		case "runId":
			e.RunID = m.Value.Str
		case "sourceMessageId":
			e.SourceMessageID = m.Value.Str
		case "idempotencyKey":
			e.IdempotencyKey = m.Value.Str
		case "eventType":
			e.EventType = m.Value.Str
		case "occurredAt":
			e.OccurredAt = m.Value.Str
		}
		buf = appendCanonical(buf, &m.Value, s.lookup(m.Key))
	}
	e.body = append(buf, '}')
	cloneStrings(&e.EventID, &e.SessionID, &e.RunID, &e.SourceMessageID, &e.IdempotencyKey, &e.EventType, &e.OccurredAt)
	if e.EventType == "status" && e.RunID != "" {
		pl := v.Get("payload")
		e.RunStatus = &RunStatusFields{
			RunID: e.RunID, SourceMessageID: e.SourceMessageID, OccurredAt: e.OccurredAt,
			Status:              mustStr(pl, "status"),
			StartedAt:           mustStr(pl, "startedAt"),
			StoppingRequestedAt: mustStr(pl, "stoppingRequestedAt"),
			StoppedAt:           mustStr(pl, "stoppedAt"),
			CompletedAt:         mustStr(pl, "completedAt"),
			FailedAt:            mustStr(pl, "failedAt"),
		}
		if d := pl.Get("durationMs"); d != nil {
			e.RunStatus.DurationMs = string(d.Raw)
		}
		rs := e.RunStatus
		rs.RunID, rs.SourceMessageID, rs.OccurredAt = e.RunID, e.SourceMessageID, e.OccurredAt
		cloneStrings(&rs.Status, &rs.StartedAt, &rs.StoppingRequestedAt, &rs.StoppedAt, &rs.CompletedAt, &rs.FailedAt)
	}
	return e
}

// cloneStrings copies the given strings into one new allocation, so that they no longer share
// memory with the document they were parsed from.
func cloneStrings(ss ...*string) {
	n := 0
	for _, s := range ss {
		n += len(*s)
	}
	if n == 0 {
		return
	}
	buf := make([]byte, 0, n)
	for _, s := range ss {
		if len(*s) == 0 {
			continue
		}
		start := len(buf)
		buf = append(buf, *s...)
		*s = unsafe.String(&buf[start], len(*s))
	}
}

// JSON returns the canonical event with its sequence set to seq. The result is a new slice.
func (e *EncodedEvent) JSON(seq int64) []byte {
	out := make([]byte, 0, len(e.body)+20)
	out = append(out, e.body[:e.seqStart]...)
	out = strconv.AppendInt(out, seq, 10)
	return append(out, e.body[e.seqEnd:]...)
}

// Around returns the canonical event's bytes before and after its sequence digits: JSON(seq) is
// head, then seq in decimal, then tail. A store that assigns the sequence where it writes
// (PostgreSQL, in SQL) builds the stored bytes from them. The slices share the event's memory:
// do not modify them.
func (e *EncodedEvent) Around() (head, tail []byte) {
	return e.body[:e.seqStart:e.seqStart], e.body[e.seqEnd:]
}

// SameContent reports whether stored, an event body as returned by JSON, is this event with
// some sequence: the test for an idempotent repeat.
func (e *EncodedEvent) SameContent(stored []byte) bool {
	head, tail := e.body[:e.seqStart], e.body[e.seqEnd:]
	if len(stored) < len(head)+len(tail)+1 {
		return false
	}
	if string(stored[:len(head)]) != string(head) || string(stored[len(stored)-len(tail):]) != string(tail) {
		return false
	}
	for _, c := range stored[len(head) : len(stored)-len(tail)] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
