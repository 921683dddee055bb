package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// checkLog fails the test unless the session's log is exactly want, each event stored as
// ev.JSON(its position) with its envelope fields.
func checkLog(t *testing.T, ctx context.Context, st store.Store, id string, want []*contract.EncodedEvent) {
	t.Helper()
	var exp []store.StoredEvent
	for i, ev := range want {
		exp = append(exp, stored(ev, int64(i)))
	}
	got := readAll(t, ctx, st, id)
	if diff := cmp.Diff(exp, got, cmp.Transformer("string", func(b []byte) string { return string(b) })); diff != "" {
		t.Errorf("log of %s (-want +got):\n%s", id, diff)
	}
	if n := lastSeq(t, ctx, st, id); n != int64(len(want))-1 {
		t.Errorf("LastSequence = %d, want %d", n, len(want)-1)
	}
}

// stored is how ev reads back at sequence seq.
func stored(ev *contract.EncodedEvent, seq int64) store.StoredEvent {
	return store.StoredEvent{Sequence: seq, EventID: ev.EventID, IdempotencyKey: ev.IdempotencyKey, EventType: ev.EventType, RunID: ev.RunID, Data: ev.JSON(seq)}
}

func results(evs []*contract.EncodedEvent, seqs []int64, dups []bool) []store.AppendResult {
	out := make([]store.AppendResult, len(evs))
	for i, ev := range evs {
		out[i] = store.AppendResult{EventID: ev.EventID, Sequence: seqs[i], Duplicate: dups != nil && dups[i]}
	}
	return out
}

