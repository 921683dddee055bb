package sim_test

import (
	"slices"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/sim"
)

// TestClock: Advance fires each due timer at its instant, earliest first (the one armed first
// at the same instant), waits for its owner to arm it again, and ends at now + d; a stopped
// timer never fires.
func TestClock(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := sim.NewClock(t0)
	var got []string
	loop := func(name string, every time.Duration, done chan struct{}) {
		tm := c.NewTimer(every)
		go func() {
			defer close(done)
			for at := range tm.C() {
				got = append(got, name+"@"+at.Sub(t0).String())
				if at.Sub(t0) >= 4*time.Second {
					tm.Stop()
					return
				}
				tm.Reset(every)
			}
		}()
	}
	a, b := make(chan struct{}), make(chan struct{})
	loop("a", time.Second, a)
	loop("b", 2*time.Second, b)
	c.WaitArmed(2)
	var seen []string
	c.Advance(5*time.Second+time.Millisecond, func(interval time.Duration, at time.Time) {
		seen = append(seen, interval.String()+"@"+at.Sub(t0).String())
	})
	<-a
	<-b
	want := []string{"a@1s", "b@2s", "a@2s", "a@3s", "b@4s", "a@4s"} // at 2s and 4s, b was armed first
	if !slices.Equal(got, want) {
		t.Errorf("fired %v, want %v", got, want)
	}
	if wantSeen := []string{"1s@1s", "2s@2s", "1s@2s", "1s@3s", "2s@4s", "1s@4s"}; !slices.Equal(seen, wantSeen) {
		t.Errorf("before saw %v, want %v", seen, wantSeen)
	}
	if now := c.Now().Sub(t0); now != 5*time.Second+time.Millisecond {
		t.Errorf("now = t0+%s, want t0+5.001s", now)
	}
}
