package sqlite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// TestAppendEventsJSON: the bytes AppendEventsJSON appends are those of the events ReadEvents
// returns, joined by commas, after what dst held, for every page (sizes that vary, so that the
// buffer's first guess is wrong, an empty page, limits past the end and the cap); store's
// fallback for a driver without it (ReadEvents) gives the same; an unknown session is
// store.ErrSessionNotFound with dst unchanged.
func TestAppendEventsJSON(t *testing.T) {
	ctx := context.Background()
	st := openAt(t, t.TempDir())
	const id = "S-json"
	if err := st.CreateSession(ctx, storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	var evs []*contract.EncodedEvent
	for i := range 150 {
		evs = append(evs, storetest.EventWithID(t, id, fmt.Sprintf("ev-%d", i), fmt.Sprintf("key-%d", i), strings.Repeat("x", i*i%900)))
	}
	if _, err := st.Append(ctx, id, evs, store.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	// Embedding the interface hides AppendEventsJSON: store.AppendEventsJSON falls back.
	fallback := struct{ store.Store }{st}
	for _, c := range []struct {
		after int64
		limit int
	}{{-1, 0}, {-1, 1}, {-1, 100}, {0, 65}, {10, 200}, {148, 10}, {149, 10}, {500, 10}} {
		want := []byte("prefix[")
		page, err := st.ReadEvents(ctx, id, c.after, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range page {
			if i > 0 {
				want = append(want, ',')
			}
			want = append(want, e.Data...)
		}
		for _, via := range []struct {
			name string
			st   store.Store
		}{{"sqlite", st}, {"fallback", fallback}} {
			got, n, err := store.AppendEventsJSON(ctx, via.st, id, c.after, c.limit, []byte("prefix["))
			if err != nil || n != len(page) || !bytes.Equal(got, want) {
				t.Errorf("%s after %d limit %d: %d events, %v, %d bytes; want %d events, %d bytes", via.name, c.after, c.limit, n, err, len(got), len(page), len(want))
			}
		}
	}
	got, n, err := st.AppendEventsJSON(ctx, "S-none", -1, 0, []byte("keep"))
	if !errors.Is(err, store.ErrSessionNotFound) || n != 0 || string(got) != "keep" {
		t.Errorf("unknown session: %q, %d, %v; want dst unchanged and ErrSessionNotFound", got, n, err)
	}
}

// TestAppendEventsJSONGuess: a large first event does not size the buffer for a page of events
// as large (maxReadGuess): 1,000 small events after a 900 KB one take about 1.4 MB, not 1 GB.
func TestAppendEventsJSONGuess(t *testing.T) {
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
	got, n, err := st.AppendEventsJSON(ctx, id, -1, 0, nil)
	if err != nil || n != len(evs) {
		t.Fatalf("%d events, %v; want %d", n, err, len(evs))
	}
	if c := cap(got); c > 2*maxReadGuess {
		t.Errorf("buffer of %d MB for %d MB of events", c>>20, len(got)>>20)
	}
}
