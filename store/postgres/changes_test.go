package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
	"github.com/sessiond/sessiond/store/storetest"
)

// TestChangesNotifiedAcrossInstances checks that a change committed by one Store reaches the
// change subscribers of another Store on the same schema through its NOTIFY, not the
// listener's periodic poll: every change is heard within 500 ms, and at least some of them
// without a poll in between (a poll-only delivery would need one each time).
func TestChangesNotifiedAcrossInstances(t *testing.T) {
	u := pgtest.Schema(t)
	a, b := openURL(t, u), openURL(t, u)
	heard := make(chan int64, 64)
	defer b.SubscribeChanges(func(seq int64) {
		select {
		case heard <- seq:
		default:
		}
	})()
	ctx := context.Background()
	byNotify := 0
	for i := range 5 {
		polls := b.lis.polls.Load()
		if err := a.CreateSession(ctx, storetest.NewSession(fmt.Sprintf("S-%d", i), storetest.SessionSpec{})); err != nil {
			t.Fatal(err)
		}
		want := int64(i + 1)
		deadline := time.After(500 * time.Millisecond)
	wait:
		for {
			select {
			case n := <-heard:
				if n >= want {
					break wait
				}
			case <-deadline:
				t.Fatalf("change %d was not heard by the other instance within 500 ms", want)
			}
		}
		if b.lis.polls.Load() == polls {
			byNotify++
		}
		cs, err := b.ReadChanges(ctx, want-1, store.ChangeFilter{}, 0)
		if err != nil || len(cs) != 1 || cs[0].Seq != want || cs[0].SessionID != fmt.Sprintf("S-%d", i) {
			t.Fatalf("the other instance reads %+v, %v after %d; want the creation of S-%d", cs, err, want-1, i)
		}
	}
	if byNotify == 0 {
		t.Errorf("no change was delivered without a poll: the NOTIFY path does not work")
	}
}

// TestChangesOfADeadInstanceAreNumbered checks that a change committed without a kick (its
// instance died between the commit and the kick) is numbered by another instance's listener
// poll, and that the numbers stay gap-free.
func TestChangesOfADeadInstanceAreNumbered(t *testing.T) {
	fastListener(t)
	u := pgtest.Schema(t)
	st := openURL(t, u)
	ctx := context.Background()
	if err := st.CreateSession(ctx, storetest.NewSession("S-1", storetest.SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	for n := int64(0); n < 1; time.Sleep(5 * time.Millisecond) { // the creation's own kick is done
		var err error
		if n, err = st.LastChange(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// As the triggers write it, but through the pool: no write method, so no kick.
	if _, err := st.pool.Exec(ctx, `INSERT INTO changes (kind, session_id, project, agent_id, status, previous)
		VALUES ('session.status', 'S-1', '', 'agent-1', 'paused', 'running')`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		cs, err := st.ReadChanges(ctx, 0, store.ChangeFilter{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) == 2 {
			if cs[0].Seq != 1 || cs[1].Seq != 2 || cs[1].Kind != store.ChangeSessionStatus {
				t.Fatalf("changes %+v, want seq 1 (created) and 2 (the unkicked status change)", cs)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the unkicked change was not numbered within 5 s (changes: %+v)", cs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
