package sqlite

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/sessiond/sessiond/search"
	"github.com/sessiond/sessiond/search/searchtest"
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
	st, err := Open(ctx, b.TempDir())
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

// BenchmarkSearchIndex measures how fast the indexer indexes the corpus (search.events events,
// already written): index-events/s.
func BenchmarkSearchIndex(b *testing.B) {
	ctx := context.Background()
	st, err := Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	c := searchtest.Corpus{Sessions: *searchSessions, Events: *searchEvents}
	c.Write(ctx, b, st, nil)
	ix, err := st.Search(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var n int64
	for range b.N {
		if err := ix.Reset(ctx); err != nil {
			b.Fatal(err)
		}
		k, err := search.NewIndexer(st, ix, search.IndexerOptions{}).CatchUp(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		n += k
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "index-events/s")
}
