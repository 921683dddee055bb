package contract

import (
	"strings"
	"testing"
)

func TestSessionIDProblems(t *testing.T) {
	s256 := "S-" + strings.Repeat("x", 254)
	emoji := "S-" + strings.Repeat("😀", 254) // 256 code points, 1018 bytes
	tests := []struct {
		name, id string
		rules    []string // expected rules, in order; none for a valid id
	}{
		{"short", "S-1", nil},
		{"256 characters", s256, nil},
		{"256 code points of emoji", emoji, nil},
		{"punctuation", "S-a.b_c-d:e@f+g", nil},
		{"dots after the prefix", "S-..", nil},
		{"257 characters", s256 + "x", []string{RuleSessionIDLength}},
		{"257 code points of emoji", emoji + "😀", []string{RuleSessionIDLength}},
		{"NUL", "S-a\x00b", []string{RuleSessionIDChars}},
		{"newline", "S-a\nb", []string{RuleSessionIDChars}},
		{"DEL", "S-a\x7fb", []string{RuleSessionIDChars}},
		{"C1 control", "S-a\u0085b", []string{RuleSessionIDChars}},
		{"space", "S-a b", []string{RuleSessionIDChars}},
		{"tab", "S-a\tb", []string{RuleSessionIDChars}},
		{"no-break space", "S-a\u00a0b", []string{RuleSessionIDChars}},
		{"line separator", "S-a\u2028b", []string{RuleSessionIDChars}},
		{"slash", "S-a/b", []string{RuleSessionIDChars}},
		{"backslash", `S-a\b`, []string{RuleSessionIDChars}},
		{"dot", ".", []string{RuleSessionIDPrefix}},
		{"dot dot", "..", []string{RuleSessionIDPrefix}},
		{"empty", "", []string{RuleSessionIDPrefix, RuleSessionIDLength}},
		{"no prefix, a slash", "../x", []string{RuleSessionIDPrefix, RuleSessionIDChars}},
		{"long and a space", s256 + " ", []string{RuleSessionIDLength, RuleSessionIDChars}},
		{"invalid UTF-8", "S-\xff", []string{RuleSessionIDChars}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			probs := SessionIDProblems(tc.id)
			var rules []string
			for _, p := range probs {
				rules = append(rules, p.Rule)
				if p.Path != "/session_id" || p.Layer != LayerRule || !strings.HasSuffix(p.Message, SessionIDRule) {
					t.Errorf("problem %+v: want path /session_id, layer rule, and the rule spelt out", p)
				}
			}
			if strings.Join(rules, ",") != strings.Join(tc.rules, ",") {
				t.Errorf("rules %v, want %v (%v)", rules, tc.rules, probs)
			}
		})
	}
}

func TestSessionIDProblemsNamesThePlace(t *testing.T) {
	probs := SessionIDProblems("S-ab\ncd")
	if len(probs) != 1 || !strings.Contains(probs[0].Message, `"S-ab\ncd" has a control character (U+000A) at character 5`) {
		t.Errorf("%v", probs)
	}
}

func TestIDProblem(t *testing.T) {
	for id, want := range map[string]string{
		"r1":                         "",
		strings.Repeat("é", 256):     "",
		strings.Repeat("é", 257):     "is 257 characters long; an id has at most 256",
		strings.Repeat("x", 1000):    "is 1000 characters long; an id has at most 256",
		"":                           "must not be empty",
		"a\xffb":                     "is not valid UTF-8",
		"run with / and \x00 and ..": "",
	} {
		if got := IDProblem(id); got != want {
			t.Errorf("IDProblem(%.20q) = %q, want %q", id, got, want)
		}
	}
}
