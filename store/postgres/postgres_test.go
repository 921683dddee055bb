package postgres

import (
	"context"
	"sync"
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
	var (
		mu   sync.Mutex // the suite opens stores from parallel tests
		urls = map[store.Store]string{}
	)
	storetest.Exercise(t, storetest.Harness{
		Open: func(t *testing.T) store.Store {
			u := pgtest.Schema(t)
			st := openURL(t, u)
			mu.Lock()
			urls[st] = u
			mu.Unlock()
			return st
		},
		Reopen: func(t *testing.T, old store.Store) store.Store {
			mu.Lock()
			u := urls[old]
			mu.Unlock()
			if err := old.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			st := openURL(t, u)
			mu.Lock()
			urls[st] = u
			mu.Unlock()
			return st
		},
		Second: func(t *testing.T, st store.Store) store.Store {
			mu.Lock()
			u := urls[st]
			mu.Unlock()
			return openURL(t, u)
		},
	})
}
