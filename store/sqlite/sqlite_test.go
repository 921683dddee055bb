package sqlite

import (
	"context"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// openAt opens the store in dir and closes it when the test ends.
func openAt(t testing.TB, dir string) *Store {
	t.Helper()
	st, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}

func TestConformance(t *testing.T) {
	dirs := map[store.Store]string{}
	storetest.Exercise(t, storetest.Harness{
		Open: func(t *testing.T) store.Store {
			dir := t.TempDir()
			st := openAt(t, dir)
			dirs[st] = dir
			return st
		},
		Reopen: func(t *testing.T, old store.Store) store.Store {
			dir := dirs[old]
			if err := old.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			st := openAt(t, dir)
			dirs[st] = dir
			return st
		},
	})
}

func TestLockedDirectory(t *testing.T) {
	dir := t.TempDir()
	st := openAt(t, dir)
	_, err := Open(context.Background(), dir)
	if err == nil {
		t.Fatal("a second Open of the same directory succeeded")
	}
	if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "in use") {
		t.Errorf("error %q does not say the directory is in use", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	openAt(t, dir) // released on Close
}
