package main

import (
	"testing"

	"github.com/sessiond/sessiond/contract"
)

// TestPartText reads the text of the part shapes a user message may carry.
func TestPartText(t *testing.T) {
	for _, tc := range []struct{ part, want string }{
		{`{"type":"text","text":"say hello"}`, "say hello"},
		{`"say hello"`, "say hello"},
		{`{"type":"image","url":"https://example.invalid/a.png"}`, ""},
		{`42`, ""},
		{`["a"]`, ""},
	} {
		if got := partText(contract.RawJSON(tc.part)); got != tc.want {
			t.Errorf("partText(%s) = %q, want %q", tc.part, got, tc.want)
		}
	}
	if got := string(textPart(`a "quoted" word`)); got != `{"type":"text","text":"a \"quoted\" word"}` {
		t.Errorf("textPart = %s", got)
	}
}
