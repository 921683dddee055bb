package contract

import "testing"

func TestCount(t *testing.T) {
	p := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		n     *int64
		least int64
		want  bool
	}{
		{nil, 0, false},
		{p(0), 0, true},
		{p(0), 1, false},
		{p(-1), 0, false},
		{p(MaxSafeInteger), 0, true},
		{p(MaxSafeInteger + 1), 0, false},
	} {
		if got := Count(tc.n, tc.least); (got != nil) != tc.want || (got != nil && got != tc.n) {
			t.Errorf("Count(%v, %d) = %v, want kept: %v", tc.n, tc.least, got, tc.want)
		}
	}
}
