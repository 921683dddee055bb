package postgres

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/sessiond/sessiond/search"
	"github.com/sessiond/sessiond/search/searchtest"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
)

var (
	searchEvents   = flag.Int("search.events", 1_000_000, "events of BenchmarkSearch's corpus")
	searchSessions = flag.Int("search.sessions", 10_000, "sessions of BenchmarkSearch's corpus")
)

// BenchmarkSearch writes the search corpus (searchtest.Corpus: 1,000,000 events in 10,000
// sessions by default), indexes it, and measures the first page of each kind of query
// (p50-ms, p99-ms). The corpus and its index are made once, before the sub-benchmarks; the
// parent reports how fast the index was built (index-events/s).
func BenchmarkSearch(b *testing.B) {
	ctx := context.Background()
	pgtest.BaseURL(b)
	st, err := Open(ctx, pgtest.Schema(b))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	c := searchtest.Corpus{Sessions: *searchSessions, Events: *searchEvents}
	start := time.Now()
	c.Write(ctx, b, st, nil)
	wrote := time.Since(start)
	ix, err := st.Search(ctx)
	if err != nil {
		b.Fatal(err)
	}
	start = time.Now()
	n, err := search.NewIndexer(st, ix, search.IndexerOptions{}).CatchUp(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("corpus: %d events written in %v, indexed in %v (%.0f events/s)", n, wrote.Round(time.Second), time.Since(start).Round(time.Second), float64(n)/time.Since(start).Seconds())
	searchtest.BenchSearch(b, c, st, ix)
}
