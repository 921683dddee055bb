package contract

import (
	"bytes"
	"encoding/json"
)

// Marshal encodes a contract object as compact JSON without HTML escaping, so that free values
// and strings come out as they went in.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
