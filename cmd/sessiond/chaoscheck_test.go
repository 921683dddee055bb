package main

import (
	"strings"
	"testing"

	"github.com/sessiond/sessiond/contract"
)

// TestFencingProblems: the chaos test's log check finds an old holder's event after a newer
// holder's, and a token the run never had; it passes one holder, successive holders, and
// events that are not the worker's.
func TestFencingProblems(t *testing.T) {
	ev := func(seq int64, run, id string) contract.Event {
		return contract.Event{Sequence: seq, RunID: run, EventID: id}
	}
	cases := []struct {
		name    string
		events  []contract.Event
		fencing map[string]int64
		want    []string // substrings of the problems, in order
		checked int
	}{
		{"one holder", []contract.Event{ev(0, "r", "q1"), ev(1, "r", "echoagent-r-t1-5-1"), ev(2, "r", "echoagent-r-t1-6-2")},
			map[string]int64{"r": 1}, nil, 2},
		{"a newer holder after an older one", []contract.Event{ev(1, "r", "echoagent-r-t1-5-1"), ev(2, "r", "echoagent-r-t2-6-1")},
			map[string]int64{"r": 2}, nil, 2},
		{"the old holder after the new one", []contract.Event{ev(1, "r", "echoagent-r-t1-5-1"), ev(2, "r", "echoagent-r-t2-6-1"), ev(3, "r", "echoagent-r-t1-7-2")},
			map[string]int64{"r": 2}, []string{"event echoagent-r-t1-7-2 (seq 3) under token 1 after an event under token 2"}, 3},
		{"a token the run never had", []contract.Event{ev(1, "r", "echoagent-r-t3-5-1")},
			map[string]int64{"r": 2}, []string{"under token 3, above the run's fencing token 2"}, 1},
		{"runs apart, and events without a run", []contract.Event{ev(1, "a", "echoagent-a-t2-5-1"), ev(2, "b", "echoagent-b-t1-6-1"), ev(3, "", "echoagent-x-t0-1-1")},
			map[string]int64{"a": 2, "b": 1}, nil, 2},
	}
	for _, c := range cases {
		got, checked := fencingProblems(c.events, c.fencing)
		if checked != c.checked || len(got) != len(c.want) {
			t.Errorf("%s: %d checked, problems %q; want %d checked, problems like %q", c.name, checked, got, c.checked, c.want)
			continue
		}
		for i := range got {
			if !strings.Contains(got[i], c.want[i]) {
				t.Errorf("%s: problem %q, want it to contain %q", c.name, got[i], c.want[i])
			}
		}
	}
}
