package acp

import (
	"fmt"
	"strings"
)

// UnifiedDiff renders the change from old to new text of path as a unified diff with one hunk:
// the lines both share at the start and the end are left out but for three lines of context.
// added says the file did not exist before (the old side is /dev/null). Both texts can be
// read back from the hunk, so nothing of the change is lost.
func UnifiedDiff(path, old, new string, added bool) string {
	a, b := splitLines(old), splitLines(new)
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	const context = 3
	start := max(pre-context, 0)
	endA, endB := len(a)-max(suf-context, 0), len(b)-max(suf-context, 0)
	var sb strings.Builder
	from := "a/" + path
	if added {
		from = "/dev/null"
	}
	fmt.Fprintf(&sb, "--- %s\n+++ b/%s\n", from, path)
	fmt.Fprintf(&sb, "@@ -%s +%s @@\n", hunkRange(start, endA-start), hunkRange(start, endB-start))
	for _, l := range a[start:pre] {
		sb.WriteString(" " + l)
	}
	for _, l := range a[pre : len(a)-suf] {
		sb.WriteString("-" + l)
	}
	for _, l := range b[pre : len(b)-suf] {
		sb.WriteString("+" + l)
	}
	for _, l := range a[len(a)-suf : endA] {
		sb.WriteString(" " + l)
	}
	return sb.String()
}

// hunkRange is a hunk's "start,count" (1-based; an empty range names the line before it).
func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// splitLines splits s into lines that keep their "\n"; a last line without one gets
// "\n\\ No newline at end of file\n", as diff prints it.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	} else {
		lines[len(lines)-1] += "\n\\ No newline at end of file\n"
	}
	return lines
}
