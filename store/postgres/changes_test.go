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
