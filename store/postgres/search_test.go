package postgres

import (
	"context"
	"testing"

	"github.com/sessiond/sessiond/search"
	"github.com/sessiond/sessiond/search/searchtest"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
)

// TestSearch runs the search backend's conformance suite on PostgreSQL (tsvector and pg_trgm).
func TestSearch(t *testing.T) {
	pgtest.BaseURL(t)
	searchtest.Exercise(t, func(t *testing.T) (store.Store, search.Backend) {
		st := openURL(t, pgtest.Schema(t))
		ix, err := st.Search(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !ix.Trigram() {
			t.Error("the pg_trgm extension could not be created: substring searches have no index")
		}
		return st, ix
	})
}
