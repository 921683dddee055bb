package postgres

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/sqlite"
	"github.com/sessiond/sessiond/store/storetest"
)

// BenchmarkUsageMonth times GET /v1/usage's store queries over a month on a store of
// 1,000,000 events in 10,000 sessions (storetest.FillUsage: 100 events a session, 10 projects,
// 20 agents, 4 models, every session in November 2026), on SQLite and on PostgreSQL in the
// same run: the whole month, by project, by model and day, one project by agent, by session
// (the first 1,000 groups) and one session by day. Each op is one query; it reports the
// median and the 99th percentile (p50-ms, p99-ms). The store is made once per driver before the
// queries (about a minute each): run it with -count 1 and a fixed -benchtime, e.g.
//
//	go test ./store/postgres -run '^$' -bench UsageMonth -benchtime 200x -count 1
//
// SESSIOND_USAGE_BENCH_SESSIONS sets another number of sessions (of 100 events) for a quick try.
func BenchmarkUsageMonth(b *testing.B) {
	spec := storetest.UsageStoreSpec{Sessions: 10000, EventsPerSession: 100, Month: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), Projects: 10, Agents: 20, Models: 4}
	if v := os.Getenv("SESSIOND_USAGE_BENCH_SESSIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("SESSIOND_USAGE_BENCH_SESSIONS=%q: want a positive number", v)
		}
		spec.Sessions = n
	}
	queries := storetest.UsageBenchQueries(spec.Month)
	names := make([]string, 0, len(queries))
	for name := range queries {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, driver := range []string{"sqlite", "postgres"} {
		b.Run(driver, func(b *testing.B) {
			var st store.Store
			if driver == "sqlite" {
				s, err := sqlite.Open(context.Background(), b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				st = s
			} else {
				st = openBenchPG(b)
			}
			start := time.Now()
			storetest.FillUsage(b, st, spec, nil)
			b.Logf("%s: filled %d sessions of %d events in %s", driver, spec.Sessions, spec.EventsPerSession, time.Since(start).Round(time.Second))
			if driver == "postgres" {
				if _, err := st.(*Store).pool.Exec(context.Background(), `ANALYZE`); err != nil {
					b.Fatal(err)
				}
			}
			for _, name := range names {
				b.Run(name, func(b *testing.B) { storetest.BenchUsage(b, st, queries[name]) })
			}
		})
	}
}
