package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// TestDuplicatesSkipTheWriter: a batch that only repeats stored events is answered without a
// group commit (from the open index and the read pool); a batch with one new event, or one
// repeating a key with other content, goes to the writer and is answered by the usual rules.
func TestDuplicatesSkipTheWriter(t *testing.T) {
	ctx := context.Background()
	var groups atomic.Int64
	st, err := Open(ctx, t.TempDir(), Options{Observer: store.Observer{GroupCommitted: func(int, int) { groups.Add(1) }}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id := "S-dup"
	if err := st.CreateSession(ctx, storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	var evs []*contract.EncodedEvent
	for i := range 5 {
		evs = append(evs, storetest.EventWithID(t, id, fmt.Sprintf("ev-%d", i), fmt.Sprintf("key-%d", i), "x"))
	}
	if _, err := st.Append(ctx, id, evs, store.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	before := groups.Load()
	for _, batch := range [][]*contract.EncodedEvent{evs[:1], evs[1:4], {evs[2], evs[2], evs[0]}} {
		res, err := st.Append(ctx, id, batch, store.AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if !r.Duplicate || r.EventID != batch[i].EventID {
				t.Errorf("result %d: %+v; want a duplicate of %s", i, r, batch[i].EventID)
			}
		}
	}
	if n := groups.Load() - before; n != 0 {
		t.Errorf("duplicate-only appends took %d group commits, want 0", n)
	}
	mixed := []*contract.EncodedEvent{evs[0], storetest.EventWithID(t, id, "ev-new", "key-new", "x")}
	res, err := st.Append(ctx, id, mixed, store.AppendOptions{})
	if err != nil || !res[0].Duplicate || res[1].Duplicate || res[1].Sequence != 5 {
		t.Errorf("duplicate and new event: %+v, %v", res, err)
	}
	other := storetest.EventWithID(t, id, "ev-1", "key-1", "other content")
	if _, err := st.Append(ctx, id, []*contract.EncodedEvent{other}, store.AppendOptions{}); err == nil {
		t.Errorf("a stored key with other content was accepted")
	}
}

// TestDuplicateContentDecides: a resent event is a duplicate only when its content is the
// stored event's, whether the open index has the stored event's content sum (events appended
// since Open: answered from memory) or not (events it was rebuilt from after a reopen: read
// and compared); the same key with other content is refused as a conflict naming the stored
// event, in a batch of its own or after a duplicate.
func TestDuplicateContentDecides(t *testing.T) {
	ctx := context.Background()
	const id = "S-dupsum"
	for _, reopen := range []bool{false, true} {
		t.Run(fmt.Sprintf("reopen=%v", reopen), func(t *testing.T) {
			dir := t.TempDir()
			st := openAt(t, dir)
			if err := st.CreateSession(ctx, storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
				t.Fatal(err)
			}
			var evs []*contract.EncodedEvent
			for i := range 4 {
				evs = append(evs, storetest.EventWithID(t, id, fmt.Sprintf("ev-%d", i), fmt.Sprintf("key-%d", i), "x"))
			}
			if _, err := st.Append(ctx, id, evs, store.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			if reopen {
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}
				st = openAt(t, dir)
				// The index is rebuilt from the rows by the next append, with no sums for them.
				if _, err := st.Append(ctx, id, []*contract.EncodedEvent{storetest.EventWithID(t, id, "ev-4", "key-4", "x")}, store.AppendOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			// White box: whether the open index can answer key-1 from memory.
			v, ok := st.openIdx.Load(int64(1))
			if !ok {
				t.Fatal("no open index published")
			}
			var buf [4]sumCandidate
			cands, _ := v.(*openIndex).readSums(buf[:0], keyHash('k', "key-1"), st.bits)
			if len(cands) != 1 || (cands[0].sum == contentSumOf(evs[1])) == reopen {
				t.Fatalf("key-1's candidates %+v; want its content sum there only without a reopen", cands)
			}

			conflict := func(index int, existing int64) *store.ConflictError {
				return &store.ConflictError{Index: index, Reason: store.ConflictIdempotencyKey, Existing: existing}
			}
			for _, tc := range []struct {
				name  string
				batch []*contract.EncodedEvent
				dups  []int64 // the sequences of the duplicates, when accepted
				err   *store.ConflictError
			}{
				{"same event", []*contract.EncodedEvent{evs[1]}, []int64{1}, nil},
				{"same events", []*contract.EncodedEvent{evs[3], evs[0], evs[3]}, []int64{3, 0, 3}, nil},
				{"same key and id, other content", []*contract.EncodedEvent{storetest.EventWithID(t, id, "ev-1", "key-1", "y")}, nil, conflict(0, 1)},
				{"same key, other id", []*contract.EncodedEvent{storetest.EventWithID(t, id, "ev-other", "key-2", "x")}, nil, conflict(0, 2)},
				{"a duplicate, then other content", []*contract.EncodedEvent{evs[0], storetest.EventWithID(t, id, "ev-3", "key-3", "xx")}, nil, conflict(1, 3)},
			} {
				res, err := st.Append(ctx, id, tc.batch, store.AppendOptions{})
				if tc.err != nil {
					var ce *store.ConflictError
					if !errors.As(err, &ce) || ce.Index != tc.err.Index || ce.Reason != tc.err.Reason || ce.Existing != tc.err.Existing {
						t.Errorf("%s: %+v, %v; want %+v", tc.name, res, err, tc.err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				for i, r := range res {
					if !r.Duplicate || r.Sequence != tc.dups[i] || r.EventID != tc.batch[i].EventID {
						t.Errorf("%s: result %d is %+v; want a duplicate at %d", tc.name, i, r, tc.dups[i])
					}
				}
			}
			if last, err := st.LastSequence(ctx, id); err != nil || last != map[bool]int64{false: 3, true: 4}[reopen] {
				t.Errorf("log ends at %d, %v: a refused or duplicate append wrote", last, err)
			}
		})
	}
}
