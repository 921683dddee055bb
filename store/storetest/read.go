package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

func (s *suite) testRead(t *testing.T) {
	t.Run("ManyConcurrentReaders", func(t *testing.T) {
		t.Parallel()
		// Far more readers than any driver keeps connections, each reading a page large
		// enough to need the whole read path: they must all finish (no pool deadlock).
		ctx, st, id := s.setup(t)
		mustAppend(t, ctx, st, id, Batch(t, id, "k", 300), store.AppendOptions{})
		const readers = 64
		errs := make(chan error, readers)
		for i := 0; i < readers; i++ {
			go func() {
				for j := 0; j < 5; j++ {
					got, err := st.ReadEvents(ctx, id, -1, 1000)
					if err == nil && len(got) != 300 {
						err = fmt.Errorf("read %d events, want 300", len(got))
					}
					if err == nil {
						_, err = st.LastSequence(ctx, id)
					}
					if err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		timeout := time.After(30 * time.Second)
		for i := 0; i < readers; i++ {
			select {
			case err := <-errs:
				if err != nil {
					t.Fatal(err)
				}
			case <-timeout:
				t.Fatalf("%d of %d concurrent readers did not finish in 30 s: the read path deadlocks", readers-i, readers)
			}
		}
	})

	t.Run("Ranges", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		evs := Batch(t, id, "k", 10)
		mustAppend(t, ctx, st, id, evs, store.AppendOptions{})
		for _, c := range []struct {
			after      int64
			limit      int
			first, end int // want events[first:end]
		}{
			{-1, 0, 0, 10},
			{-5, 0, 0, 10},
			{-1, 3, 0, 3},
			{2, 3, 3, 6},
			{2, 0, 3, 10},
			{7, 100, 8, 10},
			{8, 1, 9, 10},
			{9, 0, 10, 10},
			{50, 5, 10, 10},
			{-1, -1, 0, 10},
		} {
			t.Run(fmt.Sprintf("after=%d,limit=%d", c.after, c.limit), func(t *testing.T) {
				got, err := st.ReadEvents(ctx, id, c.after, c.limit)
				if err != nil {
					t.Fatalf("ReadEvents: %v", err)
				}
				var want []store.StoredEvent
				for i := c.first; i < c.end; i++ {
					want = append(want, stored(evs[i], int64(i)))
				}
				if diff := cmp.Diff(want, got, cmp.Transformer("string", func(b []byte) string { return string(b) }), cmpEmpty); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			})
		}
	})

	t.Run("EventsData", func(t *testing.T) {
		// The driver copies stored bytes straight into a buffer (store.EventsDataAppender): the
		// bytes of the events ReadEvents returns, separated by commas (store.AppendEventsJSON) or
		// ended by newlines (store.AppendEventLines), after what dst held, for pages whose sizes
		// vary, an empty page, limits past the end and the cap; store's fallback for a driver
		// without it (ReadEvents) gives the same bytes; an unknown session is
		// store.ErrSessionNotFound with dst unchanged.
		t.Parallel()
		ctx, st, id := s.setup(t)
		if _, ok := st.(store.EventsDataAppender); !ok {
			t.Fatalf("%T does not implement store.EventsDataAppender: HTTP reads would decode every event", st)
		}
		var evs []*contract.EncodedEvent
		for i := range 150 {
			evs = append(evs, EventWithID(t, id, fmt.Sprintf("ev-%d", i), fmt.Sprintf("key-%d", i), strings.Repeat("x", i*i%900)))
		}
		mustAppend(t, ctx, st, id, evs, store.AppendOptions{})
		fallback := struct{ store.Store }{st} // embedding the interface hides AppendEventsData
		for _, c := range []struct {
			after int64
			limit int
		}{{-1, 0}, {-1, 1}, {-1, 100}, {0, 65}, {10, 200}, {148, 10}, {149, 10}, {500, 10}} {
			page, err := st.ReadEvents(ctx, id, c.after, c.limit)
			if err != nil {
				t.Fatal(err)
			}
			wantJSON, wantLines := []byte("prefix["), []byte("prefix\n")
			for i, e := range page {
				if i > 0 {
					wantJSON = append(wantJSON, ',')
				}
				wantJSON = append(wantJSON, e.Data...)
				wantLines = append(append(wantLines, e.Data...), '\n')
			}
			for _, via := range []struct {
				name string
				st   store.Store
			}{{"driver", st}, {"fallback", fallback}} {
				got, n, err := store.AppendEventsJSON(ctx, via.st, id, c.after, c.limit, []byte("prefix["))
				if err != nil || n != len(page) || !bytes.Equal(got, wantJSON) {
					t.Errorf("%s: AppendEventsJSON after %d limit %d: %d events, %v, %d bytes; want %d events, %d bytes", via.name, c.after, c.limit, n, err, len(got), len(page), len(wantJSON))
				}
				got, n, err = store.AppendEventLines(ctx, via.st, id, c.after, c.limit, []byte("prefix\n"))
				if err != nil || n != len(page) || !bytes.Equal(got, wantLines) {
					t.Errorf("%s: AppendEventLines after %d limit %d: %d events, %v, %d bytes; want %d events, %d bytes", via.name, c.after, c.limit, n, err, len(got), len(page), len(wantLines))
				}
			}
		}
		got, n, err := store.AppendEventLines(ctx, st, "S-none", -1, 0, []byte("keep"))
		if !errors.Is(err, store.ErrSessionNotFound) || n != 0 || string(got) != "keep" {
			t.Errorf("unknown session: %q, %d, %v; want dst unchanged and ErrSessionNotFound", got, n, err)
		}
	})

	t.Run("LimitCap", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		const n = 10005
		for i := 0; i < n; i += store.MaxBatchEvents {
			size := min(store.MaxBatchEvents, n-i)
			mustAppend(t, ctx, st, id, Batch(t, id, fmt.Sprintf("b%d", i), size), store.AppendOptions{})
		}
		for _, c := range []struct {
			after int64
			limit int
			want  int
		}{{-1, 0, 10000}, {-1, 20000, 10000}, {-1, 10000, 10000}, {-1, 9999, 9999}, {9999, 0, 5}} {
			got, err := st.ReadEvents(ctx, id, c.after, c.limit)
			if err != nil {
				t.Fatalf("ReadEvents: %v", err)
			}
			if len(got) != c.want {
				t.Errorf("ReadEvents(after %d, limit %d) = %d events, want %d", c.after, c.limit, len(got), c.want)
				continue
			}
			for i, e := range got {
				if e.Sequence != c.after+1+int64(i) {
					t.Fatalf("ReadEvents(after %d): event %d has sequence %d", c.after, i, e.Sequence)
				}
			}
		}
	})

	t.Run("Lookups", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		evs := []*contract.EncodedEvent{
			TerminalEvent(t, id, "a", "1"),
			RunStatusEvent(t, id, "b", "R-1", "M-1", "queued"),
			TerminalEvent(t, id, "c", "3"),
		}
		mustAppend(t, ctx, st, id, evs, store.AppendOptions{})
		for i, ev := range evs {
			want := stored(ev, int64(i))
			got, err := st.EventByID(ctx, id, ev.EventID)
			if err != nil {
				t.Fatalf("EventByID(%s): %v", ev.EventID, err)
			}
			if diff := cmp.Diff(want, got, cmp.Transformer("string", func(b []byte) string { return string(b) })); diff != "" {
				t.Errorf("EventByID(%s) (-want +got):\n%s", ev.EventID, diff)
			}
			got, err = st.EventByIdempotencyKey(ctx, id, ev.IdempotencyKey)
			if err != nil {
				t.Fatalf("EventByIdempotencyKey(%s): %v", ev.IdempotencyKey, err)
			}
			if diff := cmp.Diff(want, got, cmp.Transformer("string", func(b []byte) string { return string(b) })); diff != "" {
				t.Errorf("EventByIdempotencyKey(%s) (-want +got):\n%s", ev.IdempotencyKey, diff)
			}
		}
		if _, err := st.EventByID(ctx, id, "a"); !errors.Is(err, store.ErrEventNotFound) {
			t.Errorf("EventByID of a key, not an id: %v, want ErrEventNotFound", err)
		}
		if _, err := st.EventByIdempotencyKey(ctx, id, "ev-a"); !errors.Is(err, store.ErrEventNotFound) {
			t.Errorf("EventByIdempotencyKey of an id, not a key: %v, want ErrEventNotFound", err)
		}
	})
}

// cmpEmpty treats a nil and an empty slice of events alike.
var cmpEmpty = cmp.FilterValues(func(a, b []store.StoredEvent) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())
