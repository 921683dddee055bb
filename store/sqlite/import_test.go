package sqlite

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// TestBadImportDoesNotFailOtherWrites: an import whose events repeat an eventId is refused on
// its own; appends to other sessions that share its commit group are not affected. (Before
// Import.Check looked for repeated ids, the UNIQUE constraint failed the whole group.)
func TestBadImportDoesNotFailOtherWrites(t *testing.T) {
	st := openAt(t, t.TempDir())
	ctx := context.Background()
	if err := st.CreateSession(ctx, storetest.NewSession("good", storetest.SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	var failed []string
	var mu sync.Mutex
	for round := 0; round < 50 && len(failed) == 0; round++ {
		var wg sync.WaitGroup
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprintf("r%d-g%d", round, g)
				ev := storetest.TerminalEvent(t, "good", key, "x")
				if _, err := st.Append(ctx, "good", []*contract.EncodedEvent{ev}, store.AppendOptions{}); err != nil {
					mu.Lock()
					failed = append(failed, err.Error())
					mu.Unlock()
				}
			}()
		}
		id := fmt.Sprintf("bad-%d", round)
		e0 := storetest.EventWithID(t, id, "dup-id", "k0", "a")
		e1 := storetest.EventWithID(t, id, "dup-id", "k1", "b")
		imp := &store.Import{
			Session: storetest.NewSession(id, storetest.SessionSpec{Status: "archived"}),
			Events: []store.StoredEvent{
				{Sequence: 0, EventID: "dup-id", IdempotencyKey: "k0", EventType: "terminal", Data: e0.JSON(0)},
				{Sequence: 1, EventID: "dup-id", IdempotencyKey: "k1", EventType: "terminal", Data: e1.JSON(1)},
			},
		}
		imp.Session.LastSequence = 1
		if err := st.ImportSession(ctx, imp); err == nil {
			t.Fatalf("import with a repeated eventId succeeded")
		}
		wg.Wait()
	}
	if len(failed) > 0 {
		t.Fatalf("%d valid appends to an unrelated session failed because of another caller's bad import, e.g.: %s", len(failed), failed[0])
	}
}
