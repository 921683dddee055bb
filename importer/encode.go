package importer

import (
	"encoding/json"
	"strconv"

	"github.com/sessiond/sessiond/contract"
)

// appendEvent appends e encoded as contract.Marshal encodes it (encoding/json's field order,
// omitempty rules, string escapes without HTML escaping, free JSON values compacted), without
// reflection, for the payloads the importer makes. It returns false, with buf unchanged, for any
// other payload or a value it does not encode the same way (a free JSON value that is not
// valid, a duration that is not a number): the caller encodes those with encoding/json.
// TestAppendEventIsMarshal holds it to contract.Marshal's bytes.
func appendEvent(buf []byte, e *contract.Event) ([]byte, bool) {
	start := len(buf)
	buf = append(buf, `{"contract":`...)
	buf = contract.AppendString(buf, e.Contract)
	buf = append(buf, `,"eventId":`...)
	buf = contract.AppendString(buf, e.EventID)
	buf = append(buf, `,"sessionId":`...)
	buf = contract.AppendString(buf, e.SessionID)
	buf = optString(buf, `,"runId":`, e.RunID)
	buf = optString(buf, `,"sourceMessageId":`, e.SourceMessageID)
	buf = append(buf, `,"sequence":`...)
	buf = strconv.AppendInt(buf, e.Sequence, 10)
	buf = append(buf, `,"idempotencyKey":`...)
	buf = contract.AppendString(buf, e.IdempotencyKey)
	buf = append(buf, `,"occurredAt":`...)
	buf = contract.AppendString(buf, e.OccurredAt)
	buf = append(buf, `,"eventType":`...)
	buf = contract.AppendString(buf, e.EventType)
	buf = append(buf, `,"payload":`...)
	var ok bool
	if buf, ok = appendPayload(buf, e.Payload); !ok {
		return buf[:start], false
	}
	return append(buf, '}'), true
}

