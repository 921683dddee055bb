package main

import "testing"

// TestPartText: the agent reads the text of a text part and of a plain string part, and
// skips other parts.
func TestPartText(t *testing.T) {
	cases := []struct {
		part   string
		text   string
		isText bool
	}{
		{`{"type":"text","text":"say hello"}`, "say hello", true},
		{`"say hello"`, "say hello", true},
		{`{"type":"image","url":"https://example.com/a.png"}`, "", false},
		{`{"text":"no type"}`, "", false},
		{`42`, "", false},
	}
	for _, c := range cases {
		text, ok := partText([]byte(c.part))
		if text != c.text || ok != c.isText {
			t.Errorf("partText(%s) = %q, %v; want %q, %v", c.part, text, ok, c.text, c.isText)
		}
	}
	if got, _ := partText(textPart("hi")); got != "hi" {
		t.Errorf("textPart does not read back: %q", got)
	}
}
