package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
	"github.com/sessiond/sessiond/store/storetest"
)

// TestGroupRollsBackWhole: when one statement of a group fails on the server, the group's
// transaction rolls back whole: the appends before it in the group, which their statements
// had written, are not acknowledged but sent to the locking path, and nothing of theirs is
// stored; the connection is usable again.
func TestGroupRollsBackWhole(t *testing.T) {
	st := openURL(t, pgtest.Schema(t))
	ctx := context.Background()
	var calls []*directCall
	for _, id := range []string{"S-a", "S-b"} {
		if err := st.CreateSession(ctx, storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
			t.Fatal(err)
		}
		c, err := st.directCall(ctx, id, storetest.Batch(t, id, "k", 2), serviceOpts())
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, c)
	}
	bad := &directCall{q: `SELECT 1 / (SELECT count(*) FROM sessions WHERE id = 'none')`}
	st.group.run([]*directCall{calls[0], bad, calls[1]})
	for _, c := range calls {
		if c.ok || c.err != nil || c.final != nil {
			t.Errorf("%s: answer ok=%v final=%v err=%v; want the locking path (not ok, no error)", c.sid, c.ok, c.final, c.err)
		}
		last, err := st.LastSequence(ctx, c.sid)
		if err != nil || last != -1 {
			t.Errorf("%s: last sequence %d (%v) after the rolled-back group; want -1", c.sid, last, err)
		}
	}
	if !bad.failed {
		t.Error("the failing statement is not marked failed")
	}
	// The group again, without the failing statement: it commits.
	st.group.run(calls)
	for _, c := range calls {
		if !c.ok || c.err != nil || c.out.added != 2 || c.out.last != 1 {
			t.Errorf("%s: answer %+v ok=%v err=%v; want 2 events added, last 1", c.sid, c.out, c.ok, c.err)
		}
	}
	if st.group.grouped.Load() != 2 {
		t.Errorf("%d appends committed in groups, want 2", st.group.grouped.Load())
	}
}

// TestGroupCommitAcrossSessions: concurrent single-event appends, two writers per session and
// every append sent twice, through a pool of four connections (one group at a time): they
// are committed in groups, each session's log is gap-free, each key stored once, and every
// answer names the sequence its event has in the log.
func TestGroupCommitAcrossSessions(t *testing.T) {
	st := openURL(t, pgtest.Schema(t)+"&pool_max_conns=4")
	ctx := context.Background()
	const sessions, perWriter = 6, 40
	for i := range sessions {
		if err := st.CreateSession(ctx, storetest.NewSession(fmt.Sprintf("S-%d", i), storetest.SessionSpec{})); err != nil {
			t.Fatal(err)
		}
	}
	type acked struct {
		key string
		seq int64
	}
	var mu sync.Mutex
	got := map[string][]acked{}
	var wg sync.WaitGroup
	for w := range 2 * sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("S-%d", w%sessions)
			for j := range perWriter {
				batch := storetest.Batch(t, id, fmt.Sprintf("w%d-%d", w, j), 1)
				for range 2 {
					res, err := st.Append(ctx, id, batch, serviceOpts())
					if err != nil || len(res) != 1 {
						t.Errorf("append %s: %v %v", id, res, err)
						return
					}
					mu.Lock()
					got[id] = append(got[id], acked{batch[0].IdempotencyKey, res[0].Sequence})
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if st.group.grouped.Load() == 0 {
		t.Error("no append was committed in a group")
	}
	for id, acks := range got {
		evs, err := st.ReadEvents(ctx, id, -1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 2*perWriter {
			t.Errorf("%s: %d events, want %d", id, len(evs), 2*perWriter)
		}
		byKey := map[string]int64{}
		for i, e := range evs {
			if e.Sequence != int64(i) {
				t.Fatalf("%s: event %d has sequence %d: a gap", id, i, e.Sequence)
			}
			if _, dup := byKey[e.IdempotencyKey]; dup {
				t.Errorf("%s: key %s stored twice", id, e.IdempotencyKey)
			}
			byKey[e.IdempotencyKey] = e.Sequence
		}
		for _, a := range acks {
			if seq, ok := byKey[a.key]; !ok || seq != a.seq {
				t.Errorf("%s: key %s answered with sequence %d, stored at %d (%v)", id, a.key, a.seq, seq, ok)
			}
		}
	}
}

// TestFencedAppendInOneStatement: an append fenced without a lease (the HTTP API's without a
// lease header) whose events name a run takes the one-statement path when none of its runs
// holds a lease, and is refused with LeaseRequired (by the locking path) when one does; a
// run row locked by another transaction (a claim under way) sends it to the locking path,
// which waits for it.
func TestFencedAppendInOneStatement(t *testing.T) {
	st := openURL(t, pgtest.Schema(t))
	ctx := context.Background()
	if err := st.CreateSession(ctx, storetest.NewSession("S-1", storetest.SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	fenced := store.AppendOptions{Heartbeat: time.Now(), Fence: &store.Fence{}}
	if _, err := st.Append(ctx, "S-1", []*contract.EncodedEvent{storetest.RunStatusEvent(t, "S-1", "q", "R-1", "M-1", "queued")}, store.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	n := st.group.calls.Load()
	res, err := st.Append(ctx, "S-1", []*contract.EncodedEvent{storetest.RunEvent(t, "S-1", "e1", "R-1", "out")}, fenced)
	if err != nil || len(res) != 1 || res[0].Sequence != 1 {
		t.Fatalf("fenced append to an unleased run = %+v, %v; want sequence 1", res, err)
	}
	if st.group.calls.Load() != n+1 {
		t.Errorf("the fenced append to an unleased run did not take the one-statement path")
	}

	// A claim under way: the run's row is locked; the append waits for the locking path.
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM runs WHERE run_id = 'R-1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	appendWaitsForLock(t, ctx, tx, func() error {
		_, err := st.Append(ctx, "S-1", []*contract.EncodedEvent{storetest.RunEvent(t, "S-1", "e2", "R-1", "out")}, fenced)
		return err
	})

	// Leased: refused, nothing written.
	if _, err := st.ClaimRun(ctx, store.ClaimFilter{}, "L-1", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	_, err = st.Append(ctx, "S-1", []*contract.EncodedEvent{storetest.RunEvent(t, "S-1", "e3", "R-1", "out")}, fenced)
	var le *store.LeaseError
	if !errors.As(err, &le) || le.Reason != store.LeaseRequired {
		t.Fatalf("fenced append without the lease to a leased run = %v; want LeaseRequired", err)
	}
	if last, err := st.LastSequence(ctx, "S-1"); err != nil || last != 2 {
		t.Errorf("last sequence %d (%v); want 2", last, err)
	}
}
