package contract

// Exact reasoning about JSON number literals. float64 cannot tell 5000000000000000.5 from a
// whole number or -1e-400 from zero; the schemas' "integer" and "minimum" keywords can, so the
// checks below work on the decimal literal itself.

// MaxSafeInteger is the largest integer the contract accepts (2^53 - 1, JavaScript's
// Number.MAX_SAFE_INTEGER).
const MaxSafeInteger = 9007199254740991

// literal is a decoded number literal: value = (-1)^neg × digits × 10^exp, where digits has no
// leading zeros (empty means zero).
type literal struct {
	neg    bool
	digits []byte
	exp    int64
}

func parseLiteral(raw []byte) literal {
	var l literal
	i := 0
	if i < len(raw) && raw[i] == '-' {
		l.neg = true
		i++
	}
	if plainDigits(raw[i:]) {
		// The common case, a plain integer: its digits are contiguous, so take a subslice.
		d := raw[i:]
		for len(d) > 0 && d[0] == '0' {
			d = d[1:]
		}
		for len(d) > 0 && d[len(d)-1] == '0' {
			d = d[:len(d)-1]
			l.exp++
		}
		l.digits = d
		return l
	}
	var digits []byte
	fracLen := int64(0)
	inFrac := false
	for ; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c >= '0' && c <= '9':
			if len(digits) > 0 || c != '0' {
				digits = append(digits, c)
			}
			if inFrac {
				fracLen++
			}
		case c == '.':
			inFrac = true
		default: // exponent
			goto exponent
		}
	}
exponent:
	var e int64
	if i < len(raw) {
		i++ // e or E
		eneg := false
		if i < len(raw) && (raw[i] == '+' || raw[i] == '-') {
			eneg = raw[i] == '-'
			i++
		}
		for ; i < len(raw); i++ {
			if e < 1<<40 { // saturate: such exponents are far beyond any bound we check
				e = e*10 + int64(raw[i]-'0')
			}
		}
		if eneg {
			e = -e
		}
	}
	// Drop trailing zeros of the significant digits into the exponent.
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		e++
	}
	l.digits = digits
	l.exp = e - fracLen
	return l
}

// isZero reports whether the literal's value is zero (including -0 and 0e5).
func (l literal) isZero() bool { return len(l.digits) == 0 }

// isNegative reports whether the value is strictly below zero.
func (l literal) isNegative() bool { return l.neg && !l.isZero() }

// isWhole reports whether the value has no fractional part.
func (l literal) isWhole() bool { return l.isZero() || l.exp >= 0 }

// int64 returns the exact value of a whole literal and whether it fits in ±(2^63-1)
// (checked conservatively: values with more than 18 digits do not fit).
func (l literal) int64() (int64, bool) {
	if l.isZero() {
		return 0, true
	}
	if !l.isWhole() || int64(len(l.digits))+l.exp > 18 {
		return 0, false
	}
	var n int64
	for _, c := range l.digits {
		n = n*10 + int64(c-'0')
	}
	for e := l.exp; e > 0; e-- {
		n *= 10
	}
	if l.neg {
		n = -n
	}
	return n, true
}

// plainDigits reports whether b is made of ASCII digits only.
func plainDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Count returns n when it is a count the contract takes (at least least, at most
// MaxSafeInteger), else nil: what importers and recorders do with a count a source reports
// (a negative or absurd one is left out rather than refused).
func Count(n *int64, least int64) *int64 {
	if n == nil || *n < least || *n > MaxSafeInteger {
		return nil
	}
	return n
}
