package sqlite

import (
	"context"
	"fmt"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// TestAppendEventsDataGuess: a large first event does not size the buffer for a page of events
// as large (maxReadGuess): 1,000 small events after a 900 KB one take about 1.4 MB, not 1 GB.
func TestAppendEventsDataGuess(t *testing.T) {
	ctx := context.Background()
	st := openAt(t, t.TempDir())
	const id = "S-guess"
	if err := st.CreateSession(ctx, storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	evs := []*contract.EncodedEvent{storetest.BigEvent(t, id, "big", 900<<10)}
	for i := range 1000 {
		evs = append(evs, storetest.EventWithID(t, id, fmt.Sprintf("ev-%d", i), fmt.Sprintf("key-%d", i), "x"))
	}
	for i := 0; i < len(evs); i += 500 {
		if _, err := st.Append(ctx, id, evs[i:min(i+500, len(evs))], store.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	got, n, err := st.AppendEventsData(ctx, id, -1, 0, ',', nil)
	if err != nil || n != len(evs) {
		t.Fatalf("%d events, %v; want %d", n, err, len(evs))
	}
	if c := cap(got); c > 2*maxReadGuess {
		t.Errorf("buffer of %d MB for %d MB of events", c>>20, len(got)>>20)
	}
}
