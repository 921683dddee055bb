package session_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
)

// hooked runs hook once, just before the first call of the named store method.
type hooked struct {
	store.Store
	at   string
	once sync.Once
	hook func()
}

func (h *hooked) fire(name string) {
	if name == h.at {
		h.once.Do(h.hook)
	}
}

func (h *hooked) GetSession(ctx context.Context, id string) (*store.Session, error) {
	h.fire("GetSession")
	return h.Store.GetSession(ctx, id)
}

func (h *hooked) Runs(ctx context.Context, id string) ([]contract.Run, error) {
	h.fire("Runs")
	return h.Store.Runs(ctx, id)
}

// TestSweepRacesAHeartbeat: a heartbeat that lands before the sweeper re-reads the session
// keeps the session and its run alive; one that lands after it (an expired lease) keeps the
// session running but the run is failed with the retryable HEARTBEAT_LOST error. Either way
// the sweep result says what happened.
func TestSweepRacesAHeartbeat(t *testing.T) {
	for _, tc := range []struct {
		at                  string // the store call the heartbeat lands just before
		wantRun, wantStatus string
		want                session.SweepResult
	}{
		{"GetSession", "running", "running", session.SweepResult{Expired: 1, Skipped: 1}},
		{"Runs", "failed", "running", session.SweepResult{Expired: 1, Skipped: 1, RunsFailed: 1}},
	} {
		t.Run("heartbeat before "+tc.at, func(t *testing.T) {
			b, c := lifecycleSetup(t)
			ctx := context.Background()
			b.append(t, b.story(t)[:3]...) // r1 is running
			c.Add(11 * time.Minute)
			hb := session.New(b.st, session.Options{Clock: session.ClockFunc(c.Now)}) // the heartbeat endpoint's service
			h := &hooked{Store: b.st, at: tc.at, hook: func() {
				if _, err := hb.Heartbeat(ctx, b.sid); err != nil {
					t.Errorf("heartbeat: %v", err)
				}
			}}
			res, err := session.New(h, session.Options{Clock: session.ClockFunc(c.Now)}).Sweep(ctx, session.SweepOptions{})
			if err != nil {
				t.Fatal(err)
			}
			run, _ := b.st.Run(ctx, b.sid, "r1")
			sess, _ := b.st.GetSession(ctx, b.sid)
			if res != tc.want || run.Status != tc.wantRun || sess.Record.Status != tc.wantStatus {
				t.Errorf("sweep %+v, run %s, session %s; want %+v, run %s, session %s", res, run.Status, sess.Record.Status, tc.want, tc.wantRun, tc.wantStatus)
			}
		})
	}
}
