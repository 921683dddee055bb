package sqlite

import (
	"context"
	"testing"

	"github.com/sessiond/sessiond/search"
	"github.com/sessiond/sessiond/search/searchtest"
	"github.com/sessiond/sessiond/store"
)

// TestSearch runs the search backend's conformance suite on SQLite (FTS5).
func TestSearch(t *testing.T) {
	searchtest.Exercise(t, func(t *testing.T) (store.Store, search.Backend) {
		st := openAt(t, t.TempDir())
		ix, err := st.Search(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return st, ix
	})
}
