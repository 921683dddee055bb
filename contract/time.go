package contract

import (
	"fmt"
	"time"
)

// TimeFormat is the layout of every timestamp sessiond and its tools write: RFC 3339 in UTC
// with milliseconds, e.g. 2026-03-01T12:00:00.000Z (it matches [TimestampPattern]).
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// FormatTime formats t with TimeFormat in UTC.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// ParseTime parses an RFC 3339 timestamp (with or without a fraction): every timestamp
// FormatTime writes, and those of other writers' offsets.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("timestamp %q is not RFC 3339: %w", s, err)
	}
	return t, nil
}

// TimestampPattern is the event schema's pattern for every timestamp field, verbatim. The
// validator uses the hand-written [IsTimestamp], which tests prove equal to this pattern.
const TimestampPattern = `^(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|(?:02)-(?:0[1-9]|1\d|2[0-8])))T(?:(?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:\.\d+)?)?(?:Z|([+-](?:[01]\d|2[0-3]):[0-5]\d)))$`

// IsTimestamp reports whether s matches [TimestampPattern]: an RFC 3339 date and time with
// optional seconds, an optional fraction after the seconds, and a mandatory Z or ±hh:mm zone;
// T and Z upper case; ASCII digits only; the date must exist (leap years included).
func IsTimestamp(s string) bool {
	rest, ok := parseDate(s)
	if !ok || len(rest) == 0 || rest[0] != 'T' {
		return false
	}
	rest, ok = parseTime(rest[1:], false)
	return ok && rest == ""
}

// isDateTime reports whether s is an RFC 3339 date-time (format "date-time" of the session
// record schema): seconds required, T/Z in either case, leap seconds not accepted.
func isDateTime(s string) bool {
	rest, ok := parseDate(s)
	if !ok || len(rest) == 0 || (rest[0] != 'T' && rest[0] != 't') {
		return false
	}
	rest, ok = parseTime(rest[1:], true)
	return ok && rest == ""
}

func digits2(s string) (int, bool) {
	if len(s) < 2 || s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9' {
		return 0, false
	}
	return int(s[0]-'0')*10 + int(s[1]-'0'), true
}

// parseDate consumes YYYY-MM-DD and returns the rest.
func parseDate(s string) (string, bool) {
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return "", false
	}
	hi, ok1 := digits2(s[0:2])
	lo, ok2 := digits2(s[2:4])
	month, ok3 := digits2(s[5:7])
	day, ok4 := digits2(s[8:10])
	if !ok1 || !ok2 || !ok3 || !ok4 || month < 1 || month > 12 || day < 1 {
		return "", false
	}
	year := hi*100 + lo
	max := 31
	switch month {
	case 4, 6, 9, 11:
		max = 30
	case 2:
		max = 28
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			max = 29
		}
	}
	if day > max {
		return "", false
	}
	return s[10:], true
}

// parseTime consumes hh:mm[:ss[.frac]] and a zone and returns the rest.
func parseTime(s string, secondsRequired bool) (string, bool) {
	h, ok1 := digits2(s)
	if !ok1 || h > 23 || len(s) < 5 || s[2] != ':' {
		return "", false
	}
	m, ok2 := digits2(s[3:])
	if !ok2 || m > 59 {
		return "", false
	}
	s = s[5:]
	if len(s) > 0 && s[0] == ':' {
		sec, ok := digits2(s[1:])
		if !ok || sec > 59 {
			return "", false
		}
		s = s[3:]
		if len(s) > 0 && s[0] == '.' {
			n := 1
			for n < len(s) && s[n] >= '0' && s[n] <= '9' {
				n++
			}
			if n == 1 {
				return "", false
			}
			s = s[n:]
		}
	} else if secondsRequired {
		return "", false
	}
	if len(s) == 0 {
		return "", false
	}
	switch s[0] {
	case 'Z':
		return s[1:], true
	case 'z':
		return s[1:], secondsRequired
	case '+', '-':
		zh, ok := digits2(s[1:])
		if !ok || zh > 23 || len(s) < 6 || s[3] != ':' {
			return "", false
		}
		zm, ok := digits2(s[4:])
		if !ok || zm > 59 {
			return "", false
		}
		return s[6:], true
	}
	return "", false
}
