package peerbench

// The peer benchmark (issue 20): every workload against every system, one system at a time.
//
//	go test ./internal/peerbench/ -run '^$' -bench Peers -benchtime 1x -count 3 -timeout 3h
//
// prints, after the benchmarks' own lines, one table of medians with the ratios of sessiond to
// each peer. -bench 'Peers/redis' (or sessiond-sqlite, sessiond-postgres, pg-table, nats,
// http-floor) runs one system; -bench 'Peers/.*/W1' one workload. PEERBENCH_SCALE=0.05 makes
// every workload small for a smoke run. PEERBENCH_BASELINE_SESSIOND=<a sessiond binary> adds the
// system baseline-postgres: that binary on PostgreSQL, for a before/after comparison in one run.
// PEERBENCH_SESSIOND_ARGS='--admin-addr 127.0.0.1:7472' (ArgsEnv) adds arguments to every
// sessiond the benchmark starts, to profile it while a workload runs.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/benchkit"
)

// results collects every run's figures for the table TestMain prints.
var results Table

func TestMain(m *testing.M) {
	code := m.Run()
	if !results.Empty() {
		fmt.Println("\nsessiond against the peers (medians; sessiond ÷ peer ratios):")
		fmt.Println()
		results.Print(os.Stdout)
	}
	benchkit.Cleanup()
	os.Exit(code)
}

// starters start each system, in the table's order.
var starters = []struct {
	name  string
	start func() (System, error)
}{
	{"sessiond-sqlite", func() (System, error) { return StartSessiond("sessiond-sqlite", "") }},
	{"sessiond-postgres", func() (System, error) { return StartSessiondPostgres("sessiond-postgres") }},
	{"baseline-postgres", func() (System, error) { return StartBaselinePostgres("baseline-postgres") }},
	{"redis", func() (System, error) { return StartRedis() }},
	{"pg-table", func() (System, error) { return StartPGTable() }},
	{"nats", func() (System, error) { return StartNATS() }},
	{FloorName, func() (System, error) { return StartHTTPFloor() }},
}

// BenchmarkPeers runs, for each system in turn (started here on free loopback ports and
// stopped after its workloads), W1 with random and with time-ordered ids, W2, W3 (W2's
// events resent), W4, W5 and the sync count (when strace is installed). One op of each is
// one run of the workload; use -benchtime 1x.
func BenchmarkPeers(b *testing.B) {
	sz, err := SizesFromEnv()
	if err != nil {
		b.Fatal(err)
	}
	for _, st := range starters {
		b.Run(st.name, func(b *testing.B) {
			sys, err := st.start()
			if errors.Is(err, benchkit.ErrMissing) {
				b.Skipf("%s: skipped: %v", st.name, err)
			}
			if err != nil {
				b.Fatalf("start %s: %v", st.name, err)
			}
			defer sys.Close()
			ctx := context.Background()
			run := func(name string, f func() ([]Metric, error)) {
				b.Run(name, func(b *testing.B) {
					for range b.N {
						// Write back what the systems before left dirty in the page cache
						// (sessiond-sqlite's W5 log, say), outside the workload's timing:
						// otherwise the kernel flushes it during the next system's syncs.
						b.StopTimer()
						syscall.Sync()
						b.StartTimer()
						ms, err := f()
						if errors.Is(err, benchkit.ErrMissing) {
							b.Skipf("%s %s: skipped: %v", st.name, name, err)
						}
						if err != nil {
							b.Fatalf("%s %s: %v", st.name, name, err)
						}
						results.Add(st.name, ms)
						for _, m := range ms {
							b.ReportMetric(m.Value, unit(m.Row))
						}
					}
				})
			}
			run("W1-uuidv4", func() ([]Metric, error) { return W1(ctx, sys, benchkit.RandomIDs, sz) })
			run("W1-uuidv7", func() ([]Metric, error) { return W1(ctx, sys, benchkit.TimeOrderedIDs, sz) })
			var sent [][]benchkit.Event
			run("W2", func() ([]Metric, error) {
				ms, evs, err := W2(ctx, sys, benchkit.RandomIDs, sz)
				sent = evs
				return ms, err
			})
			run("W3", func() ([]Metric, error) {
				if sent == nil {
					return nil, fmt.Errorf("%w: W3 resends W2's events; select W2 too", benchkit.ErrMissing)
				}
				return W3(ctx, sys, sent)
			})
			run("W4", func() ([]Metric, error) { return W4(ctx, sys, benchkit.RandomIDs, sz) })
			var w5 string
			run("W5", func() ([]Metric, error) {
				if w5 == "" {
					sid, err := LoadW5(ctx, sys, sz)
					if err != nil {
						return nil, err
					}
					w5 = sid
				}
				return W5(ctx, sys, w5, sz)
			})
			run("Syncs", func() ([]Metric, error) { return Syncs(ctx, sys, sz) })
		})
	}
}

// unit turns a row's name into a benchmark unit: its words after the workload, joined by '-'.
func unit(row string) string {
	f := strings.Fields(row)
	if len(f) > 1 && strings.HasPrefix(f[0], "W") {
		f = f[1:]
	}
	return strings.Join(f, "-")
}
