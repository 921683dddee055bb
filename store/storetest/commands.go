package storetest

import (
	"errors"
	"testing"

	"github.com/sessiond/sessiond/store"
)

func (s *suite) testCommandResults(t *testing.T) {
	t.Run("WithAppend", s.testCommandResultWithAppend)
	ctx, st, id := s.setup(t)
	first, second := []byte(`{"outcome":"accepted"}`), []byte(`{"outcome":"rejected"}`)
	got, existed, err := st.PutCommandResult(ctx, id, "cmd-1", first)
	if err != nil || existed || string(got) != string(first) {
		t.Fatalf("PutCommandResult of a new key = %s, %v, %v; want the result, false, nil", got, existed, err)
	}
	got, existed, err = st.PutCommandResult(ctx, id, "cmd-1", second)
	if err != nil || !existed || string(got) != string(first) {
		t.Errorf("PutCommandResult of a stored key = %s, %v, %v; want the first result, true, nil", got, existed, err)
	}
	if got, err := st.CommandResult(ctx, id, "cmd-1"); err != nil || string(got) != string(first) {
		t.Errorf("CommandResult = %s, %v; want the first result", got, err)
	}
	if _, err := st.CommandResult(ctx, id, "cmd-2"); !errors.Is(err, store.ErrCommandNotFound) {
		t.Errorf("CommandResult of an unknown key: %v, want ErrCommandNotFound", err)
	}
	if err := st.CreateSession(ctx, NewSession("S-two", SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CommandResult(ctx, "S-two", "cmd-1"); !errors.Is(err, store.ErrCommandNotFound) {
		t.Errorf("a key of another session counts: %v, want ErrCommandNotFound", err)
	}
	if _, _, err := st.PutCommandResult(ctx, "S-missing", "cmd-1", first); !errors.Is(err, store.ErrSessionNotFound) {
		t.Errorf("PutCommandResult to an unknown session: %v, want ErrSessionNotFound", err)
	}
	if _, err := st.CommandResult(ctx, "S-missing", "cmd-1"); !errors.Is(err, store.ErrSessionNotFound) {
		t.Errorf("CommandResult of an unknown session: %v, want ErrSessionNotFound", err)
	}
	if s.h.Reopen != nil {
		st = s.h.Reopen(t, st)
		if got, err := st.CommandResult(ctx, id, "cmd-1"); err != nil || string(got) != string(first) {
			t.Errorf("CommandResult after reopen = %s, %v; want the first result", got, err)
		}
	}
}

// testCommandResultWithAppend: a result given with an append is stored in its transaction,
// only when the append writes; a refused append stores nothing.
func (s *suite) testCommandResultWithAppend(t *testing.T) {
	t.Parallel()
	ctx, st, id := s.setup(t)
	res := []byte(`{"outcome":"accepted"}`)
	stale := int64(5)
	_, err := st.Append(ctx, id, Batch(t, id, "a", 1), store.AppendOptions{ExpectedSequence: &stale,
		CommandResult: &store.CommandResultWrite{Key: "cmd-refused", Result: res}})
	var conflict *store.SequenceConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("Append with a stale expectation: %v, want a sequence conflict", err)
	}
	if _, err := st.CommandResult(ctx, id, "cmd-refused"); !errors.Is(err, store.ErrCommandNotFound) {
		t.Errorf("a refused append stored its command result: %v", err)
	}
	evs := Batch(t, id, "b", 2)
	if _, err := st.Append(ctx, id, evs, store.AppendOptions{CommandResult: &store.CommandResultWrite{Key: "cmd-1", Result: res}}); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if got, err := st.CommandResult(ctx, id, "cmd-1"); err != nil || string(got) != string(res) {
		t.Errorf("CommandResult after the append = %s, %v; want the result", got, err)
	}
	// A repeat writes no event: it stores no result either.
	if _, err := st.Append(ctx, id, evs, store.AppendOptions{CommandResult: &store.CommandResultWrite{Key: "cmd-2", Result: res}}); err != nil {
		t.Fatalf("repeated Append: %v", err)
	}
	if _, err := st.CommandResult(ctx, id, "cmd-2"); !errors.Is(err, store.ErrCommandNotFound) {
		t.Errorf("an append of duplicates stored a command result: %v", err)
	}
}
