package sim

import (
	"slices"
	"sync"
	"time"

	"github.com/sessiond/sessiond/session"
)

// Clock is a simulated session.Clock: its time moves only when Advance moves it, and the
// timers of the service's background work fire then, one at a time, at their instants. So the
// sweeper and the lease expirer run at simulated instants, in an order the seed decides, with
// no sleep and no real time passing.
type Clock struct {
	mu     sync.Mutex
	cond   *sync.Cond
	now    time.Time
	seq    uint64 // counts armings: the order of timers due at the same instant
	timers []*fakeTimer
}

// NewClock returns a clock at now.
func NewClock(now time.Time) *Clock {
	c := &Clock{now: now}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// fakeTimer is a timer of a Clock.
type fakeTimer struct {
	c       *Clock
	ch      chan time.Time
	d       time.Duration // the duration it was last armed with
	at      time.Time
	seq     uint64
	armed   bool
	pending bool // fired, and its owner has not armed or stopped it since
}

// Now returns the simulated time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer armed to fire d from now.
func (c *Clock) NewTimer(d time.Duration) session.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	t.arm(d)
	return t
}

// arm arms t to fire d from now; c.mu is held.
func (t *fakeTimer) arm(d time.Duration) {
	c := t.c
	c.seq++
	t.d, t.at, t.seq, t.armed, t.pending = d, c.now.Add(d), c.seq, true, false
	c.cond.Broadcast()
}

// C is the channel the timer fires on.
func (t *fakeTimer) C() <-chan time.Time { return t.ch }

// Stop disarms the timer.
func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.armed, t.pending = false, false
	t.c.cond.Broadcast()
	return was
}

// Reset arms the timer again, d from now.
func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.arm(d)
	return was
}

// WaitArmed waits until n timers are armed (the background loops started).
func (c *Clock) WaitArmed(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.armed() < n {
		c.cond.Wait()
	}
}

func (c *Clock) armed() int {
	n := 0
	for _, t := range c.timers {
		if t.armed {
			n++
		}
	}
	return n
}

// Advance moves the clock d forward. Each timer due meanwhile fires in turn, earliest first
// (at the same instant, the one armed first), with the clock at its instant: before it fires,
// Advance calls before (when not nil) with the timer's duration and the instant, and after it
// fires it waits until the timer's owner has done its work and armed it again (or stopped
// it). The clock ends at now + d.
func (c *Clock) Advance(d time.Duration, before func(interval time.Duration, at time.Time)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	end := c.now.Add(d)
	for {
		due := slices.DeleteFunc(slices.Clone(c.timers), func(t *fakeTimer) bool { return !t.armed || t.at.After(end) })
		if len(due) == 0 {
			break
		}
		t := slices.MinFunc(due, func(a, b *fakeTimer) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			return int(a.seq) - int(b.seq)
		})
		c.now = t.at
		if before != nil {
			c.mu.Unlock()
			before(t.d, t.at)
			c.mu.Lock()
		}
		t.armed, t.pending = false, true
		t.ch <- t.at
		for t.pending {
			c.cond.Wait()
		}
	}
	c.now = end
}
