package sqlite

import (
	"context"
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
