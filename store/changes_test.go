package store

import (
	"slices"
	"testing"
)

// TestChangeSubscribers checks registration order, cancel (twice) and that a cancelled
// callback is no longer called.
func TestChangeSubscribers(t *testing.T) {
	var s ChangeSubscribers
	var got []string
	cancelA := s.Add(func(n int64) { got = append(got, "a") })
	s.Add(func(n int64) { got = append(got, "b") })
	cancelC := s.Add(func(n int64) { got = append(got, "c") })
	s.Notify(1)
	cancelA()
	cancelA()
	cancelC()
	s.Notify(2)
	if want := []string{"a", "b", "c", "b"}; !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
}

// TestChangeFilterMatch checks the filter against every combination of its fields.
func TestChangeFilterMatch(t *testing.T) {
	c := &Change{Project: "p", AgentID: "a"}
	for _, tc := range []struct {
		f    ChangeFilter
		want bool
	}{
		{ChangeFilter{}, true},
		{ChangeFilter{Project: "p"}, true},
		{ChangeFilter{AgentID: "a"}, true},
		{ChangeFilter{Project: "p", AgentID: "a"}, true},
		{ChangeFilter{Project: "q"}, false},
		{ChangeFilter{Project: "p", AgentID: "b"}, false},
	} {
		if got := tc.f.Match(c); got != tc.want {
			t.Errorf("%+v.Match = %v, want %v", tc.f, got, tc.want)
		}
	}
}
