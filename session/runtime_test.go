package session_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/session"
)

// TestStartStop: the maintainer sweeps on its interval once started, reports every pass, is
// refused a second Start, stops (no pass after Stop returns), and starts again.
func TestStartStop(t *testing.T) {
	b := setup(t)
	var (
		mu     sync.Mutex
		passes = map[string]int{}
	)
	svc := session.New(b.st, session.Options{StaleAfter: time.Millisecond, SweepInterval: 5 * time.Millisecond, LeaseExpiryInterval: 5 * time.Millisecond})
	svc.OnPass(func(p session.Pass) {
		mu.Lock()
		defer mu.Unlock()
		if p.Err != nil {
			t.Errorf("%s pass: %v", p.Kind, p.Err)
		}
		passes[p.Kind]++
	})
	count := func(kind string) int { mu.Lock(); defer mu.Unlock(); return passes[kind] }
	ctx := context.Background()
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); !errors.Is(err, session.ErrStarted) {
		t.Fatalf("a second Start = %v, want ErrStarted", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		sess, err := b.st.GetSession(ctx, b.sid)
		if err != nil {
			t.Fatal(err)
		}
		if sess.Record.Status == "stale" && count(session.PassLeaseExpiry) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session is %s after 10 s of sweeps every 5 ms (%v passes)", sess.Record.Status, passes)
		}
	}
	svc.Stop()
	sweeps, expiries := count(session.PassSweep), count(session.PassLeaseExpiry)
	time.Sleep(30 * time.Millisecond)
	if count(session.PassSweep) != sweeps || count(session.PassLeaseExpiry) != expiries {
		t.Fatalf("passes went on after Stop: %v, then %d sweeps and %d expiries", passes, sweeps, expiries)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatalf("Start after Stop: %v", err)
	}
	svc.Close()
	svc.Stop() // after Close: nothing left to stop
}

// TestOptionsDefaults: the zero Options take the documented defaults.
func TestOptionsDefaults(t *testing.T) {
	o := session.New(setup(t).st, session.Options{}).Options()
	if o.StaleAfter != session.DefaultStaleAfter || o.MaxAttempts != 1 || o.LeaseExpiryInterval != session.DefaultLeaseExpiryInterval ||
		o.Window != session.DefaultWindow || o.RetentionInterval != session.DefaultRetentionInterval || o.SweepInterval != 0 || o.Clock == nil || o.Logger == nil {
		t.Fatalf("defaults = %+v", o)
	}
}
