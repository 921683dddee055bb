package contract

import (
	"bytes"
	"encoding/json"
)

// CleanJSON returns raw when it is a JSON value the contract accepts inside an event (valid
// UTF-8, no repeated keys, numbers that fit, nesting within the limit), else the closest
// value it accepts: raw decoded and encoded again (invalid UTF-8 becomes U+FFFD, a repeated
// key keeps its last value), or, when even that is refused, raw's text as a JSON string. It
// is for values taken from other programs (an agent's content blocks, a transcript's tool
// input) that must not make a whole batch of events fail.
func CleanJSON(raw RawJSON) RawJSON {
	lim := Limits{MaxBytes: len(raw) + 1, MaxDepth: DefaultMaxDepth - 8}
	if accepts(raw, lim) {
		return raw
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&v) == nil {
		if b, err := Marshal(v); err == nil {
			if accepts(b, Limits{MaxBytes: len(b) + 1, MaxDepth: lim.MaxDepth}) {
				return b
			}
		}
	}
	b, _ := json.Marshal(string(raw)) // invalid UTF-8 becomes U+FFFD
	return b
}
