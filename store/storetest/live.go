package storetest

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

func (s *suite) testSubscribe(t *testing.T) {
	ctx, st, id := s.setup(t)
	if err := st.CreateSession(ctx, NewSession("S-two", SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []store.Commit
	cancel := st.Subscribe(func(c store.Commit) {
		mu.Lock()
		got = append(got, c)
		mu.Unlock()
	})
	a := Batch(t, id, "a", 2)
	b := Batch(t, "S-two", "b", 1)
	c := Batch(t, id, "c", 3)
	mustAppend(t, ctx, st, id, a, store.AppendOptions{})
	mustAppend(t, ctx, st, "S-two", b, store.AppendOptions{})
	mustAppend(t, ctx, st, id, a, store.AppendOptions{}) // duplicates only: no commit
	if _, err := st.Append(ctx, id, []*contract.EncodedEvent{TerminalEvent(t, id, "a-0", "changed")}, store.AppendOptions{}); err == nil {
		t.Fatal("conflicting append succeeded")
	}
	mustAppend(t, ctx, st, id, append(c, a[0]), store.AppendOptions{}) // a[0] is a duplicate
	cancel()
	cancel()
	mustAppend(t, ctx, st, id, Batch(t, id, "late", 1), store.AppendOptions{})

	carries := st.Capabilities().CommitCarriesEvents
	ev := func(evs []*contract.EncodedEvent, first int64) []store.StoredEvent {
		if !carries {
			return nil
		}
		var out []store.StoredEvent
		for i, e := range evs {
			out = append(out, stored(e, first+int64(i)))
		}
		return out
	}
	want := []store.Commit{
		{SessionID: id, LastSequence: 1, Events: ev(a, 0)},
		{SessionID: "S-two", LastSequence: 0, Events: ev(b, 0)},
		{SessionID: id, LastSequence: 4, Events: ev(c, 2)},
	}
	// Subscribers are called after the commit; allow a moment for delivery.
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, got, cmp.Transformer("string", func(b []byte) string { return string(b) })); diff != "" {
		t.Errorf("commits seen by the subscriber (-want +got):\n%s", diff)
	}
}

func (s *suite) testConcurrency(t *testing.T) {
	t.Run("OverlappingKeysOneSession", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		const writers, keys = 16, 60
		evs := make([]*contract.EncodedEvent, keys)
		for i := range evs {
			evs[i] = TerminalEvent(t, id, fmt.Sprintf("k%02d", i), fmt.Sprintf("chunk %d", i))
		}
		seqOf := make([]map[string]int64, writers)
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				rng := rand.New(rand.NewSource(int64(w)))
				order := rng.Perm(keys)
				seqOf[w] = map[string]int64{}
				for i := 0; i < keys; {
					n := 1 + rng.Intn(4)
					var batch []*contract.EncodedEvent
					for ; n > 0 && i < keys; n-- {
						batch = append(batch, evs[order[i]])
						i++
					}
					res, err := st.Append(ctx, id, batch, store.AppendOptions{})
					if err != nil {
						errs <- err
						return
					}
					for j, r := range res {
						seqOf[w][batch[j].IdempotencyKey] = r.Sequence
					}
				}
			}(w)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("Append: %v", err)
		}
		log := readAll(t, ctx, st, id)
		if len(log) != keys {
			t.Fatalf("log holds %d events, want exactly one per key (%d)", len(log), keys)
		}
		seen := map[string]bool{}
		for i, e := range log {
			if e.Sequence != int64(i) {
				t.Fatalf("event %d has sequence %d: not gap-free", i, e.Sequence)
			}
			if seen[e.IdempotencyKey] {
				t.Fatalf("key %s stored twice", e.IdempotencyKey)
			}
			seen[e.IdempotencyKey] = true
			for w := range seqOf {
				if seqOf[w][e.IdempotencyKey] != e.Sequence {
					t.Errorf("writer %d was told key %s has sequence %d; the log says %d", w, e.IdempotencyKey, seqOf[w][e.IdempotencyKey], e.Sequence)
				}
			}
		}
	})

	t.Run("ManySessions", func(t *testing.T) {
		t.Parallel()
		ctx, st, _ := s.setup(t)
		const sessions, batches = 8, 20
		var wg sync.WaitGroup
		errs := make(chan error, sessions)
		for i := 0; i < sessions; i++ {
			id := fmt.Sprintf("S-%d", i)
			if err := st.CreateSession(ctx, NewSession(id, SessionSpec{})); err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for b := 0; b < batches; b++ {
					res, err := st.Append(ctx, id, Batch(t, id, fmt.Sprintf("b%d", b), 5), store.AppendOptions{ExpectedSequence: ptr(int64(b*5 - 1))})
					if err != nil {
						errs <- err
						return
					}
					if res[0].Sequence != int64(b*5) {
						errs <- fmt.Errorf("%s batch %d starts at %d", id, b, res[0].Sequence)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for i := 0; i < sessions; i++ {
			id := fmt.Sprintf("S-%d", i)
			if n := lastSeq(t, ctx, st, id); n != sessions*0+batches*5-1 {
				t.Errorf("%s LastSequence = %d, want %d", id, n, batches*5-1)
			}
		}
	})

	t.Run("TailingReaders", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		const writers, perWriter, readers = 4, 150, 4
		total := int64(writers * perWriter)
		var wg sync.WaitGroup
		errs := make(chan error, writers+readers+1)
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				rng := rand.New(rand.NewSource(int64(w)))
				for i := 0; i < perWriter; {
					n := min(1+rng.Intn(5), perWriter-i)
					if _, err := st.Append(ctx, id, Batch(t, id, fmt.Sprintf("w%d-%d", w, i), n), store.AppendOptions{}); err != nil {
						errs <- err
						return
					}
					i += n
				}
			}(w)
		}
		// Pollers read small pages from where they stopped.
		for r := 0; r < readers; r++ {
			wg.Add(1)
			go func(r int) {
				defer wg.Done()
				if err := Tail(ctx, st, id, total, 1+r*3); err != nil {
					errs <- fmt.Errorf("reader %d: %w", r, err)
				}
			}(r)
		}
		// A live reader: a subscriber hands over commits, the reader takes stored history
		// first and then the commits after it, as the server's stream does.
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := follow(ctx, st, id, total); err != nil {
				errs <- fmt.Errorf("follower: %w", err)
			}
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// Tail reads the log of session id page by page (polling) until it has seen total events,
// failing on any skipped or repeated sequence; drivers' own concurrency tests use it too.
func Tail(ctx context.Context, st store.Store, id string, total int64, page int) error {
	next := int64(0)
	for next < total {
		evs, err := st.ReadEvents(ctx, id, next-1, page)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.Sequence != next {
				return fmt.Errorf("read sequence %d, want %d", e.Sequence, next)
			}
			next++
		}
		if len(evs) == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("stopped at %d of %d: %w", next, total, err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// CatchUp reads the session's log from sequence next through upTo with ReadEvents and returns
// the sequence after the last one read. It fails on a skipped or repeated sequence, and when
// the log ends before upTo (something, a commit or LastSequence, said it reaches upTo).
func CatchUp(ctx context.Context, st store.Store, id string, next, upTo int64) (int64, error) {
	for next <= upTo {
		evs, err := st.ReadEvents(ctx, id, next-1, 0)
		if err != nil {
			return next, err
		}
		if len(evs) == 0 {
			return next, fmt.Errorf("the log was said to reach %d but reading after %d finds nothing", upTo, next-1)
		}
		for _, e := range evs {
			if e.Sequence != next {
				return next, fmt.Errorf("read sequence %d, want %d", e.Sequence, next)
			}
			next++
		}
	}
	return next, nil
}

// follow subscribes, then reads history, then consumes live commits, resuming by sequence at the
// seam; it fails on any skipped or repeated sequence.
func follow(ctx context.Context, st store.Store, id string, total int64) error {
	commits := make(chan store.Commit, 4096)
	cancel := st.Subscribe(func(c store.Commit) {
		if c.SessionID == id {
			commits <- c
		}
	})
	defer cancel()
	next := int64(0)
	catchUp := func(upTo int64) (err error) {
		next, err = CatchUp(ctx, st, id, next, upTo)
		return err
	}
	last, err := st.LastSequence(ctx, id)
	if err != nil {
		return err
	}
	if err := catchUp(last); err != nil {
		return err
	}
	for next < total {
		select {
		case c := <-commits:
			if c.LastSequence < next {
				continue // already read from history
			}
			if len(c.Events) > 0 && c.Events[0].Sequence == next {
				for _, e := range c.Events {
					if e.Sequence != next {
						return fmt.Errorf("commit carries sequence %d, want %d", e.Sequence, next)
					}
					next++
				}
				continue
			}
			if err := catchUp(c.LastSequence); err != nil {
				return err
			}
		case <-ctx.Done():
			return fmt.Errorf("stopped at %d of %d: %w", next, total, ctx.Err())
		}
	}
	return nil
}

func (s *suite) testDurability(t *testing.T) {
	if s.h.Reopen == nil {
		t.Skip("the harness cannot reopen a store")
	}
	ctx, st, id := s.setup(t)
	mustAppend(t, ctx, st, id, Batch(t, id, "a", 5), store.AppendOptions{})
	mustAppend(t, ctx, st, id, []*contract.EncodedEvent{
		RunStatusEvent(t, id, "q", "R-1", "M-1", "queued"),
		RunStatusEvent(t, id, "r", "R-1", "M-1", "running"),
	}, store.AppendOptions{})
	if _, err := st.UpdateSession(ctx, id, func(s *store.Session) error { s.Record.Status = "paused"; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateSession(ctx, NewSession("S-empty", SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	sessBefore, _, err := st.ListSessions(ctx, store.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	logBefore := readAll(t, ctx, st, id)
	runsBefore, err := st.Runs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}

	st = s.h.Reopen(t, st)
	sessAfter, _, err := st.ListSessions(ctx, store.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sessBefore, sessAfter); diff != "" {
		t.Errorf("sessions after reopen (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(logBefore, readAll(t, ctx, st, id), cmp.Transformer("string", func(b []byte) string { return string(b) })); diff != "" {
		t.Errorf("log after reopen (-before +after):\n%s", diff)
	}
	runsAfter, err := st.Runs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(runsBefore, runsAfter); diff != "" {
		t.Errorf("runs after reopen (-before +after):\n%s", diff)
	}
	// The reopened store continues the sequence, knows the keys and the runs.
	res := mustAppend(t, ctx, st, id, append(Batch(t, id, "a", 2), TerminalEvent(t, id, "b", "b")), store.AppendOptions{ExpectedSequence: ptr(int64(6))})
	if diff := cmp.Diff([]store.AppendResult{{EventID: "ev-a-0", Sequence: 0, Duplicate: true}, {EventID: "ev-a-1", Sequence: 1, Duplicate: true}, {EventID: "ev-b", Sequence: 7}}, res); diff != "" {
		t.Errorf("append after reopen (-want +got):\n%s", diff)
	}
	if _, err := st.Append(ctx, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "bad", "R-1", "M-1", "queued")}, store.AppendOptions{}); err == nil {
		t.Errorf("running -> queued accepted after reopen")
	}
	mustAppend(t, ctx, st, "S-empty", Batch(t, "S-empty", "e", 1), store.AppendOptions{ExpectedSequence: ptr(int64(-1))})
	st = s.h.Reopen(t, st)
	if n := lastSeq(t, ctx, st, id); n != 7 {
		t.Errorf("LastSequence after the second reopen = %d, want 7", n)
	}
	if n := lastSeq(t, ctx, st, "S-empty"); n != 0 {
		t.Errorf("LastSequence of S-empty after the second reopen = %d, want 0", n)
	}
}
