package main

import (
	"context"
	"fmt"
	"github.com/sessiond/sessiond/wire"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/session"
)

func init() {
	commands["session"] = command{summary: "session lifecycle: assess, warm, archive, restore, status, heartbeat",
		args: "<verb> [arguments]", run: runSession}
	sessionVerbs = map[string]command{
		"assess":    {summary: "estimate a task's hours and risk from history, in phases of at most 3 h", args: "<session-id>", run: runAssess},
		"warm":      {summary: "start the session's work window (default 5 h) and say when it closes", args: "<session-id>", run: runWarm},
		"archive":   {summary: "write the session to RC-<stamp>.json on the server and mark it archived", args: "<session-id>", run: runArchive},
		"restore":   {summary: "list archives, or restore one (by name, latest of a project, or a file)", args: "[archive-name]", run: runRestore},
		"status":    {summary: "hours since the last archive, window left, stale or not, and a recommendation", args: "<session-id>", run: runStatus},
		"heartbeat": {summary: "record a heartbeat (a stale session becomes running again)", args: "<session-id>", run: runHeartbeat},
	}
}

// sessionVerbs are the sub-verbs of "sessiond session"; newCommandLine finds them as
// "session VERB". The init function fills it.
var sessionVerbs map[string]command

func runSession(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "sessiond session: missing <verb>")
		sessionUsage(stderr)
		return 2
	}
	if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		sessionUsage(stdout)
		return 0
	}
	v, ok := sessionVerbs[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "sessiond session: unknown verb %q\n", args[0])
		sessionUsage(stderr)
		return 2
	}
	return v.run(args[1:], stdin, stdout, stderr)
}

// sessionUsage lists the verbs of "sessiond session".
func sessionUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n\nverbs:\n", usageLine("session", commands["session"].args), commands["session"].summary)
	names := make([]string, 0, len(sessionVerbs))
	for n := range sessionVerbs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-26s %s\n", n+" "+sessionVerbs[n].args, sessionVerbs[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'sessiond help session <verb>' (or 'sessiond session <verb> -h') for a verb's flags;\n--json prints JSON for programs.")
}

func hours(h *float64) string {
	if h == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f h", *h)
}

func runAssess(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("session assess", stdout, stderr)
	task := f.fs.String("task", "", "the task description (list items '- step' become steps)")
	taskFile := f.fs.String("task-file", "", "read the task description from this file (- for stdin)")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	id := pos[0]
	if *taskFile != "" {
		var b []byte
		var err error
		if *taskFile == "-" {
			b, err = io.ReadAll(stdin)
		} else {
			b, err = os.ReadFile(*taskFile)
		}
		if err != nil {
			fmt.Fprintf(stderr, "sessiond session assess: read --task-file: %v\n", err)
			return 2
		}
		*task = string(b)
	}
	a, err := f.client().Assess(context.Background(), id, wire.AssessRequest{Task: *task})
	if err != nil {
		return fail(stderr, "session assess", err)
	}
	if *f.json {
		printJSON(stdout, a)
		return 0
	}
	fmt.Fprintf(stdout, "%s: %s\nbasis: %s (%d samples)\n", id, a.Message, a.Basis, a.Samples)
	if a.Sufficient {
		fmt.Fprintf(stdout, "estimate: %s optimistic, %s pessimistic; risk %s\n", hours(a.OptimisticHours), hours(a.PessimisticHours), a.Risk)
	}
	for _, p := range a.Phases {
		fmt.Fprintf(stdout, "phase %d (%s, at most %.0f h), then %s:\n", p.N, hours(p.Hours), p.MaxHours, p.Checkpoint)
		for _, s := range p.Steps {
			fmt.Fprintf(stdout, "  - %s\n", s)
		}
	}
	return 0
}

func runWarm(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("session warm", stdout, stderr)
	h := f.fs.Float64("hours", 0, "window length in hours (default: the server's --window, 5 h)")
	restart := f.fs.Bool("restart", false, "open a new window even if one is open")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	id := pos[0]
	w, err := f.client().Warm(context.Background(), id, api.WarmRequest{Hours: *h, Restart: *restart})
	if err != nil {
		return fail(stderr, "session warm", err)
	}
	if *f.json {
		printJSON(stdout, w)
		return 0
	}
	verb := "window already open"
	if w.Started {
		verb = "window started"
	}
	fmt.Fprintf(stdout, "%s: %s at %s, closes at %s (%s left)\n", id, verb, w.StartedAt, w.ClosesAt, hours(w.HoursLeft))
	return 0
}

