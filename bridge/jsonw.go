package bridge

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Control characters, the quote and the backslash
// are escaped, and so are U+2028 and U+2029 (JavaScript's line terminators); an invalid UTF-8
// byte becomes U+FFFD, so the output is always valid JSON.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendField appends ,"name":"value".
func appendField(b []byte, name, value string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, value)
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
