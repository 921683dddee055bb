package sqlite

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// TestOneCommitPerSync: appends that arrive one after the other while a sync is in flight are
// not committed one by one (they could not be synced before that sync ends anyway) but share
// one group commit, and an append that finds nothing being synced is committed at once.
func TestOneCommitPerSync(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var groups []int // appends per group commit
	st, err := Open(ctx, t.TempDir(), Options{Observer: store.Observer{GroupCommitted: func(appends, _ int) {
		mu.Lock()
		groups = append(groups, appends)
		mu.Unlock()
	}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const later = 8
	ids := make([]string, 1+later)
	for i := range ids {
		ids[i] = fmt.Sprintf("S-%d", i)
		if err := st.CreateSession(ctx, storetest.NewSession(ids[i], storetest.SessionSpec{})); err != nil {
			t.Fatal(err)
		}
		// A first event: the store knows the session's key and the writer has published its
		// open index, so that the appends below go straight to the writer.
		if _, err := st.Append(ctx, ids[i], []*contract.EncodedEvent{storetest.EventWithID(t, ids[i], "ev-0", "key-0", "x")}, store.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	groups = nil
	mu.Unlock()
	release := holdSyncs(t, st)
	errs := make(chan error, len(ids))
	appendOne := func(id string) {
		_, err := st.Append(ctx, id, []*contract.EncodedEvent{storetest.EventWithID(t, id, "ev-"+id, "key-"+id, "x")}, store.AppendOptions{})
		errs <- err
	}
	// The first append finds nothing being synced: it is committed at once and its sync held.
	go appendOne(ids[0])
	waitCommitted(t, st, ids[0], 1)
	// The others arrive 5 ms apart while that sync is held.
	for _, id := range ids[1:] {
		go appendOne(id)
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	release()
	for range ids {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(groups) == 0 || groups[0] != 1 {
		t.Fatalf("group commits %v: want the first append committed alone, at once", groups)
	}
	// The writer may commit one group before the held sync is expected to end (it cannot know
	// that it is held); everything after that waits for the next sync and commits together.
	if rest := groups[1:]; len(rest) > 2 {
		t.Errorf("the %d appends made during one sync took %d group commits %v, want at most 2", later, len(rest), rest)
	}
}
