package sim_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/sim"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
	"github.com/sessiond/sessiond/store/sqlite"
)

var (
	seedFlag     = flag.Uint64("sim.seed", 0, "the first seed of TestSimulation (0: the fixed short set)")
	opsFlag      = flag.Int("sim.ops", 0, "ops per seed (0: the short budget)")
	durationFlag = flag.Duration("sim.duration", 0, "run seeds from -sim.seed on until this long has passed")
)

// drivers are the databases the simulation runs on: SQLite (one instance) always, PostgreSQL
// (two instances on one schema) when SESSIOND_TEST_POSTGRES names a database (and under
// CI=true, where its absence fails).
func drivers(t *testing.T) map[string]sim.Opener {
	out := map[string]sim.Opener{"sqlite": func() (*sim.Backend, error) {
		dir, err := os.MkdirTemp(t.TempDir(), "sim")
		if err != nil {
			return nil, err
		}
		return &sim.Backend{Instances: 1, HeartbeatResolution: time.Second,
			Open:  func() (store.Store, error) { return sqlite.Open(context.Background(), dir) },
			Close: func() { os.RemoveAll(dir) }}, nil
	}}
	if os.Getenv(pgtest.EnvVar) != "" || os.Getenv("CI") == "true" { // CI must have it: pgtest fails without
		out["postgres"] = func() (*sim.Backend, error) {
			url := pgtest.Schema(t)
			return &sim.Backend{Instances: 2, ClaimsSkipLocked: true,
				Open:  func() (store.Store, error) { return postgres.Open(context.Background(), url) },
				Close: func() {}}, nil // pgtest drops the schema when t ends
		}
	}
	return out
}

// TestSimulation runs seeded simulations against the model on every driver: a few short seeds
// in the ordinary test run, or, with -sim.seed, -sim.ops and -sim.duration (make sim), long
// ones. A divergence is shrunk and reported as a regression case.
func TestSimulation(t *testing.T) {
	seeds, ops := []uint64{1, 2, 3}, 300
	if testing.Short() {
		seeds, ops = seeds[:1], 150
	}
	if *seedFlag != 0 {
		seeds = []uint64{*seedFlag}
	}
	if *opsFlag > 0 {
		ops = *opsFlag
	}
	ctx := context.Background()
	for name, open := range drivers(t) {
		t.Run(name, func(t *testing.T) {
			seeds := seeds
			if name == "postgres" && *seedFlag == 0 {
				seeds = seeds[:1] // a round trip per query: one short seed keeps the run to seconds
			}
			start, total, decisions := time.Now(), 0, map[string]int{}
			for i := 0; ; i++ {
				seed := seeds[0] + uint64(i)
				if *durationFlag == 0 {
					if i >= len(seeds) {
						break
					}
					seed = seeds[i]
				} else if time.Since(start) > *durationFlag {
					break
				}
				b, err := open()
				if err != nil {
					t.Fatal(err)
				}
				ran, d, err := sim.Simulate(ctx, b, seed, ops, decisions)
				b.Close()
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				total += len(ran)
				if d != nil {
					shrunk, sd, err := sim.Shrink(ctx, open, sim.ConfigFor(seed), ran)
					if err != nil {
						t.Fatalf("seed %d: %v; shrinking: %v", seed, d, err)
					}
					t.Fatal(sim.Report(seed, shrunk, sd))
				}
			}
			t.Logf("%d ops from seed %d in %v, no divergence; decisions: %v", total, seeds[0], time.Since(start).Round(time.Millisecond), decisions)
		})
	}
}

// regression is a shrunk divergence kept in testdata: its ops, the seed it came from, the
// server's queue timeout in seconds (0: none), and, while the divergence is not fixed, why it
// is skipped.
type regression struct {
	Seed         uint64   `json:"seed"`
	Why          string   `json:"why"`
	Skip         string   `json:"skip,omitempty"`
	QueueTimeout int      `json:"queueTimeoutSeconds,omitempty"`
	Ops          []sim.Op `json:"ops"`
}

// TestRegressions replays every case in testdata on every driver: none may diverge.
func TestRegressions(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var r regression
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for name, open := range drivers(t) {
			t.Run(filepath.Base(f)+"/"+name, func(t *testing.T) {
				if r.Skip != "" {
					t.Skip(r.Skip)
				}
				b, err := open()
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				cfg := sim.Config{QueueTimeout: time.Duration(r.QueueTimeout) * time.Second}
				if d, err := sim.Run(context.Background(), b, cfg, r.Ops); err != nil || d != nil {
					t.Fatalf("%s (%s): %v %v", f, r.Why, d, err)
				}
			})
		}
	}
}
