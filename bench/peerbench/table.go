package peerbench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Systems are the table's columns, in order: sessiond's two drivers, the optional baseline
// (BaselineEnv; a peer in the ratios, so that sessiond-postgres ÷ baseline-postgres is after ÷
// before), the peers, then the floor (StartHTTPFloor; in the ratios too: the share of HTTP's
// ceiling sessiond reaches).
var Systems = []string{"sessiond-sqlite", "sessiond-postgres", "baseline-postgres", "redis", "pg-table", "nats", FloorName}

// Rows are the table's rows, in order (a row nothing was measured for is left out).
var Rows = []string{
	"W1 events/s", "W1 bytes written/event", "W1 server CPU µs/event",
	"W1 uuidv7 events/s", "W1 uuidv7 bytes written/event", "W1 uuidv7 server CPU µs/event",
	"W2 events/s", "W2 ack p99 ms", "W2 server CPU µs/event",
	"W3 duplicates/s", "W3 server CPU µs/duplicate",
	"W4 ack→delivery p99 ms", "W4 send→delivery p99 ms",
	"W5 events/s", "W5 server CPU µs/event", "W5 whole read events/s", "W5 whole read server CPU µs/event",
	"syncs per ack (1 writer)",
}

// Table collects the figures of several runs: each cell shows the median of its runs.
type Table struct {
	mu    sync.Mutex
	cells map[string]map[string][]float64 // row → system → values
}

// Add records the metrics system measured in one run.
func (t *Table) Add(system string, ms []Metric) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cells == nil {
		t.cells = map[string]map[string][]float64{}
	}
	for _, m := range ms {
		if t.cells[m.Row] == nil {
			t.cells[m.Row] = map[string][]float64{}
		}
		t.cells[m.Row][system] = append(t.cells[m.Row][system], m.Value)
	}
}

// Empty says nothing was recorded.
func (t *Table) Empty() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.cells) == 0
}

// median returns the median of vs (the mean of the middle two for an even count).
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// better says which way a row improves: "higher", "lower" or "≥ 1".
func better(row string) string {
	switch {
	case strings.HasPrefix(row, "syncs"):
		return "≥ 1"
	case strings.HasSuffix(row, "/s"):
		return "higher"
	default:
		return "lower"
	}
}

// Print writes the table as Markdown: a row per figure, a column per system that has one,
// and the ratio of each sessiond column to each peer's (sessiond ÷ peer: above 1 is ahead
// for a "higher" row, behind for a "lower" one). Each cell is the median of its runs; runs
// says how many there were when they differ from one.
func (t *Table) Print(w io.Writer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rows := slices.Clone(Rows)
	for r := range t.cells {
		if !slices.Contains(rows, r) {
			rows = append(rows, r)
		}
	}
	slices.SortStableFunc(rows[len(Rows):], strings.Compare)
	var systems []string
	for _, s := range Systems {
		for _, r := range rows {
			if len(t.cells[r][s]) > 0 {
				systems = append(systems, s)
				break
			}
		}
	}
	type ratio struct{ num, den string }
	var ratios []ratio
	for _, s := range systems {
		if !strings.HasPrefix(s, "sessiond-") {
			continue
		}
		for _, p := range systems {
			if !strings.HasPrefix(p, "sessiond-") {
				ratios = append(ratios, ratio{s, p})
			}
		}
	}
	head := []string{"workload", "better"}
	head = append(head, systems...)
	for _, r := range ratios {
		head = append(head, strings.TrimPrefix(r.num, "sessiond-")+" ÷ "+r.den)
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(head, " | "))
	sep := []string{"---", "---"}
	for range len(head) - 2 {
		sep = append(sep, "---:")
	}
	fmt.Fprintf(w, "|%s|\n", strings.Join(sep, "|"))
	runs := 0
	for _, r := range rows {
		byS := t.cells[r]
		if len(byS) == 0 {
			continue
		}
		line := []string{r, better(r)}
		for _, s := range systems {
			if len(byS[s]) == 0 {
				line = append(line, "—")
				continue
			}
			runs = max(runs, len(byS[s]))
			line = append(line, formatValue(median(byS[s])))
		}
		for _, ra := range ratios {
			a, b := byS[ra.num], byS[ra.den]
			if len(a) == 0 || len(b) == 0 || median(b) == 0 || strings.HasPrefix(r, "syncs") {
				line = append(line, "—")
				continue
			}
			line = append(line, strconv.FormatFloat(median(a)/median(b), 'f', 2, 64)+"×")
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(line, " | "))
	}
	if runs > 1 {
		fmt.Fprintf(w, "\nEach cell is the median of up to %d runs.\n", runs)
	}
}

// formatValue prints a figure with the precision it deserves: thousands grouped above 1,000,
// one decimal above 10, two below.
func formatValue(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1000:
		s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
		var b strings.Builder
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		if neg {
			b.WriteByte('-')
		}
		for i, c := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(c)
		}
		return b.String()
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}
