package search

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/wire"
)

func TestParseTerms(t *testing.T) {
	for _, c := range []struct {
		q    string
		want []Term
		err  string
	}{
		{q: "flaky test", want: []Term{{Tokens: []string{"flaky"}}, {Tokens: []string{"test"}}}},
		{q: `"rm -rf" TOOL_TIMEOUT`, want: []Term{{Tokens: []string{"rm", "rf"}}, {Tokens: []string{"tool", "timeout"}}}},
		{q: "billing/invoice.go", want: []Term{{Tokens: []string{"billing", "invoice", "go"}}}},
		{q: `invo* "billing inv"*`, want: []Term{{Tokens: []string{"invo"}, Prefix: true}, {Tokens: []string{"billing", "inv"}, Prefix: true}}},
		{q: "Café ÉTÉ", want: []Term{{Tokens: []string{"café"}}, {Tokens: []string{"été"}}}},
		{q: "  -- ** ", want: nil},
		{q: `"unclosed`, err: "unclosed quote"},
		{q: "a*", err: "at least 2"},
		{q: strings.Repeat("w ", MaxTerms+1), err: "terms"},
		{q: strings.Repeat("x", MaxQueryBytes+1), err: "bytes"},
		{q: "bad\xff", err: "UTF-8"},
	} {
		got, err := ParseTerms(c.q)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseTerms(%q): %v, want an error with %q", c.q, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseTerms(%q) = %+v, %v; want %+v", c.q, got, err, c.want)
		}
	}
}

func TestQueryLanguages(t *testing.T) {
	terms, _ := ParseTerms(`deploy "rm -rf" o'brien invo*`)
	if got, want := FTS5(terms), `"deploy" AND "rm rf" AND "o brien" AND "invo"*`; got != want {
		t.Errorf("FTS5 = %s, want %s", got, want)
	}
	if got, want := TSQuery(terms), `'deploy' & ('rm' <-> 'rf') & ('o' <-> 'brien') & 'invo':*`; got != want {
		t.Errorf("TSQuery = %s, want %s", got, want)
	}
	if got, want := TSQueryLoose(terms), `'deploy' & 'rm' & 'rf' & 'o' & 'brien' & 'invo':*`; got != want {
		t.Errorf("TSQueryLoose = %s, want %s", got, want)
	}
	if got, want := LikePattern(`50%_a\b`), `%50\%\_a\\b%`; got != want {
		t.Errorf("LikePattern = %s, want %s", got, want)
	}
	if got, want := FTS5Substring(`say "hi"`), `"say ""hi"""`; got != want {
		t.Errorf("FTS5Substring = %s, want %s", got, want)
	}
}

func TestCursorBelongsToItsQuery(t *testing.T) {
	terms, _ := ParseTerms("deploy")
	base := Query{Terms: terms, Project: "p", From: time.Unix(10, 0)}
	c := Cursor{Key: 42, Query: base.Hash()}
	s := c.Encode()
	if got, err := DecodeCursor(s, &base); err != nil || got.Key != 42 {
		t.Fatalf("DecodeCursor = %+v, %v", got, err)
	}
	// Every field that selects or orders results makes another query.
	for name, change := range map[string]func(q *Query){
		"terms": func(q *Query) { q.Terms = nil }, "contains": func(q *Query) { q.Contains = "abc" },
		"project": func(q *Query) { q.Project = "o" }, "agent": func(q *Query) { q.Agent = "a" }, "role": func(q *Query) { q.Role = "r" },
		"status": func(q *Query) { q.Status = "running" }, "kind": func(q *Query) { q.Kind = "tool" },
		"runStatus": func(q *Query) { q.RunStatus = "failed" }, "tool": func(q *Query) { q.Tool = "shell" },
		"code": func(q *Query) { q.Code = "X" }, "from": func(q *Query) { q.From = time.Unix(11, 0) },
		"to": func(q *Query) { q.To = time.Unix(99, 0) }, "order": func(q *Query) { q.Order = OrderRelevance },
	} {
		q := base
		change(&q)
		if _, err := DecodeCursor(s, &q); err == nil {
			t.Errorf("a cursor continued the query with another %s", name)
		}
	}
	for _, bad := range []string{"", "!!", "e30", c.Encode() + "x"} {
		if _, err := DecodeCursor(bad, &base); err == nil {
			t.Errorf("DecodeCursor(%q) accepted", bad)
		}
	}
}

func TestSnippet(t *testing.T) {
	terms, _ := ParseTerms(`"invoice go" depl*`)
	d := Doc{}
	d.Fields[FieldTerminal] = strings.Repeat("x ", 200) + "<b>deployed</b> billing/invoice.go" + strings.Repeat(" y", 200)
	d.Fields[FieldTitle] = "nothing here"
	field, segs := Snippet(&d, &Query{Terms: terms})
	if field != "terminal" {
		t.Fatalf("field %q", field)
	}
	var marked []string
	var text strings.Builder
	for _, s := range segs {
		if s.Mark {
			marked = append(marked, s.Text)
		}
		text.WriteString(s.Text)
	}
	if !reflect.DeepEqual(marked, []string{"deployed", "invoice", "go"}) {
		t.Errorf("marked %q", marked)
	}
	if !strings.HasPrefix(text.String(), "…") || !strings.HasSuffix(text.String(), "…") || len(text.String()) > SnippetBytes+10 {
		t.Errorf("snippet %q: want about %d bytes cut on both sides", text.String(), SnippetBytes)
	}
	// A substring is marked where it is, inside words too.
	d = Doc{}
	d.Fields[FieldPath] = "src/Billing/Invoice.go"
	_, segs = Snippet(&d, &Query{Contains: "ing/invo"})
	if want := []wire.SnippetSegment{{Text: "src/Bill"}, {Text: "ing/Invo", Mark: true}, {Text: "ice.go"}}; !reflect.DeepEqual(segs, want) {
		t.Errorf("substring snippet %+v, want %+v", segs, want)
	}
	// No match: the first field, unmarked; an empty document: no segment.
	if f, segs := Snippet(&Doc{}, &Query{}); f != "" || len(segs) != 0 || segs == nil {
		t.Errorf("empty document: %q %#v", f, segs)
	}
}
