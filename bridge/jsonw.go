package bridge

import "github.com/sessiond/sessiond/contract"

// appendField appends ,"name":"value".
func appendField(b []byte, name, value string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return contract.AppendString(b, value)
}

// appendText appends ,"name":"op's Text", copying TextJSON when the op has it.
func appendText(b []byte, name string, op *Op) []byte {
	if op.TextJSON == nil {
		return appendField(b, name, op.Text)
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':', '"')
	b = append(b, op.TextJSON...)
	return append(b, '"')
}
