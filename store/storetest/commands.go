package storetest

import (
	"errors"
	"testing"

	"github.com/sessiond/sessiond/store"
)

func (s *suite) testCommandResults(t *testing.T) {
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
