package sqlite

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// TestObserverSeesCommitsAndSyncs: the Observer given to Open is told of every group commit
// (its appends and events) and of the syncs that made them durable, before the appends return.
func TestObserverSeesCommitsAndSyncs(t *testing.T) {
	var mu sync.Mutex
	var appends, events, syncs, synced int
	obs := store.Observer{
		GroupCommitted: func(a, e int) { mu.Lock(); appends += a; events += e; mu.Unlock() },
		Synced: func(took time.Duration, groups int) {
			mu.Lock()
			defer mu.Unlock()
			if took <= 0 || groups < 1 {
				t.Errorf("Synced(%v, %d): want a positive time and at least one group", took, groups)
			}
			syncs++
			synced += groups
		},
	}
	st, err := Open(context.Background(), t.TempDir(), Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.CreateSession(context.Background(), storetest.NewSession("S-obs", storetest.SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	appends, events, syncs, synced = 0, 0, 0, 0 // creation is a commit of its own
	mu.Unlock()
	for i, n := range []int{1, 3} {
		batch := make([]*contract.EncodedEvent, n)
		for j := range batch {
			key := string(rune('a'+i)) + string(rune('a'+j))
			batch[j] = storetest.EventWithID(t, "S-obs", "ev-"+key, key, "x")
		}
		if _, err := st.Append(context.Background(), "S-obs", batch, store.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if appends != 2 || events != 4 {
		t.Errorf("GroupCommitted saw %d appends and %d events; want 2 and 4", appends, events)
	}
	if syncs < 1 || synced != 2 {
		t.Errorf("Synced was called %d times for %d groups; want at least once, for the 2 groups", syncs, synced)
	}
}
