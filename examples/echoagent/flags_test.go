package main

import (
	"io"
	"regexp"
	"strings"
	"testing"
)

// TestParseFlags: each bad flag is refused naming the flag and the rule, and the command line
// its hint suggests is accepted.
func TestParseFlags(t *testing.T) {
	hintArgs := regexp.MustCompile(`hint: pass (?:e\.g\. )?(--\S+ \S+)`)
	cases := []struct {
		args []string
		want string // in the error; "" for none
	}{
		{[]string{"--concurrency", "0"}, "--concurrency 0: must be at least 1"},
		{[]string{"--lease-ttl", "500ms"}, "--lease-ttl 500ms: must be between 1s and 10m"},
		{[]string{"--lease-ttl", "11m"}, "--lease-ttl 11m0s: must be between 1s and 10m"},
		{[]string{"--tick", "0s"}, "--tick 0s: must be more than 0"},
		{[]string{"--chunks", "0"}, "--chunks 0: must be at least 1"},
		{[]string{"S-demo"}, `unexpected argument "S-demo"`},
		{[]string{"--concurrency", "3", "--lease-ttl", "2s", "--agent", "a", "--project", "p", "--skip-approval"}, ""},
	}
	for _, c := range cases {
		a, server, err := parseFlags(c.args, "http://127.0.0.1:1", io.Discard)
		if c.want == "" {
			if err != nil {
				t.Errorf("%q: %v", c.args, err)
			} else if a.Concurrency != 3 || a.Filter.LeaseTTL != "2s" || a.Filter.AgentID != "a" || a.Filter.Project != "p" || !a.SkipApproval || server != "http://127.0.0.1:1" {
				t.Errorf("%q: agent %+v, server %s", c.args, a, server)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "hint: ") {
			t.Errorf("%q: error %v; want it to say %q and give a hint", c.args, err, c.want)
			continue
		}
		// Follow the hint: the flag it suggests is accepted.
		if m := hintArgs.FindStringSubmatch(err.Error()); m != nil {
			if _, _, err := parseFlags(strings.Fields(m[1]), "", io.Discard); err != nil {
				t.Errorf("%q: the hint's %q is refused too: %v", c.args, m[1], err)
			}
		} else if !strings.HasPrefix(c.want, "unexpected argument") {
			t.Errorf("%q: the hint names no flag to pass: %v", c.args, err)
		}
	}
}
