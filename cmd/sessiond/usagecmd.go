package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres"
	"github.com/sessiond/sessiond/store/sqlite"
)

func init() {
	commands["usage"] = command{
		summary: "show usage: tokens, runs and tool calls, per project, agent, model, session or day",
		about: `Asks the server's GET /v1/usage: the usage events' tokens (input, output, total, as the
events carry them), the runs that ended (completed, failed, stopped; failure rate, mean
duration) and the tool calls that ended (failures, denials), of the UTC days from --from to
--to (inclusive; default the 30 days ending today), grouped by the dimensions of --by, and
the tools called. A key of one project counts its own project only.`,
		run: runUsage,
	}
	commands["usage-rebuild"] = command{
		summary: "rebuild the usage rollup of a store from its logs (the server must be stopped for SQLite)",
		about: `Recomputes the usage rollup (GET /v1/usage's data) of every session whose log is whole
from the log, in --data (SQLite) or --store (PostgreSQL); a compacted session keeps its rows
(its events are gone, what they counted is not). fsck reports a rollup that differs from its
log; this repairs it. An append waits for the session being rebuilt, never loses a count.`,
		run: runUsageRebuild,
	}
}

func runUsage(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("usage", stdout, stderr)
	from := f.fs.String("from", "", "the first UTC day, YYYY-MM-DD (default: 29 days before --to)")
	to := f.fs.String("to", "", "the last UTC day, YYYY-MM-DD, inclusive (default: today)")
	by := f.fs.String("by", "", "group by these dimensions, comma-separated: project, agent, model, session, day")
	project := f.fs.String("project", "", "only sessions of this project")
	agent := f.fs.String("agent", "", "only sessions of this agent")
	model := f.fs.String("model", "", "only sessions of this model")
	sess := f.fs.String("session", "", "only this session")
	limit := f.fs.Int("limit", 0, "at most this many groups (default 1000)")
	if _, code, ok := f.parse(args); !ok {
		return code
	}
	q := url.Values{}
	for k, v := range map[string]string{"from": *from, "to": *to, "by": *by, "project": *project, "agent": *agent, "model": *model, "sessionId": *sess} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if *limit != 0 {
		q.Set("limit", strconv.Itoa(*limit))
	}
	rep, err := f.client().Usage(context.Background(), q)
	if err != nil {
		return fail(stderr, "usage", err)
	}
	if *f.json {
		printJSON(stdout, rep)
		return 0
	}
	printUsage(stdout, rep)
	return 0
}

// printUsage prints a usage answer as tables for people: the groups (one line each, then the
// total), then the tools.
func printUsage(w io.Writer, rep *api.UsageResponse) {
	fmt.Fprintf(w, "usage from %s to %s (UTC)\n\n", rep.From, rep.To)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := make([]string, 0, len(rep.By)+8)
	for _, d := range rep.By {
		head = append(head, strings.ToUpper(d))
	}
	head = append(head, "INPUT", "OUTPUT", "TOTAL", "RUNS", "FAILED", "FAIL%", "MEAN RUN", "TOOL CALLS", "TOOL FAILS")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	row := func(dims []string, c api.UsageCounts) {
		cells := append(dims, thousands(c.InputTokens), thousands(c.OutputTokens), thousands(c.TotalTokens), thousands(c.Runs), thousands(c.RunsFailed),
			fmt.Sprintf("%.1f%%", 100*c.RunFailureRate), seconds(c.MeanRunDurationMs), thousands(c.ToolCalls), thousands(c.ToolFailures))
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	for _, g := range rep.Groups {
		var dims []string
		for _, d := range rep.By {
			var v *string
			switch d {
			case store.UsageByProject:
				v = g.Project
			case store.UsageByAgent:
				v = g.Agent
			case store.UsageByModel:
				v = g.Model
			case store.UsageBySession:
				v = g.SessionID
			case store.UsageByDay:
				v = g.Day
			}
			s := "-"
			if v != nil && *v != "" {
				s = *v
			}
			dims = append(dims, s)
		}
		row(dims, g.UsageCounts)
	}
	if len(rep.By) > 0 {
		dims := make([]string, len(rep.By))
		dims[0] = "total"
		for i := 1; i < len(dims); i++ {
			dims[i] = ""
		}
		row(dims, rep.Total)
	} else if len(rep.Groups) == 0 {
		row(nil, rep.Total)
	}
	tw.Flush()
	if rep.Truncated {
		fmt.Fprintf(w, "(more groups than shown: narrow the query or raise --limit)\n")
	}
	if len(rep.Tools) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "TOOL\tCALLS\tFAILED\tDENIED\tFAIL%\t")
		for _, t := range rep.Tools {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f%%\t\n", t.Tool, thousands(t.Calls), thousands(t.Failures), thousands(t.Denied), 100*t.FailureRate)
		}
		tw.Flush()
	}
}

// thousands writes n with commas between thousands: 1,234,567.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// seconds writes a duration in milliseconds as seconds with one decimal: "12.5s"; "-" for 0.
func seconds(ms float64) string {
	if ms == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fs", ms/1000)
}

func runUsageRebuild(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	cl := newCommandLine("usage-rebuild", stdout, stderr)
	data := cl.fs.String("data", "./sessiond-data", "data directory of the SQLite store")
	storeURL := cl.fs.String("store", "", "a PostgreSQL URL to rebuild instead of --data")
	jsonOut := cl.fs.Bool("json", false, "print the result as JSON")
	if _, code, ok := cl.parse(args); !ok {
		return code
	}
	if *storeURL != "" && !isPostgresURL(*storeURL) {
		return cl.usageError(fmt.Sprintf("--store %q is not a PostgreSQL URL", *storeURL))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var st store.Store
	var err error
	if *storeURL != "" {
		st, err = postgres.Open(ctx, *storeURL, postgres.Options{})
		if err != nil {
			fmt.Fprintf(stderr, "sessiond usage-rebuild: open store: %v\nhint: check that PostgreSQL at %s is reachable\n", err, redactURL(*storeURL))
			return 1
		}
	} else if st, err = sqlite.Open(ctx, *data, sqlite.Options{}); err != nil {
		fmt.Fprintf(stderr, "sessiond usage-rebuild: %v\nhint: %s\n", err, dataDirHint(*data))
		return 1
	}
	defer st.Close()
	pd := progressFor(stderr, *jsonOut, "rebuilding the usage rollup")
	n, err := st.RebuildUsage(ctx, func(done int) {
		if pd != nil && done%100 == 0 {
			fmt.Fprintf(stderr, "\rrebuilding the usage rollup: %d sessions", done)
		}
	})
	if pd != nil {
		fmt.Fprint(stderr, "\r\033[K")
	}
	if err != nil {
		fmt.Fprintf(stderr, "sessiond usage-rebuild: %v\n", err)
		return 1
	}
	if *jsonOut {
		printJSON(stdout, map[string]int{"rebuilt": n})
		return 0
	}
	fmt.Fprintf(stdout, "rebuilt the usage rollup of %d sessions\n", n)
	return 0
}
