package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/search"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres"
	"github.com/sessiond/sessiond/store/sqlite"
	"github.com/sessiond/sessiond/wire"
)

func init() {
	commands["search"] = command{summary: "search the events of every session (full text, with filters)", args: "[query...]",
		about: `The query's words must all match, in any field of the event: message text, reasoning, plan,
task and approval titles, tool names, inputs and outputs, file paths, terminal output, test
names and output, error codes and messages. "A phrase" matches its words in a row; word*
matches a prefix; a word with punctuation (billing/invoice.go, TOOL_TIMEOUT) is the phrase
of its words. --contains matches a substring of a path or a tool input (a command). Results
are newest first (--order relevance: best first among the newest 1,000 matches); the
marked words of each snippet are shown between [ and ]. docs/search.md has the details.`,
		run: runSearch}
	commands["search-index"] = command{summary: "rebuild or check the search index of a store (offline, like fsck)", args: "<rebuild|check>",
		about: `rebuild empties the search index of the store in --data (SQLite; stop sessiond serve first)
or --store (PostgreSQL) and indexes every session's log again, showing its progress.
check compares the index with a rebuild from the logs, document by document (each event's
sequence, kind, run, tool, error code and a hash of its text), without writing: exit 0 when
they agree, 1 when they differ, 2 when it could not check. A running server keeps the index
itself; it also rebuilds a missing one (delete search.db) when it starts.`,
		run: runSearchIndex}
}

func runSearch(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("search", stdout, stderr)
	fl := map[string]*string{}
	for _, p := range []struct{ name, param, usage string }{
		{"contains", "contains", "a substring of a path or tool input (a command), 3 characters or more"},
		{"project", "project", "only sessions of this project"},
		{"agent", "agent", "only sessions of this agent"},
		{"role", "role", "only sessions with this role"},
		{"status", "status", "only sessions with this status now (running, paused, closed, stale, archived)"},
		{"kind", "kind", "only events of this eventType (message, tool, terminal, error, ...)"},
		{"run-status", "runStatus", "only events of runs with this status now (queued, running, stopping, stopped, completed, failed)"},
		{"tool", "tool", "only tool events of this tool name"},
		{"code", "code", "only error events (and steering errors) with this error code"},
		{"from", "from", "only events that occurred at or after this RFC 3339 time"},
		{"to", "to", "only events that occurred before this RFC 3339 time"},
		{"order", "order", "recent (default: newest first) or relevance (best first among the newest 1,000 matches)"},
	} {
		fl[p.param] = f.fs.String(p.name, "", p.usage)
	}
	limit := f.fs.Int("limit", search.DefaultLimit, "how many results to print (pages of at most 100 are fetched until there are this many)")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if *limit < 1 {
		return f.usageError(fmt.Sprintf("--limit %d: give 1 or more", *limit))
	}
	q := url.Values{}
	if text := strings.Join(pos, " "); text != "" {
		q.Set("q", text)
	}
	for k, v := range fl {
		if *v != "" {
			q.Set(k, *v)
		}
	}
	c := f.client()
	printed := 0
	for printed < *limit {
		q.Set("limit", fmt.Sprint(min(*limit-printed, search.MaxLimit)))
		page, err := c.Search(context.Background(), q)
		if err != nil {
			return fail(stderr, "search", err)
		}
		for i := range page.Results {
			if *f.json {
				printJSON(stdout, &page.Results[i])
			} else {
				printHit(stdout, &page.Results[i])
			}
		}
		printed += len(page.Results)
		if page.Next == "" {
			break
		}
		q.Set("cursor", page.Next)
	}
	if printed == 0 && !*f.json {
		fmt.Fprintln(stdout, "no matching event")
	}
	return 0
}

// printHit prints one result for people: where, then the snippet with its marks in [ ].
func printHit(w io.Writer, h *wire.SearchHit) {
	var b strings.Builder
	for _, s := range h.Snippet {
		if s.Mark {
			b.WriteString("[" + s.Text + "]")
		} else {
			b.WriteString(s.Text)
		}
	}
	run := ""
	if h.RunID != "" {
		run = "  run " + h.RunID
	}
	fmt.Fprintf(w, "%s@%d  %s  %s%s\n", h.SessionID, h.Sequence, h.Kind, h.OccurredAt, run)
	if h.Field != "" {
		fmt.Fprintf(w, "  %s: %s\n", h.Field, b.String())
	}
}

