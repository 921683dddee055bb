package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
	"github.com/sessiond/sessiond/store/storetest"
)

// openURL opens a store on url and closes it when the test ends.
func openURL(t testing.TB, url string) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := Open(ctx, url)
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

// TestConformance runs the storage conformance suite, each of its tests in a fresh schema.
func TestConformance(t *testing.T) {
	pgtest.BaseURL(t)
	urls := map[store.Store]string{}
	storetest.Exercise(t, storetest.Harness{
		Open: func(t *testing.T) store.Store {
			u := pgtest.Schema(t)
			st := openURL(t, u)
			urls[st] = u
			return st
		},
		Reopen: func(t *testing.T, old store.Store) store.Store {
			u := urls[old]
			if err := old.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			st := openURL(t, u)
			urls[st] = u
			return st
		},
	})
}
