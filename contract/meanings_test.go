package contract

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestMeaningsCoverEnumerations: every enumerated value the reference page explains has a
// meaning, and every meaning explains a value that exists.
func TestMeaningsCoverEnumerations(t *testing.T) {
	codeMeanings := map[string]string{}
	for c, m := range commandErrorMeanings {
		codeMeanings[string(c)] = m
	}
	cases := []struct {
		name     string
		values   []string
		meanings map[string]string
	}{
		{"command error codes", codeStrings(ErrorCodes), codeMeanings},
		{"run statuses", RunStatuses, runStatusMeanings},
		{"session record statuses", SessionStatuses, sessionStatusMeanings},
	}
	for _, c := range cases {
		for _, v := range c.values {
			if c.meanings[v] == "" {
				t.Errorf("%s: %s has no meaning", c.name, v)
			}
		}
		for v := range c.meanings {
			if !slices.Contains(c.values, v) {
				t.Errorf("%s: a meaning is given for %s, which is not one of them", c.name, v)
			}
		}
	}
	for _, s := range SessionRunStatuses {
		if RunStatusMeaning(s) == "" {
			t.Errorf("RunStatusMeaning(%q) is empty", s)
		}
	}
	if CommandErrorMeaning("no-such-value") != "" {
		t.Error("an unknown code has a meaning")
	}
	for _, f := range []func(string) string{RunStatusMeaning, SessionStatusMeaning} {
		if f("no-such-value") != "" {
			t.Error("an unknown value has a meaning")
		}
	}
}

// TestCapabilityTables: evidence is given for every capability and names real event and
// command types; the presets name real capabilities, and work holds all of chat.
func TestCapabilityTables(t *testing.T) {
	for _, n := range CapabilityNames {
		ev, ok := CapabilityEvidence[n]
		if !ok || len(ev.Events)+len(ev.Commands) == 0 {
			t.Errorf("capability %s has no evidence", n)
		}
		for _, e := range ev.Events {
			if !slices.Contains(EventTypes, e) {
				t.Errorf("capability %s: evidence event type %q does not exist", n, e)
			}
		}
		for _, c := range ev.Commands {
			if !slices.Contains(CommandTypes, c) {
				t.Errorf("capability %s: evidence command type %q does not exist", n, c)
			}
		}
	}
	if len(CapabilityEvidence) != len(CapabilityNames) {
		t.Errorf("evidence for %d capabilities, want %d", len(CapabilityEvidence), len(CapabilityNames))
	}
	for mode, caps := range CapabilityPresets {
		if !slices.Contains(snapshotSchema.lookup("mode").enum, mode) {
			t.Errorf("preset %q is not a snapshot mode", mode)
		}
		for _, c := range caps {
			if !slices.Contains(CapabilityNames, c) {
				t.Errorf("preset %s names unknown capability %q", mode, c)
			}
		}
	}
	for _, c := range CapabilityPresets["chat"] {
		if !slices.Contains(CapabilityPresets["work"], c) {
			t.Errorf("work lacks chat's %s", c)
		}
	}
}

// TestRulesTableNamesRealRules: every rule of the Rules table is a rule name the validator
// reports (the other direction is checked by problemsOf in rules_test.go, on every case).
func TestRulesTableNamesRealRules(t *testing.T) {
	src, err := os.ReadFile("validate.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[2]string]bool{}
	for _, r := range Rules {
		if !strings.Contains(string(src), strconv.Quote(r.Name)) {
			t.Errorf("rule %q of the Rules table is not reported by validate.go", r.Name)
		}
		if !slices.Contains(DocumentKinds, r.Kind) {
			t.Errorf("rule %q: unknown kind %q", r.Name, r.Kind)
		}
		if seen[[2]string{r.Name, r.Kind}] {
			t.Errorf("rule %q of kind %s listed twice", r.Name, r.Kind)
		}
		seen[[2]string{r.Name, r.Kind}] = true
		if r.AppliesTo == "" || r.Requires == "" {
			t.Errorf("rule %q: empty description", r.Name)
		}
	}
}

// TestRunTables: the exported views of the run status tables agree with the statuses.
func TestRunTables(t *testing.T) {
	for _, s := range RunStatuses {
		for _, to := range RunTransitions(s) {
			if !slices.Contains(RunStatuses, to) || !CanTransition(s, to) {
				t.Errorf("RunTransitions(%s) lists %s", s, to)
			}
		}
		if IsTerminal(s) != (len(RunTransitions(s)) == 0) {
			t.Errorf("%s: terminal %v but %d transitions", s, IsTerminal(s), len(RunTransitions(s)))
		}
		if ts := RunStatusTimestamp(s); ts != "" && runSchema.lookup(ts) == nil {
			t.Errorf("%s needs %s, which is not a run field", s, ts)
		}
	}
	if got := RunTransitions("queued"); len(got) > 0 {
		got[0] = "changed"
		if RunTransitions("queued")[0] == "changed" {
			t.Error("RunTransitions shares its slice with the table")
		}
	}
}
