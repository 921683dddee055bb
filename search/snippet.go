package search

import (
	"strings"
	"unicode/utf8"

	"github.com/sessiond/sessiond/wire"
)

// SnippetBytes is about how much text a snippet shows.
const SnippetBytes = 200

// snippetOrder is the order in which fields are preferred for a snippet when they match
// equally well.
var snippetOrder = [NumFields]int{FieldText, FieldTitle, FieldError, FieldTool, FieldPath, FieldTest, FieldTerminal, FieldInput, FieldOutput}

// Snippet returns the field of d that matches q best (most marked characters) and the snippet
// of it: about SnippetBytes of its text around the first match, with the matching words (or
// the substring of q.Contains) marked. With no match in any field (a query by filters alone)
// it returns the first non-empty field unmarked, and "" with no segment for an empty document.
// The segments are plain text.
func Snippet(d *Doc, q *Query) (field string, segs []wire.SnippetSegment) {
	best, bestScore := -1, 0
	var bestMarks [][2]int
	for _, f := range snippetOrder {
		text := d.Fields[f]
		if text == "" {
			continue
		}
		marks := matchRanges(text, q)
		score := 0
		for _, m := range marks {
			score += m[1] - m[0]
		}
		if best < 0 || score > bestScore {
			best, bestScore, bestMarks = f, score, marks
		}
	}
	if best < 0 {
		return "", []wire.SnippetSegment{}
	}
	return FieldNames[best], cut(d.Fields[best], bestMarks)
}

// matchRanges returns the byte ranges of text that match q, in order, not overlapping.
func matchRanges(text string, q *Query) [][2]int {
	var out [][2]int
	if len(q.Terms) > 0 {
		words := map[string]bool{}
		var prefixes []string
		for _, t := range q.Terms {
			for i, tok := range t.Tokens {
				if t.Prefix && i == len(t.Tokens)-1 {
					prefixes = append(prefixes, tok)
				} else {
					words[tok] = true
				}
			}
		}
		for _, sp := range tokenize(text) {
			hit := words[sp.tok]
			for _, p := range prefixes {
				hit = hit || strings.HasPrefix(sp.tok, p)
			}
			if hit {
				out = append(out, [2]int{sp.start, sp.end})
			}
		}
	}
	if q.Contains != "" {
		lower := strings.ToLower(text)
		if len(lower) == len(text) { // lower-casing kept the offsets
			for i := 0; i < len(lower); {
				j := strings.Index(lower[i:], q.Contains)
				if j < 0 {
					break
				}
				out = insertRange(out, [2]int{i + j, i + j + len(q.Contains)})
				i += j + len(q.Contains)
			}
		}
	}
	return out
}

// insertRange adds r to the sorted ranges rs, merging overlaps.
func insertRange(rs [][2]int, r [2]int) [][2]int {
	out := make([][2]int, 0, len(rs)+1)
	placed := false
	for _, x := range rs {
		switch {
		case x[1] < r[0]:
			out = append(out, x)
		case r[1] < x[0]:
			if !placed {
				out, placed = append(out, r), true
			}
			out = append(out, x)
		default:
			r = [2]int{min(r[0], x[0]), max(r[1], x[1])}
		}
	}
	if !placed {
		out = append(out, r)
	}
	return out
}

// cut returns about SnippetBytes of text around the first mark, as segments.
func cut(text string, marks [][2]int) []wire.SnippetSegment {
	start := 0
	if len(marks) > 0 && marks[0][0] > SnippetBytes/3 {
		start = marks[0][0] - SnippetBytes/3
	}
	end := min(len(text), start+SnippetBytes)
	for start > 0 && !utf8.RuneStart(text[start]) {
		start--
	}
	for end < len(text) && !utf8.RuneStart(text[end]) {
		end++
	}
	var segs []wire.SnippetSegment
	addText := func(s string, mark bool) {
		if s == "" {
			return
		}
		s = strings.ReplaceAll(s, "\n", " ")
		if n := len(segs); n > 0 && segs[n-1].Mark == mark {
			segs[n-1].Text += s
			return
		}
		segs = append(segs, wire.SnippetSegment{Text: s, Mark: mark})
	}
	if start > 0 {
		addText("…", false)
	}
	pos := start
	for _, m := range marks {
		if m[1] <= start || m[0] >= end {
			continue
		}
		a, b := max(m[0], start), min(m[1], end)
		addText(text[pos:a], false)
		addText(text[a:b], true)
		pos = b
	}
	addText(text[pos:end], false)
	if end < len(text) {
		addText("…", false)
	}
	if segs == nil {
		segs = []wire.SnippetSegment{}
	}
	return segs
}
