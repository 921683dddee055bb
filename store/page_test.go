package store

import (
	"fmt"
	"testing"

	"github.com/sessiond/sessiond/contract"
)

func TestReadLimit(t *testing.T) {
	for _, c := range []struct{ in, want int }{
		{-1, MaxReadLimit}, {0, MaxReadLimit}, {1, 1}, {MaxReadLimit, MaxReadLimit}, {MaxReadLimit + 1, MaxReadLimit},
	} {
		if got := ReadLimit(c.in); got != c.want {
			t.Errorf("ReadLimit(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestPageLimit(t *testing.T) {
	for _, c := range []struct{ in, want int }{
		{-5, DefaultListLimit}, {0, DefaultListLimit}, {7, 7}, {MaxListLimit, MaxListLimit}, {MaxListLimit + 1, MaxListLimit},
	} {
		if got := (ListFilter{Limit: c.in}).PageLimit(); got != c.want {
			t.Errorf("PageLimit(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestCutPage(t *testing.T) {
	list := func(n int) []*Session {
		out := make([]*Session, n)
		for i := range out {
			out[i] = &Session{Record: contract.SessionRecord{SessionID: fmt.Sprintf("S-%d", i)}}
		}
		return out
	}
	for _, c := range []struct {
		read, limit, wantLen int
		wantNext             string
	}{
		{0, 3, 0, ""}, {2, 3, 2, ""}, {3, 3, 3, ""}, {4, 3, 3, "S-2"},
	} {
		page, next := CutPage(list(c.read), c.limit)
		if len(page) != c.wantLen || next != c.wantNext {
			t.Errorf("CutPage(%d sessions, %d) = %d sessions, next %q; want %d, %q", c.read, c.limit, len(page), next, c.wantLen, c.wantNext)
		}
	}
}
