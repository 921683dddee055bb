package api

import "strings"

// ETagListed reports whether an If-None-Match header lists tag (weakly compared, as RFC 9110
// says for If-None-Match) or is "*": the answer is then 304 Not Modified. The server's tagged
// JSON answers and the web UI's files both decide by it.
func ETagListed(ifNoneMatch, tag string) bool {
	for v := range strings.SplitSeq(ifNoneMatch, ",") {
		v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
		if v == tag || v == "*" {
			return true
		}
	}
	return false
}
