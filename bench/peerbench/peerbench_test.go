package peerbench

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/benchkit"
	"github.com/sessiond/sessiond/session"

	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/store/sqlite"
)

// TestWorkloadsInProcess runs every workload, tiny, against sessiond on SQLite served from
// this process: the workloads, their checks and sessiond's HTTP adapter work end to end.
// (The benchmark runs the real binary in its own process, where the server's CPU and writes
// can be measured; that is too slow to build here.)
func TestWorkloadsInProcess(t *testing.T) {
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(session.New(st, session.Options{}), server.Options{})
	ts := httptest.NewServer(srv)
	sys := NewSessiondClient("sessiond-sqlite", ts.URL, nil, nil)
	t.Cleanup(func() {
		sys.Close()
		srv.Close()
		ts.Close()
		st.Close()
	})
	// In this process there is no server process to measure: W1 reports its rate alone.
	want := map[string][]string{
		"W1":        {"W1 events/s"},
		"W1 uuidv7": {"W1 uuidv7 events/s"},
		"W2":        {"W2 events/s", "W2 ack p99 ms"},
		"W3":        {"W3 duplicates/s"},
		"W4":        {"W4 ack→delivery p99 ms", "W4 send→delivery p99 ms"},
		"W5":        {"W5 events/s", "W5 whole read events/s"},
	}
	var tab Table
	runTiny(t, sys, func(name string, ms []Metric) {
		var got []string
		for _, m := range ms {
			got = append(got, m.Row)
			if m.Value < 0 || (strings.HasSuffix(m.Row, "/s") && m.Value == 0) {
				t.Errorf("%s: %s = %v", name, m.Row, m.Value)
			}
		}
		if strings.Join(got, ",") != strings.Join(want[name], ",") {
			t.Errorf("%s measured %q, want %q", name, got, want[name])
		}
		tab.Add(sys.Name(), ms)
	})
	var out bytes.Buffer
	tab.Print(&out)
	if !strings.Contains(out.String(), "| W5 events/s | higher | ") {
		t.Errorf("the table has no W5 row:\n%s", out.String())
	}
}

// runTiny runs every workload against sys at sizes that take about a second, in the peer
// benchmark's order (W1 with random and with time-ordered ids, W2, W3 on W2's events, W4, W5),
// and hands each one's figures to got, by name ("W1", "W1 uuidv7", "W2", …). A workload's
// error fails the test, and so does a W2 that sent other than one event per writer or a read
// past the end of W5's session that does not fail.
func runTiny(t *testing.T, sys *Sessiond, got func(name string, ms []Metric)) {
	t.Helper()
	sys.page = 500 // W5 reads three pages
	ctx := context.Background()
	sz := Sizes{W1Batches: 8, W2Events: 64, W4Events: 5, W4Rate: 200, W4Subscribers: 4, W5Events: 1200, Settle: 50 * time.Millisecond}
	ok := func(name string, ms []Metric, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got(name, ms)
	}
	ms, err := W1(ctx, sys, benchkit.RandomIDs, sz)
	ok("W1", ms, err)
	ms, err = W1(ctx, sys, benchkit.TimeOrderedIDs, sz)
	ok("W1 uuidv7", ms, err)
	ms, sent, err := W2(ctx, sys, benchkit.RandomIDs, sz)
	ok("W2", ms, err)
	if len(sent) != 64 || len(sent[0]) != 1 {
		t.Fatalf("W2 sent %d × %d events, want 64 × 1", len(sent), len(sent[0]))
	}
	ms, err = W3(ctx, sys, sent)
	ok("W3", ms, err)
	ms, err = W4(ctx, sys, benchkit.RandomIDs, sz)
	ok("W4", ms, err)
	sid, err := LoadW5(ctx, sys, sz)
	if err != nil {
		t.Fatal(err)
	}
	ms, err = W5(ctx, sys, sid, sz)
	ok("W5", ms, err)
	if _, err := sys.Read(ctx, sid, sz.W5Events+1); err == nil {
		t.Error("reading more events than the session has did not fail")
	}
	if _, err := sys.ReadWhole(ctx, sid, sz.W5Events+1); err == nil {
		t.Error("a whole read of fewer events than wanted did not fail")
	}
}

func TestTablePrint(t *testing.T) {
	var tab Table
	tab.Add("redis", []Metric{{"W1 events/s", 80000}, {"W2 ack p99 ms", 8}})
	tab.Add("sessiond-sqlite", []Metric{{"W1 events/s", 20000}, {"W2 ack p99 ms", 20}, {"syncs per ack (1 writer)", 1}})
	tab.Add("sessiond-sqlite", []Metric{{"W1 events/s", 40000}, {"W2 ack p99 ms", 4}})
	tab.Add("sessiond-sqlite", []Metric{{"W1 events/s", 30000}})
	tab.Add("pg-table", []Metric{{"W1 events/s", 1234.5}, {"extra row", 0.5}})
	var out bytes.Buffer
	tab.Print(&out)
	want := `| workload | better | sessiond-sqlite | redis | pg-table | sqlite ÷ redis | sqlite ÷ pg-table |
|---|---|---:|---:|---:|---:|---:|
| W1 events/s | higher | 30,000 | 80,000 | 1,235 | 0.38× | 24.30× |
| W2 ack p99 ms | lower | 12.0 | 8.00 | — | 1.50× | — |
| syncs per ack (1 writer) | ≥ 1 | 1.00 | — | — | — | — |
| extra row | lower | — | — | 0.50 | — | — |

Each cell is the median of up to 3 runs.
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
	if !(&Table{}).Empty() || tab.Empty() {
		t.Error("Empty is wrong")
	}
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{0: "0.00", 1.234: "1.23", 12.34: "12.3", 999.94: "999.9", 1000: "1,000", 1234567.8: "1,234,568", -4321: "-4,321"} {
		if got := formatValue(v); got != want {
			t.Errorf("formatValue(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestCountSyncs(t *testing.T) {
	n, err := countSyncs("testdata/strace-c.txt")
	if err != nil || n != 403 {
		t.Errorf("countSyncs = %d, %v; want 403 (202 fdatasync + 201 fsync)", n, err)
	}
	if _, err := countSyncs("testdata/missing"); err == nil {
		t.Error("countSyncs of a missing file did not fail")
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if got := percentile(ds, 0.99); got != 99*time.Millisecond {
		t.Errorf("p99 of 1..100 ms = %v", got)
	}
	if got := percentile(nil, 0.99); got != 0 {
		t.Errorf("p99 of nothing = %v", got)
	}
	if got := median([]float64{3, 1, 2, 10}); got != 2.5 {
		t.Errorf("median = %v", got)
	}
}

func TestSizes(t *testing.T) {
	t.Setenv("PEERBENCH_SCALE", "0.01")
	sz, err := SizesFromEnv()
	if err != nil || sz.W1Batches != 8 || sz.W2Events != 64 || sz.W5Events != 1000 || sz.W4Subscribers != 200 {
		t.Errorf("PEERBENCH_SCALE=0.01: %+v, %v", sz, err)
	}
	for _, bad := range []string{"0", "-1", "x", "1000"} {
		t.Setenv("PEERBENCH_SCALE", bad)
		if _, err := SizesFromEnv(); err == nil {
			t.Errorf("PEERBENCH_SCALE=%s accepted", bad)
		}
	}
	if unit("W1 uuidv7 bytes written/event") != "uuidv7-bytes-written/event" {
		t.Errorf("unit: %q", unit("W1 uuidv7 bytes written/event"))
	}
}
