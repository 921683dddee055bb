package contract

import "testing"

func TestCleanJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":1}`, `{"a":1}`},
		{"{\"a\":\"\xff\"}", `{"a":"` + "\uFFFD" + `"}`},
		{`{"a":1,"a":2}`, `{"a":2}`},
		{`1e400`, `"1e400"`},
		{`{"a":`, `"{\"a\":"`},
	} {
		if got := string(CleanJSON(RawJSON(tc.in))); got != tc.want {
			t.Errorf("CleanJSON(%q) = %s, want %s", tc.in, got, tc.want)
		}
		if _, err := Parse(CleanJSON(RawJSON(tc.in)), Limits{}); err != nil {
			t.Errorf("CleanJSON(%q) is refused: %v", tc.in, err)
		}
	}
}
