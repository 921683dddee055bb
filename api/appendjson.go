package api

import (
	"strconv"

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
