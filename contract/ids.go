package contract

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxIDLength is the most code points an identifier (eventId, sessionId, runId, messageId, …)
// may have: the contract's identifiers are strings of 1 to 256 code points.
const MaxIDLength = 256

// IDProblem returns why id cannot be an identifier of the contract (empty, over
// [MaxIDLength] code points, or not UTF-8), or "" when it can. No event, run or session can
// carry an id it refuses, so a URL that names one can be answered without a lookup.
func IDProblem(id string) string {
	switch {
	case id == "":
		return "must not be empty"
	case !utf8.ValidString(id):
		return "is not valid UTF-8"
	}
	if n := len(id); n > MaxIDLength { // the byte count bounds the code-point count from above
		if n = utf8.RuneCountInString(id); n > MaxIDLength {
			return fmt.Sprintf("is %d characters long; an id has at most %d", n, MaxIDLength)
		}
	}
	return ""
}

// Rules of [SessionIDProblems], as they appear in a [Problem]'s Rule.
const (
	RuleSessionIDPrefix = "session-id-prefix" // starts with "S-" (also checked on every session record)
	RuleSessionIDLength = "session-id-length" // 1 to MaxIDLength code points
	RuleSessionIDChars  = "session-id-chars"  // no control character, white space, '/' or '\'
)

// SessionIDRule says in one sentence which session ids a new session may take.
const SessionIDRule = `a session id starts with "S-", has at most 256 characters, and has no control characters, white space, "/" or "\"`

// SessionIDProblems returns the problems (at path /session_id) that keep id from being the id
// of a new session, or nil. It is the one rule every path that creates a session with a
// chosen id applies: the id must be one that every event can name in its sessionId (1 to 256
// code points), that is one segment of a URL path (no "/"; "." and ".." are ruled out by the
// prefix) and of an archive file name, and that a person can copy from a terminal (no
// control characters such as NUL or a newline, no white space). Sessions stored before the
// rule keep working: only creation applies it.
func SessionIDProblems(id string) []Problem {
	var out []Problem
	add := func(rule, msg string) {
		out = append(out, Problem{Path: "/session_id", Rule: rule, Layer: LayerRule, Message: msg + "; " + SessionIDRule})
	}
	if !strings.HasPrefix(id, "S-") {
		add(RuleSessionIDPrefix, fmt.Sprintf("session_id %s does not start with \"S-\"", quote(id)))
	}
	if !utf8.ValidString(id) {
		add(RuleSessionIDChars, fmt.Sprintf("session_id %s is not valid UTF-8", quote(id)))
		return out
	}
	if p := IDProblem(id); p != "" {
		add(RuleSessionIDLength, "session_id "+p)
	}
	n := 0
	for _, r := range id {
		n++
		var what string
		switch {
		case unicode.IsControl(r):
			what = fmt.Sprintf("a control character (%U)", r)
		case unicode.IsSpace(r):
			what = fmt.Sprintf("white space (%U)", r)
		case r == '/' || r == '\\':
			what = fmt.Sprintf("the character %q", string(r))
		default:
			continue
		}
		add(RuleSessionIDChars, fmt.Sprintf("session_id %s has %s at character %d", quote(id), what, n))
		break
	}
	return out
}