func runArchive(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("session archive", stdout, stderr)
	done := f.fs.String("done", "", "note: what is done")
	inProgress := f.fs.String("in-progress", "", "note: what is in progress")
	next := f.fs.String("next", "", "note: what comes next")
	compact := f.fs.Bool("compact", false, "remove the session's events from the store once the archive is verified (the archive becomes the only copy)")
	gate := f.fs.String("gate", "owner", "updated_by_gate: owner, handoff, user or mission")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	id := pos[0]
	pd := progressFor(stderr, *f.json, "archiving "+id)
	res, err := f.client().ArchiveWithProgress(context.Background(), id, api.ArchiveRequest{
		Note: wire.Note{Done: *done, InProgress: *inProgress, Next: *next}, Compact: *compact, UpdatedByGate: *gate}, pd.callback())
	pd.clear()
	if err != nil {
		return fail(stderr, "session archive", err)
	}
	if *f.json {
		printJSON(stdout, res)
		return 0
	}
	fmt.Fprintf(stdout, "archived %s: %d events to %s (%s)\n", id, res.Events, res.Archive.Path, res.Archive.Checksum)
	if *compact {
		fmt.Fprintf(stdout, "compacted: %d events removed from the store; restore with: sessiond session restore %s\n", res.Compacted, res.Archive.Name)
	}
	return 0
}

func runRestore(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("session restore", stdout, stderr)
	list := f.fs.Bool("list", false, "list archives (newest first) instead of restoring")
	project := f.fs.String("project", "", "the project whose latest archive to restore or list ('-' for sessions without one)")
	file := f.fs.String("file", "", "an archive file from another host: upload it to the server, then restore it")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	c := f.client()
	ctx := context.Background()
	if *list {
		l, err := c.Archives(ctx, *project)
		if err != nil {
			return fail(stderr, "session restore", err)
		}
		if *f.json {
			printJSON(stdout, l)
			return 0
		}
		for _, a := range l.Archives {
			p := "-"
			if a.Project != nil {
				p = *a.Project
			}
			fmt.Fprintf(stdout, "%s  %s  session %s  project %s  %d bytes\n", a.Name, a.ArchivedAt, a.SessionID, p, a.Bytes)
		}
		if len(l.Archives) == 0 {
			fmt.Fprintln(stdout, "no archives")
		}
		return 0
	}
	req := api.RestoreRequest{Project: *project}
	switch {
	case *file != "":
		data, err := os.ReadFile(*file)
		if err != nil {
			fmt.Fprintf(stderr, "sessiond session restore: read --file: %v\n", err)
			return 2
		}
		info, err := c.UploadArchive(ctx, data)
		if err != nil {
			return fail(stderr, "session restore", err)
		}
		req = api.RestoreRequest{Name: info.Name}
	case len(pos) == 1:
		req.Name = pos[0]
	case *project == "":
		fmt.Fprintln(stderr, "sessiond session restore: say what to restore\nhint: sessiond session restore RC-….json, --project P (its latest), --file PATH, or --list")
		return 2
	}
	what := "restoring " + req.Name
	if req.Name == "" {
		what = "restoring the latest archive of " + req.Project
	}
	pd := progressFor(stderr, *f.json, what)
	res, err := c.RestoreWithProgress(ctx, req, pd.callback())
	pd.clear()
	if err != nil {
		return fail(stderr, "session restore", err)
	}
	if *f.json {
		printJSON(stdout, res)
		return 0
	}
	how := "restored"
	switch res.How {
	case session.RestoredOverCompacted:
		how = "restored over its compacted copy"
	case session.RestoredReactivated:
		how = "reactivated (its log was still in the store)"
	}
	fmt.Fprintf(stdout, "%s %s from %s: %d events, status %s\n", how, res.Session.Record.SessionID, res.Archive.Name, res.Events, res.Session.Record.Status)
	return 0
}

func runStatus(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("session status", stdout, stderr)
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	id := pos[0]
	r, err := f.client().Status(context.Background(), id)
	if err != nil {
		return fail(stderr, "session status", err)
	}
	if *f.json {
		printJSON(stdout, r)
		return 0
	}
	stale := "no"
	if r.Stale {
		stale = "yes"
	}
	fmt.Fprintf(stdout, "%s  status %s  stale %s  since last archive %s  window left %s\nrecommendation: %s", id, r.Status, stale,
		hours(r.HoursSinceLastArchive), hours(r.Window.HoursLeft), r.Recommendation)
	if len(r.Reasons) > 0 {
		fmt.Fprintf(stdout, " (%s)", strings.Join(r.Reasons, "; "))
	}
	fmt.Fprintln(stdout)
	return 0
}

func runHeartbeat(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("session heartbeat", stdout, stderr)
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	id := pos[0]
	s, err := f.client().Heartbeat(context.Background(), id)
	if err != nil {
		return fail(stderr, "session heartbeat", err)
	}
	if *f.json {
		printJSON(stdout, s)
		return 0
	}
	fmt.Fprintf(stdout, "%s  status %s  last heartbeat %s\n", id, s.Record.Status, s.Record.LastHeartbeatAt.Get())
	return 0
}