// appendPayload appends p as encoding/json encodes it, or returns false.
func appendPayload(buf []byte, p contract.Payload) ([]byte, bool) {
	ok := true
	switch p := p.(type) {
	case *contract.MessagePayload:
		buf = append(buf, `{"messageId":`...)
		buf = contract.AppendString(buf, p.MessageID)
		buf = append(buf, `,"role":`...)
		buf = contract.AppendString(buf, p.Role)
		buf = append(buf, `,"operation":`...)
		buf = contract.AppendString(buf, p.Operation)
		buf = append(buf, `,"parts":`...)
		if p.Parts == nil {
			buf = append(buf, "null"...)
		} else {
			buf = append(buf, '[')
			for i, part := range p.Parts {
				if i > 0 {
					buf = append(buf, ',')
				}
				if buf, ok = appendRaw(buf, part); !ok {
					return buf, false
				}
			}
			buf = append(buf, ']')
		}
		buf = optString(buf, `,"status":`, p.Status)
	case *contract.StatusPayload:
		buf = append(buf, `{"status":`...)
		buf = contract.AppendString(buf, p.Status)
		if p.Detail != nil {
			buf = append(buf, `,"detail":`...)
			buf = contract.AppendString(buf, *p.Detail)
		}
		buf = optString(buf, `,"startedAt":`, p.StartedAt)
		buf = optString(buf, `,"stoppingRequestedAt":`, p.StoppingRequestedAt)
		buf = optString(buf, `,"stoppedAt":`, p.StoppedAt)
		buf = optString(buf, `,"completedAt":`, p.CompletedAt)
		buf = optString(buf, `,"failedAt":`, p.FailedAt)
		if p.DurationMs != nil {
			d := string(*p.DurationMs)
			if !plainInt(d) {
				return buf, false // not the integer the importer writes: encoding/json's rules
			}
			buf = append(append(buf, `,"durationMs":`...), d...)
		}
	case *contract.UsagePayload:
		buf = append(buf, '{')
		first := true
		for _, f := range [...]struct {
			key string
			v   *int64
		}{{`"inputTokens":`, p.InputTokens}, {`"outputTokens":`, p.OutputTokens}, {`"totalTokens":`, p.TotalTokens},
			{`"contextTokens":`, p.ContextTokens}, {`"contextWindow":`, p.ContextWindow}} {
			if f.v == nil {
				continue
			}
			if !first {
				buf = append(buf, ',')
			}
			first = false
			buf = strconv.AppendInt(append(buf, f.key...), *f.v, 10)
		}
	case *contract.ToolPayload:
		buf = append(buf, `{"toolCallId":`...)
		buf = contract.AppendString(buf, p.ToolCallID)
		buf = append(buf, `,"toolName":`...)
		buf = contract.AppendString(buf, p.ToolName)
		buf = append(buf, `,"status":`...)
		buf = contract.AppendString(buf, p.Status)
		if len(p.Input) > 0 {
			if buf, ok = appendRaw(append(buf, `,"input":`...), p.Input); !ok {
				return buf, false
			}
		}
		if len(p.Output) > 0 {
			if buf, ok = appendRaw(append(buf, `,"output":`...), p.Output); !ok {
				return buf, false
			}
		}
		if p.Error != nil {
			buf = append(buf, `,"error":`...)
			buf = contract.AppendString(buf, *p.Error)
		}
		buf = optString(buf, `,"startedAt":`, p.StartedAt)
		buf = optString(buf, `,"completedAt":`, p.CompletedAt)
	case *contract.ReasoningPayload:
		buf = append(buf, `{"reasoningId":`...)
		buf = contract.AppendString(buf, p.ReasoningID)
		buf = append(buf, `,"text":`...)
		buf = contract.AppendString(buf, p.Text)
		buf = append(buf, `,"status":`...)
		buf = contract.AppendString(buf, p.Status)
	case *contract.SummaryPayload:
		buf = append(buf, `{"summaryId":`...)
		buf = contract.AppendString(buf, p.SummaryID)
		buf = append(buf, `,"runId":`...)
		buf = contract.AppendString(buf, p.RunID)
		buf = append(buf, `,"text":`...)
		buf = contract.AppendString(buf, p.Text)
		buf = appendStrings(append(buf, `,"highlights":`...), p.Highlights)
		buf = appendStrings(append(buf, `,"pendingItems":`...), p.PendingItems)
		buf = append(buf, `,"status":`...)
		buf = contract.AppendString(buf, p.Status)
	default:
		return buf, false
	}
	return append(buf, '}'), true
}

// plainInt reports whether s is a non-negative integer as JSON writes it: digits, no leading
// zero.
func plainInt(s string) bool {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// optString appends key and s when s is not empty (omitempty).
func optString(buf []byte, key, s string) []byte {
	if s == "" {
		return buf
	}
	return contract.AppendString(append(buf, key...), s)
}

// appendStrings appends ss as a JSON array (null when nil).
func appendStrings(buf []byte, ss []string) []byte {
	if ss == nil {
		return append(buf, "null"...)
	}
	buf = append(buf, '[')
	for i, s := range ss {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = contract.AppendString(buf, s)
	}
	return append(buf, ']')
}

// appendRaw appends a free JSON value compacted, as encoding/json does with a RawMessage (null
// when nil); false when it is not valid JSON.
func appendRaw(buf []byte, v contract.RawJSON) ([]byte, bool) {
	if v == nil {
		return append(buf, "null"...), true
	}
	if !json.Valid(v) {
		return buf, false
	}
	if compactJSON(v) {
		return append(buf, v...), true
	}
	n := len(buf)
	out := appendCompactJSON(buf, v)
	return out, len(out) > n
}

// compactJSON reports whether v (valid JSON) has no white space outside its strings: it is
// its own compact form.
func compactJSON(v []byte) bool {
	inString := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

// appendCompactJSON appends v (valid JSON) without the white space outside its strings, as
// json.Compact does.
func appendCompactJSON(buf, v []byte) []byte {
	inString := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case inString && c == '\\':
			buf = append(buf, c)
			i++
			c = v[i]
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			continue
		}
		buf = append(buf, c)
	}
	return buf
}
