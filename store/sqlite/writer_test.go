package sqlite

import (
	"context"
	"errors"
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

// hookPoints installs a test hook (durability.hook) that reports every point it is called at
// on the returned channel, dropping reports nobody takes; blocking, when not nil, runs first
// and may hold the goroutine that reached the point.
func hookPoints(t *testing.T, st *Store, blocking func(hookPoint)) <-chan hookPoint {
	t.Helper()
	points := make(chan hookPoint, 256)
	hook := func(p hookPoint) {
		if blocking != nil {
			blocking(p)
		}
		select {
		case points <- p:
		default:
		}
	}
	st.dur.hook.Store(&hook)
	t.Cleanup(func() { st.dur.hook.Store(nil) })
	return points
}

// waitPoint waits until some goroutine reaches point p (hookPoints), failing the test after 5 s.
func waitPoint(t *testing.T, points <-chan hookPoint, p hookPoint) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case q := <-points:
			if q == p {
				return
			}
		case <-timeout:
			t.Fatalf("no goroutine reached hook point %d within 5 s", p)
		}
	}
}

// TestFailedSyncAnswersOpenGroup: a group the writer keeps open while it waits for the next
// sync to start is answered (with the failure) when a sync fails, and Close returns: once a sync
// has failed the syncer starts no other, so the writer must never be left waiting for one.
// The syncer is held, after the failed sync has ended, until the writer has reacted to its end.
func TestFailedSyncAnswersOpenGroup(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const S, T = "S-a", "S-b"
	for _, id := range []string{S, T} {
		if err := st.CreateSession(ctx, storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(ctx, id, []*contract.EncodedEvent{storetest.EventWithID(t, id, "e0", "k0", "x")}, store.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	gate := make(chan struct{})
	failSync := func() error { <-gate; return errors.New("injected I/O error") }
	st.dur.beforeSync.Store(&failSync)
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	errs := make(chan error, 3)
	appendOne := func(id, key string) {
		_, err := st.Append(ctx, id, []*contract.EncodedEvent{storetest.EventWithID(t, id, "e"+key, key, "x")}, store.AppendOptions{})
		errs <- err
	}
	go appendOne(T, "k1") // commit k; its sync is held, and fails
	waitCommitted(t, st, T, 1)
	for {
		st.dur.mu.Lock()
		syncing := st.dur.syncing
		st.dur.syncTook = time.Nanosecond // the sync is "expected" over: the next group commits at once
		st.dur.mu.Unlock()
		if syncing {
			break
		}
		time.Sleep(time.Millisecond)
	}
	go appendOne(T, "k2") // commit k+1, waiting for its sync to start
	waitCommitted(t, st, T, 2)
	writer := make(chan hookPoint, 16)
	points := hookPoints(t, st, func(p hookPoint) {
		switch p {
		case hookWriterWait, hookGroupEnd:
			select {
			case writer <- p:
			default:
			}
		case hookSyncEnded:
			// The writer reacts to the end of the sync before the syncer goes on.
			select {
			case <-writer:
			case <-time.After(5 * time.Second):
			}
		}
	})
	go appendOne(S, "k3") // a new group, kept open until the sync of k+1 starts
	waitPoint(t, points, hookWriterWait)
	<-writer
	release()
	for i := range 3 {
		select {
		case err := <-errs:
			if err == nil {
				t.Errorf("answer %d: an append succeeded although its sync, or the one before, failed", i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("answer %d: none within 5 s: an append taken into the open group is never answered", i)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- st.Close() }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5 s")
	}
}

// TestAbsenceInOpenGroupWaitsForSync: while a compaction is in a group the writer keeps open
// (a sync is in flight), a lookup of a compacted event still finds it, and once an append to
// the same session in that group has rebuilt the session's open index: an event's absence is
// only answered once the compaction is durable (TestAbsenceWaitsForSync, for the open group).
func TestAbsenceInOpenGroupWaitsForSync(t *testing.T) {
	ctx := context.Background()
	st := openAt(t, t.TempDir())
	const S, T = "S-a", "S-b"
	for _, id := range []string{S, T} {
		if err := st.CreateSession(ctx, storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"k0", "k1", "k2"} {
		if _, err := st.Append(ctx, S, []*contract.EncodedEvent{storetest.EventWithID(t, S, "e"+k, k, "x")}, store.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Append(ctx, T, []*contract.EncodedEvent{storetest.EventWithID(t, T, "t0", "t0", "x")}, store.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.EventByIdempotencyKey(ctx, S, "k0"); err != nil {
		t.Fatal(err)
	}
	gate1, gate2 := make(chan struct{}), make(chan struct{})
	hold1 := func() error { <-gate1; return nil }
	st.dur.beforeSync.Store(&hold1)
	var once1, once2 sync.Once
	release1 := func() { once1.Do(func() { close(gate1) }) }
	release2 := func() { once2.Do(func() { close(gate2) }) }
	t.Cleanup(func() { release1(); release2() })
	go st.Append(ctx, T, []*contract.EncodedEvent{storetest.EventWithID(t, T, "t1", "t1", "x")}, store.AppendOptions{})
	waitCommitted(t, st, T, 1) // commit k, its sync held
	for {
		st.dur.mu.Lock()
		syncing := st.dur.syncing
		if syncing {
			st.dur.syncTook = time.Minute // the sync is "expected" to last: the next group stays open
		}
		st.dur.mu.Unlock()
		if syncing {
			break
		}
		time.Sleep(time.Millisecond)
	}
	k := st.dur.committing.Load()
	points := hookPoints(t, st, nil)
	compacted := make(chan error, 1)
	go func() { _, err := st.CompactEvents(ctx, S, 0); compacted <- err }()
	waitPoint(t, points, hookTaken)
	go st.Append(ctx, S, []*contract.EncodedEvent{storetest.EventWithID(t, S, "ek3", "k3", "x")}, store.AppendOptions{})
	waitPoint(t, points, hookTaken)
	if c := st.dur.committing.Load(); c != k {
		t.Fatalf("committing moved %d -> %d: the group did not stay open", k, c)
	}
	got := make(chan error, 1)
	go func() { _, err := st.EventByIdempotencyKey(ctx, S, "k0"); got <- err }()
	waitPoint(t, points, hookReadWait) // the lookup is done and waits for sync k
	hold2 := func() error { <-gate2; return nil }
	st.dur.beforeSync.Store(&hold2)
	release1()
	var lookupErr error
	select {
	case lookupErr = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the lookup of k0 was not answered within 5 s of its sync")
	}
	if durable := st.dur.durable.Load(); errors.Is(lookupErr, store.ErrEventNotFound) && durable <= k {
		t.Errorf("k0 answered absent while the compaction that deleted it is not durable (durable %d, compaction's commit %d)", durable, k+1)
	} else if lookupErr != nil && !errors.Is(lookupErr, store.ErrEventNotFound) {
		t.Fatal(lookupErr)
	}
	release2()
	if err := <-compacted; err != nil {
		t.Fatal(err)
	}
	// Once the compaction is durable, k0 is gone and k3, found through the open index, is there.
	if _, err := st.EventByIdempotencyKey(ctx, S, "k0"); !errors.Is(err, store.ErrEventNotFound) {
		t.Errorf("k0 after the compaction: %v, want ErrEventNotFound", err)
	}
	if _, err := st.EventByIdempotencyKey(ctx, S, "k3"); err != nil {
		t.Errorf("k3: %v", err)
	}
}