func (s *suite) testAppend(t *testing.T) {
	t.Run("GapFreeSequences", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		if n := lastSeq(t, ctx, st, id); n != -1 {
			t.Fatalf("LastSequence of a new session = %d, want -1", n)
		}
		var all []*contract.EncodedEvent
		for b, size := range []int{1, 3, 1, 5} {
			evs := Batch(t, id, fmt.Sprintf("b%d", b), size)
			res := mustAppend(t, ctx, st, id, evs, store.AppendOptions{})
			seqs := make([]int64, size)
			for i := range seqs {
				seqs[i] = int64(len(all) + i)
			}
			if diff := cmp.Diff(results(evs, seqs, nil), res); diff != "" {
				t.Errorf("batch %d results (-want +got):\n%s", b, diff)
			}
			all = append(all, evs...)
		}
		// The fixtures are sent with sequence 7: the store replaces it.
		checkLog(t, ctx, st, id, all)
		got, err := st.GetSession(ctx, id)
		if err != nil || got.LastSequence != int64(len(all)-1) {
			t.Errorf("GetSession LastSequence = %v (%v), want %d", got, err, len(all)-1)
		}
	})

	t.Run("SessionsAreSeparate", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		if err := st.CreateSession(ctx, NewSession("S-other", SessionSpec{})); err != nil {
			t.Fatal(err)
		}
		a := Batch(t, id, "k", 3)
		b := Batch(t, "S-other", "k", 2) // same keys and eventIds, another session
		mustAppend(t, ctx, st, id, a, store.AppendOptions{})
		res := mustAppend(t, ctx, st, "S-other", b, store.AppendOptions{})
		if diff := cmp.Diff(results(b, []int64{0, 1}, nil), res); diff != "" {
			t.Errorf("keys of another session do not count (-want +got):\n%s", diff)
		}
		checkLog(t, ctx, st, id, a)
		checkLog(t, ctx, st, "S-other", b)
	})

	t.Run("AtomicBatch", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		first := Batch(t, id, "old", 2)
		mustAppend(t, ctx, st, id, first, store.AppendOptions{})
		for _, c := range []struct {
			name  string
			batch []*contract.EncodedEvent
			index int
		}{
			{"key reused with other content", []*contract.EncodedEvent{
				TerminalEvent(t, id, "n0", "a"), TerminalEvent(t, id, "n1", "b"),
				TerminalEvent(t, id, "old-1", "changed"), TerminalEvent(t, id, "n3", "c")}, 2},
			{"eventId reused", []*contract.EncodedEvent{
				TerminalEvent(t, id, "n0", "a"), TerminalEvent(t, id, "n1", "b"), TerminalEvent(t, id, "n2", "c"),
				EventWithID(t, id, "ev-old-0", "n3", "d")}, 3},
		} {
			t.Run(c.name, func(t *testing.T) {
				_, err := st.Append(ctx, id, c.batch, store.AppendOptions{})
				ce := errorAs[*store.ConflictError](t, "Append", err)
				if ce.Index != c.index {
					t.Errorf("ConflictError.Index = %d, want %d", ce.Index, c.index)
				}
				checkLog(t, ctx, st, id, first)
				for _, ev := range c.batch[:c.index] {
					if _, err := st.EventByIdempotencyKey(ctx, id, ev.IdempotencyKey); !errors.Is(err, store.ErrEventNotFound) {
						t.Errorf("event %s of the refused batch was stored (%v)", ev.IdempotencyKey, err)
					}
				}
			})
		}
		// The refused batches consumed no sequence.
		next := TerminalEvent(t, id, "after", "x")
		if res := mustAppend(t, ctx, st, id, []*contract.EncodedEvent{next}, store.AppendOptions{}); res[0].Sequence != 2 {
			t.Errorf("sequence after refused batches = %d, want 2", res[0].Sequence)
		}
	})

	t.Run("ExpectedSequence", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		a := Batch(t, id, "a", 2)
		mustAppend(t, ctx, st, id, a, store.AppendOptions{ExpectedSequence: ptr(int64(-1))})
		b := Batch(t, id, "b", 2)
		res := mustAppend(t, ctx, st, id, b, store.AppendOptions{ExpectedSequence: ptr(int64(1))})
		if diff := cmp.Diff(results(b, []int64{2, 3}, nil), res); diff != "" {
			t.Errorf("append at the expected sequence (-want +got):\n%s", diff)
		}
		for _, exp := range []int64{-1, 1, 2, 4, 100} {
			_, err := st.Append(ctx, id, Batch(t, id, "c", 2), store.AppendOptions{ExpectedSequence: ptr(exp)})
			sc := errorAs[*store.SequenceConflictError](t, fmt.Sprintf("Append expecting %d", exp), err)
			if want := (store.SequenceConflictError{SessionID: id, Expected: exp, Actual: 3}); *sc != want {
				t.Errorf("SequenceConflictError = %+v, want %+v", *sc, want)
			}
		}
		checkLog(t, ctx, st, id, append(a, b...))
	})

	t.Run("Duplicates", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		a := Batch(t, id, "a", 3)
		mustAppend(t, ctx, st, id, a, store.AppendOptions{})
		again := Batch(t, id, "a", 3) // equal content, built again
		for _, c := range []struct {
			name  string
			batch []*contract.EncodedEvent
			opts  store.AppendOptions
			want  []store.AppendResult
		}{
			{"one", again[1:2], store.AppendOptions{}, results(again[1:2], []int64{1}, []bool{true})},
			{"whole batch", again, store.AppendOptions{}, results(again, []int64{0, 1, 2}, []bool{true, true, true})},
			{"whole batch, stale expectedSequence", again, store.AppendOptions{ExpectedSequence: ptr(int64(0))}, results(again, []int64{0, 1, 2}, []bool{true, true, true})},
			{"whole batch, current expectedSequence", again[:1], store.AppendOptions{ExpectedSequence: ptr(int64(2))}, results(again[:1], []int64{0}, []bool{true})},
		} {
			t.Run(c.name, func(t *testing.T) {
				res := mustAppend(t, ctx, st, id, c.batch, c.opts)
				if diff := cmp.Diff(c.want, res); diff != "" {
					t.Errorf("results (-want +got):\n%s", diff)
				}
				checkLog(t, ctx, st, id, a)
			})
		}

		t.Run("mixed with new events", func(t *testing.T) {
			t.Parallel()
			ctx, st, id := s.setup(t)
			a := Batch(t, id, "a", 2)
			mustAppend(t, ctx, st, id, a, store.AppendOptions{})
			n := TerminalEvent(t, id, "new", "n")
			batch := []*contract.EncodedEvent{TerminalEvent(t, id, "a-1", "chunk of a-1"), n, TerminalEvent(t, id, "a-0", "chunk of a-0")}
			res := mustAppend(t, ctx, st, id, batch, store.AppendOptions{})
			if diff := cmp.Diff(results(batch, []int64{1, 2, 0}, []bool{true, false, true}), res); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
			// Not every event is a duplicate, so a stale expectedSequence refuses the batch.
			batch2 := []*contract.EncodedEvent{TerminalEvent(t, id, "a-0", "chunk of a-0"), TerminalEvent(t, id, "new2", "n")}
			_, err := st.Append(ctx, id, batch2, store.AppendOptions{ExpectedSequence: ptr(int64(1))})
			errorAs[*store.SequenceConflictError](t, "Append of a partly new batch with a stale expectedSequence", err)
			// A stored key with other content is no duplicate either.
			_, err = st.Append(ctx, id, []*contract.EncodedEvent{TerminalEvent(t, id, "a-0", "changed")}, store.AppendOptions{ExpectedSequence: ptr(int64(0))})
			if err == nil {
				t.Errorf("a changed event under a stored key with a stale expectedSequence was accepted")
			}
			checkLog(t, ctx, st, id, append(a, n))
		})

		t.Run("repeated key in one batch", func(t *testing.T) {
			t.Parallel()
			ctx, st, id := s.setup(t)
			x := TerminalEvent(t, id, "x", "same")
			y := TerminalEvent(t, id, "y", "other")
			batch := []*contract.EncodedEvent{x, y, TerminalEvent(t, id, "x", "same")}
			res := mustAppend(t, ctx, st, id, batch, store.AppendOptions{})
			if diff := cmp.Diff(results(batch, []int64{0, 1, 0}, []bool{false, false, true}), res); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
			checkLog(t, ctx, st, id, []*contract.EncodedEvent{x, y})
			// A stored event repeated twice in a batch with a stale expectedSequence.
			res = mustAppend(t, ctx, st, id, []*contract.EncodedEvent{y, y}, store.AppendOptions{ExpectedSequence: ptr(int64(-1))})
			if diff := cmp.Diff(results([]*contract.EncodedEvent{y, y}, []int64{1, 1}, []bool{true, true}), res); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
		})
	})

	t.Run("Conflicts", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		a := Batch(t, id, "a", 3)
		mustAppend(t, ctx, st, id, a, store.AppendOptions{})
		for _, c := range []struct {
			name  string
			batch []*contract.EncodedEvent
			want  store.ConflictError
		}{
			{"key with other content", []*contract.EncodedEvent{TerminalEvent(t, id, "a-1", "changed")},
				store.ConflictError{Index: 0, Reason: store.ConflictIdempotencyKey, EventID: "ev-a-1", IdempotencyKey: "a-1", Existing: 1}},
			{"key with other eventId", []*contract.EncodedEvent{TerminalEvent(t, id, "n", "n"), EventWithID(t, id, "ev-other", "a-2", "chunk of a-2")},
				store.ConflictError{Index: 1, Reason: store.ConflictIdempotencyKey, EventID: "ev-other", IdempotencyKey: "a-2", Existing: 2}},
			{"eventId under another key", []*contract.EncodedEvent{EventWithID(t, id, "ev-a-0", "fresh", "chunk of a-0")},
				store.ConflictError{Index: 0, Reason: store.ConflictEventID, EventID: "ev-a-0", IdempotencyKey: "fresh", Existing: 0}},
			{"key reused in the batch", []*contract.EncodedEvent{TerminalEvent(t, id, "n", "one"), TerminalEvent(t, id, "n", "two")},
				store.ConflictError{Index: 1, Reason: store.ConflictIdempotencyKey, EventID: "ev-n", IdempotencyKey: "n", Existing: 3}},
			{"eventId reused in the batch", []*contract.EncodedEvent{EventWithID(t, id, "ev-z", "z1", "one"), EventWithID(t, id, "ev-z", "z2", "one")},
				store.ConflictError{Index: 1, Reason: store.ConflictEventID, EventID: "ev-z", IdempotencyKey: "z2", Existing: 3}},
		} {
			t.Run(c.name, func(t *testing.T) {
				_, err := st.Append(ctx, id, c.batch, store.AppendOptions{})
				ce := errorAs[*store.ConflictError](t, "Append", err)
				if *ce != c.want {
					t.Errorf("ConflictError = %+v, want %+v", *ce, c.want)
				}
				if ce.Error() == "" {
					t.Error("ConflictError has no message")
				}
				checkLog(t, ctx, st, id, a)
			})
		}
	})

	t.Run("SessionMismatch", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		batch := []*contract.EncodedEvent{TerminalEvent(t, id, "a", "a"), TerminalEvent(t, "S-elsewhere", "b", "b")}
		_, err := st.Append(ctx, id, batch, store.AppendOptions{})
		me := errorAs[*store.SessionMismatchError](t, "Append", err)
		if want := (store.SessionMismatchError{Index: 1, SessionID: id, EventSID: "S-elsewhere"}); *me != want {
			t.Errorf("SessionMismatchError = %+v, want %+v", *me, want)
		}
		checkLog(t, ctx, st, id, nil)
	})

	t.Run("Limits", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		_, err := st.Append(ctx, id, Batch(t, id, "over", store.MaxBatchEvents+1), store.AppendOptions{})
		le := errorAs[*store.LimitError](t, "Append of a batch over the limit", err)
		if want := (store.LimitError{What: "batch", Limit: store.MaxBatchEvents, Got: store.MaxBatchEvents + 1}); *le != want {
			t.Errorf("LimitError = %+v, want %+v", *le, want)
		}
		checkLog(t, ctx, st, id, nil)

		big := BigEvent(t, id, "big", store.MaxEventBytes)
		batch := []*contract.EncodedEvent{TerminalEvent(t, id, "small", "s"), big}
		_, err = st.Append(ctx, id, batch, store.AppendOptions{})
		le = errorAs[*store.LimitError](t, "Append of an event over the limit", err)
		if le.What != "event" || le.Index != 1 || le.Limit != store.MaxEventBytes || le.Got != len(big.JSON(0)) {
			t.Errorf("LimitError = %+v, want event 1, limit %d, got %d", *le, store.MaxEventBytes, len(big.JSON(0)))
		}
		checkLog(t, ctx, st, id, nil)

		full := Batch(t, id, "full", store.MaxBatchEvents)
		near := BigEvent(t, id, "near", store.MaxEventBytes-1024)
		mustAppend(t, ctx, st, id, full, store.AppendOptions{})
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{near}, store.AppendOptions{})
		checkLog(t, ctx, st, id, append(full, near))
	})

	t.Run("UnknownSession", func(t *testing.T) {
		t.Parallel()
		ctx, st, _ := s.setup(t)
		const id = "S-missing"
		_, err := st.Append(ctx, id, Batch(t, id, "k", 1), store.AppendOptions{})
		for _, c := range []struct {
			name string
			err  error
		}{
			{"Append", err},
			{"ReadEvents", func() error { _, err := st.ReadEvents(ctx, id, -1, 0); return err }()},
			{"LastSequence", func() error { _, err := st.LastSequence(ctx, id); return err }()},
			{"EventByID", func() error { _, err := st.EventByID(ctx, id, "ev-k-0"); return err }()},
			{"EventByIdempotencyKey", func() error { _, err := st.EventByIdempotencyKey(ctx, id, "k-0"); return err }()},
			{"Runs", func() error { _, err := st.Runs(ctx, id); return err }()},
			{"Run", func() error { _, err := st.Run(ctx, id, "R-1"); return err }()},
		} {
			if !errors.Is(c.err, store.ErrSessionNotFound) {
				t.Errorf("%s of an unknown session: %v, want ErrSessionNotFound", c.name, c.err)
			}
		}
		if _, err := st.GetSession(ctx, id); !errors.Is(err, store.ErrSessionNotFound) {
			t.Errorf("a refused Append created the session: %v", err)
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := st.Append(cctx, id, Batch(t, id, "k", 2), store.AppendOptions{})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Append with a cancelled context: %v, want context.Canceled", err)
		}
		checkLog(t, ctx, st, id, nil)
	})

	t.Run("EmptyBatch", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		res, err := st.Append(ctx, id, nil, store.AppendOptions{ExpectedSequence: ptr(int64(-1))})
		if err != nil || len(res) != 0 {
			t.Errorf("Append of no events = %v, %v; want no results and no error", res, err)
		}
		checkLog(t, ctx, st, id, nil)
	})
}
