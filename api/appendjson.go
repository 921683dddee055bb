package api

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/sessiond/sessiond/contract"
)

// AppendJSON appends r's JSON to buf, byte for byte as contract.Marshal encodes r (field
// order, omitted fields, string escapes), without reflection: the server answers every
// append with it.
func (r *AppendResponse) AppendJSON(buf []byte) []byte {
	buf = append(buf, `{"results":`...)
	buf = appendResults(buf, r.Results)
	buf = append(buf, `,"lastSequence":`...)
	buf = strconv.AppendInt(buf, r.LastSequence, 10)
	if r.Interrupted != nil {
		buf = append(buf, `,"interrupted":{"runId":`...)
		buf = contract.AppendString(buf, r.Interrupted.RunID)
		buf = append(buf, `,"results":`...)
		buf = appendResults(buf, r.Interrupted.Results)
		buf = append(buf, '}')
	}
	return append(buf, '}')
}

// appendResults appends results as a JSON array (null when nil, as encoding/json writes it).
func appendResults(buf []byte, results []AppendResult) []byte {
	if results == nil {
		return append(buf, "null"...)
	}
	buf = append(buf, '[')
	for i, a := range results {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"eventId":`...)
		buf = contract.AppendString(buf, a.EventID)
		buf = append(buf, `,"sequence":`...)
		buf = strconv.AppendInt(buf, a.Sequence, 10)
		buf = append(buf, `,"status":`...)
		buf = contract.AppendString(buf, a.Status)
		buf = append(buf, '}')
	}
	return append(buf, ']')
}

// DecodeJSON decodes the body of a successful append into r, as json.Unmarshal does: the
// inverse of AppendJSON, which the client calls for every append it sends. The server writes an append's answer in one shape,
// {"results":[{"eventId":…,"sequence":…,"status":…},…],"lastSequence":…}, one result per event
// (500 for an importer's batch), and such a body is read here without reflection: strings
// without escapes, control characters or invalid UTF-8, integers without sign tricks, leading
// zeros or more than 18 digits. Any other body (an interruption, a string to unescape, another
// order of the keys) is decoded by json.Unmarshal.
func (r *AppendResponse) DecodeJSON(data []byte) error {
	if fastAppendResponse(data, r) {
		return nil
	}
	*r = AppendResponse{}
	return json.Unmarshal(data, r)
}

// fastAppendResponse decodes data into out when it has the server's shape (DecodeJSON);
// it reports false, out then in any state, otherwise.
func fastAppendResponse(data []byte, out *AppendResponse) bool {
	p := appendParser{data: bytes.TrimRight(data, " \t\r\n")}
	if !p.lit(`{"results":[`) {
		return false
	}
	out.Results = make([]AppendResult, 0, bytes.Count(p.data, []byte(`{"eventId":`)))
	out.Interrupted = nil
	if !p.lit(`]`) {
		for {
			var r AppendResult
			var ok bool
			if !p.lit(`{"eventId":`) {
				return false
			}
			if r.EventID, ok = p.str(); !ok || !p.lit(`,"sequence":`) {
				return false
			}
			if r.Sequence, ok = p.int(); !ok || !p.lit(`,"status":`) {
				return false
			}
			if r.Status, ok = p.str(); !ok || !p.lit(`}`) {
				return false
			}
			switch r.Status { // the two statuses share one string each
			case Accepted:
				r.Status = Accepted
			case Duplicate:
				r.Status = Duplicate
			}
			out.Results = append(out.Results, r)
			if p.lit(`]`) {
				break
			}
			if !p.lit(`,`) {
				return false
			}
		}
	}
	if !p.lit(`,"lastSequence":`) {
		return false
	}
	last, ok := p.int()
	if !ok || !p.lit(`}`) || p.pos != len(p.data) {
		return false
	}
	out.LastSequence = last
	return true
}

// appendParser reads data from pos on.
type appendParser struct {
	data []byte
	pos  int
}

// lit consumes s if the data goes on with it.
func (p *appendParser) lit(s string) bool {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(s)) {
		return false
	}
	p.pos += len(s)
	return true
}

// str consumes a JSON string that decodes to its bytes as they are: no escape, no control
// character, valid UTF-8.
func (p *appendParser) str() (string, bool) {
	if !p.lit(`"`) {
		return "", false
	}
	start := p.pos
	for p.pos < len(p.data) {
		switch c := p.data[p.pos]; {
		case c == '"':
			s := p.data[start:p.pos]
			p.pos++
			if !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		case c == '\\' || c < 0x20:
			return "", false
		}
		p.pos++
	}
	return "", false
}

// int consumes a JSON integer of at most 18 digits, without a leading zero (but 0 itself) and
// without a minus sign before a zero.
func (p *appendParser) int() (int64, bool) {
	start := p.pos
	if p.pos < len(p.data) && p.data[p.pos] == '-' {
		p.pos++
	}
	digits := p.pos
	for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
		p.pos++
	}
	n := p.pos - digits
	if n == 0 || n > 18 || (p.data[digits] == '0' && (n > 1 || digits > start)) {
		return 0, false
	}
	if p.pos < len(p.data) && (p.data[p.pos] == '.' || p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		return 0, false
	}
	v, err := strconv.ParseInt(string(p.data[start:p.pos]), 10, 64)
	return v, err == nil
}
