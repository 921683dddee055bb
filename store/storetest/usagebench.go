package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/store"
)

// UsageStoreSpec shapes the store FillUsage makes.
type UsageStoreSpec struct {
	// Sessions and EventsPerSession: 10,000 × 100 for the 1,000,000-event store of the
	// usage benchmark.
	Sessions, EventsPerSession int
	// Month is the first day of the month the sessions start in (UTC); each session's runs
	// fall within 5 hours of its start (a session's working window), so most sessions touch
	// one day and some two.
	Month time.Time
	// Projects, Agents and Models are how many of each the sessions are spread over (session
	// i has project i mod Projects, and so on).
	Projects, Agents, Models int
}

// FillUsage creates spec.Sessions sessions "S-u<i>" in st and appends spec.EventsPerSession
// events to each (UsageLog, seeded by the session's number, in batches of up to 100), with 16
// writers. It reports progress every 1,000 sessions through logf when not nil.
func FillUsage(tb testing.TB, st store.Store, spec UsageStoreSpec, logf func(format string, args ...any)) {
	tb.Helper()
	ctx := context.Background()
	days := time.Date(spec.Month.Year(), spec.Month.Month()+1, 1, 0, 0, 0, 0, time.UTC).Sub(spec.Month)
	var next, done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(spec.Sessions) {
					return
				}
				id := fmt.Sprintf("S-u%06d", i)
				sess := NewSession(id, SessionSpec{Project: fmt.Sprintf("project-%d", int(i)%spec.Projects), AgentID: fmt.Sprintf("agent-%d", int(i)%spec.Agents)})
				sess.Snapshot.ModelID = fmt.Sprintf("model-%d", int(i)%spec.Models)
				if err := st.CreateSession(ctx, sess); err != nil {
					errs <- err
					return
				}
				rng := rand.New(rand.NewPCG(uint64(i), 36))
				start := spec.Month.Add(time.Duration(rng.Int64N(int64(days - 5*time.Hour))))
				evs := UsageLog(rng, id, spec.EventsPerSession, start, 4*time.Hour)
				for len(evs) > 0 {
					n := min(len(evs), 100)
					if _, err := st.Append(ctx, id, evs[:n], store.AppendOptions{}); err != nil {
						errs <- err
						return
					}
					evs = evs[n:]
				}
				if d := done.Add(1); logf != nil && d%1000 == 0 {
					logf("usage store: %d of %d sessions", d, spec.Sessions)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
}

// UsageBenchQueries are the month queries BenchUsage times, by name.
func UsageBenchQueries(month time.Time) map[string]store.UsageQuery {
	from := store.DaysFromCivil(int64(month.Year()), int64(month.Month()), 1)
	last := time.Date(month.Year(), month.Month()+1, 0, 0, 0, 0, 0, time.UTC)
	to := store.DaysFromCivil(int64(last.Year()), int64(last.Month()), int64(last.Day()))
	return map[string]store.UsageQuery{
		"total":        {From: from, To: to},
		"by-project":   {From: from, To: to, By: []string{store.UsageByProject}},
		"by-model-day": {From: from, To: to, By: []string{store.UsageByModel, store.UsageByDay}},
		"by-agent":     {From: from, To: to, By: []string{store.UsageByAgent}, Project: "project-3"},
		"by-session":   {From: from, To: to, By: []string{store.UsageBySession}, Limit: 1000},
		"one-session":  {From: from, To: to, By: []string{store.UsageByDay}, SessionID: "S-u004242"},
	}
}

// BenchUsage times one usage query per op and reports its median and 99th percentile (ms).
func BenchUsage(b *testing.B, st store.Store, q store.UsageQuery) {
	ctx := context.Background()
	if _, err := st.Usage(ctx, q); err != nil { // warm the caches once
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := st.Usage(ctx, q); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
}