// openSearch returns the search index of the store's driver.
func openSearch(ctx context.Context, st store.Store) (search.Backend, error) {
	switch s := st.(type) {
	case *sqlite.Store:
		return s.Search(ctx)
	case *postgres.Store:
		return s.Search(ctx)
	}
	return nil, fmt.Errorf("the %s store has no search index", st.Capabilities().Driver)
}

// searchIndexReport is the --json answer of search-index.
type searchIndexReport struct {
	Action    string   `json:"action"`
	Store     string   `json:"store"`
	Driver    string   `json:"driver"`
	Indexed   int64    `json:"indexed,omitempty"`
	Sessions  int64    `json:"sessions"`
	Documents int64    `json:"documents"`
	Behind    int64    `json:"behind"`
	Problems  []string `json:"problems"`
	Clean     bool     `json:"clean"`
}

func runSearchIndex(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	cl := newCommandLine("search-index", stdout, stderr)
	data := cl.fs.String("data", "./sessiond-data", "data directory of the SQLite store")
	storeURL := cl.fs.String("store", "", "a PostgreSQL URL (postgres://user@host:5432/db?search_path=sessiond) instead of --data")
	jsonOut := cl.fs.Bool("json", false, "print the report as JSON")
	pos, code, ok := cl.parse(args)
	if !ok {
		return code
	}
	action := pos[0]
	if action != "rebuild" && action != "check" {
		return cl.usageError(fmt.Sprintf("%q: give rebuild or check", action))
	}
	pg := isPostgresURL(*storeURL)
	if *storeURL != "" && !pg {
		return cl.usageError(fmt.Sprintf("--store %q is not a PostgreSQL URL", *storeURL))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	failed := func(err error, hint string) int {
		fmt.Fprintf(stderr, "sessiond search-index %s: %v\n", action, err)
		if hint != "" {
			fmt.Fprintf(stderr, "hint: %s\n", hint)
		}
		return 2
	}
	rep := searchIndexReport{Action: action, Store: *data, Driver: "sqlite", Problems: []string{}}
	var st store.Store
	var err error
	if pg {
		rep.Store, rep.Driver = redactURL(*storeURL), "postgres"
		if st, err = postgres.Open(ctx, *storeURL); err != nil {
			return failed(err, "check that PostgreSQL is reachable and that search_path names the schema sessiond serve uses")
		}
	} else if st, err = sqlite.Open(ctx, *data); err != nil {
		return failed(err, dataDirHint(*data)+" (stop sessiond serve first: the index is rebuilt with the store opened by this command alone)")
	}
	defer st.Close()
	b, err := openSearch(ctx, st)
	if err != nil {
		return failed(err, "")
	}
	if action == "rebuild" {
		if err := b.Reset(ctx); err != nil {
			return failed(err, "")
		}
		d := progressFor(stderr, *jsonOut, "rebuilding the search index")
		ix := search.NewIndexer(st, b, search.IndexerOptions{})
		n, err := ix.CatchUp(ctx, func(done, total int64) {
			if d != nil {
				d.drawLine(fmt.Sprintf("rebuilding the search index: %d/%d events", done, total))
			}
		})
		d.clear()
		if err != nil {
			return failed(err, "run it again: it resumes where it stopped")
		}
		rep.Indexed = n
	}
	res, err := search.Check(ctx, st, b)
	if err != nil {
		return failed(err, "")
	}
	rep.Sessions, rep.Documents, rep.Behind = res.Sessions, res.Documents, res.Behind
	rep.Problems = append(rep.Problems, res.Problems...)
	rep.Clean = len(rep.Problems) == 0
	if *jsonOut {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		if action == "rebuild" {
			fmt.Fprintf(stdout, "indexed %d events\n", rep.Indexed)
		}
		fmt.Fprintf(stdout, "checked %d sessions, %d documents: ", rep.Sessions, rep.Documents)
		if rep.Clean {
			fmt.Fprintf(stdout, "the index equals a rebuild from the logs (%d events not indexed yet)\n", rep.Behind)
		} else {
			fmt.Fprintf(stdout, "%d differences\n", len(rep.Problems))
			for _, p := range rep.Problems {
				fmt.Fprintf(stdout, "  %s\n", p)
			}
		}
	}
	if !rep.Clean {
		return 1
	}
	return 0
}

var _ = api.SearchResponse{}
