package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"sync"
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

// TestConformance runs the storage conformance suite on the driver, with the default generation
// size and with generations of 16 events, so that every scenario of the suite also runs across
// many generations of the log (generation.go), and with those and a tail moved into events
// whenever it holds 3 events, so that every scenario reads logs split between the two tables
// and appends while the tail moves (tail.go).
func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		bits uint
		tail int
	}{{"default", 0, 0}, {"generations-of-16", 4, 0}, {"generations-of-16-tail-of-3", 4, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var (
				mu   sync.Mutex // the suite opens stores from parallel tests
				dirs = map[store.Store]string{}
			)
			storetest.Exercise(t, storetest.Harness{
				Open: func(t *testing.T) store.Store {
					dir := t.TempDir()
					if tc.bits != 0 {
						setGenerationBits(t, dir, tc.bits)
					}
					if tc.tail != 0 {
						setTailRows(t, dir, tc.tail)
					}
					st := openAt(t, dir)
					mu.Lock()
					dirs[st] = dir
					mu.Unlock()
					return st
				},
				Reopen: func(t *testing.T, old store.Store) store.Store {
					mu.Lock()
					dir := dirs[old]
					mu.Unlock()
					if err := old.Close(); err != nil {
						t.Fatalf("Close: %v", err)
					}
					st := openAt(t, dir)
					mu.Lock()
					dirs[st] = dir
					mu.Unlock()
					return st
				},
			})
		})
	}
}

// closedDB creates the store in dir when there is none, closes it, and returns its database,
// open on a connection of its own, closed when the test ends.
func closedDB(t testing.TB, dir string) *sql.DB {
	t.Helper()
	st, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", dsn(filepath.Join(dir, DBFile), roleWriter))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// setGenerationBits creates a store in dir whose generations hold 2^bits events.
func setGenerationBits(t testing.TB, dir string, bits uint) {
	t.Helper()
	db := closedDB(t, dir)
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM events`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("generation size of a store with %d events (%v)", n, err)
	}
	if _, err := db.Exec(`UPDATE settings SET value = ? WHERE name = 'generation_bits'`, bits); err != nil {
		t.Fatal(err)
	}
	db.Close()
}

// setTailRows sets the tail_rows setting of the store in dir (creating it): a move pass starts
// whenever the tail holds n events (tail.go).
func setTailRows(t testing.TB, dir string, n int) {
	t.Helper()
	db := closedDB(t, dir)
	if _, err := db.Exec(`UPDATE settings SET value = ? WHERE name = 'tail_rows'`, n); err != nil {
		t.Fatal(err)
	}
	db.Close()
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
