package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/fsck"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres"
	"github.com/sessiond/sessiond/store/sqlite"
)

func init() {
	commands["fsck"] = command{
		summary: "check a store's consistency, read-only (exit 0 clean, 1 findings, 2 could not check)",
		about: `Checks every session of the store in --data (SQLite) or --store (PostgreSQL) and the
archives in --archive-dir: logs gap-free from 0 (or from the compaction point) to the
session's last sequence, eventIds and idempotencyKeys unique, every event valid against
the contract and agreeing with its columns, the run projection and command results equal
to what the log says, lifecycle state consistent, every archive's checksum. It never
writes. It runs beside a live server: SQLite's WAL lets it read each session in one
consistent snapshot while the server appends; without a server it holds the data
directory's lock (shared) so that none starts during the check. Each finding names its
session and sequence (docs/operations.md lists them).`,
		run: runFsck,
	}
}

// fsckReport is the --json answer of fsck.
type fsckReport struct {
	Store  string `json:"store"`
	Driver string `json:"driver"`
	// Online is true when a server had the SQLite directory open during the check.
	Online bool `json:"online"`
	*fsck.Report
	Clean bool `json:"clean"`
}

func runFsck(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	cl := newCommandLine("fsck", stdout, stderr)
	fs := cl.fs
	data := fs.String("data", "./sessiond-data", "data directory of the SQLite store to check")
	storeURL := fs.String("store", "", "a PostgreSQL URL (postgres://user@host:5432/db?search_path=sessiond) to check instead of --data")
	archiveDir := fs.String("archive-dir", "", archiveDirFlagUsage+": the archives are not checked")
	jsonOut := fs.Bool("json", false, "print the report as JSON (findings with check, sessionId, sequence, archive, message)")
	if _, code, ok := cl.parse(args); !ok {
		return code
	}
	pg := isPostgresURL(*storeURL)
	if *storeURL != "" && !pg {
		return cl.usageError(fmt.Sprintf("--store %q is not a PostgreSQL URL", *storeURL))
	}
	*archiveDir = resolveArchiveDir(*archiveDir, *data)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fail := func(err error, hint string) int {
		fmt.Fprintf(stderr, "sessiond fsck: could not check: %v\n", err)
		if hint != "" {
			fmt.Fprintf(stderr, "hint: %s\n", hint)
		}
		return 2
	}
	out := fsckReport{Store: *data, Driver: "sqlite"}
	var in store.Inspector
	if pg {
		out.Store, out.Driver = redactURL(*storeURL), "postgres"
		pin, err := postgres.OpenInspector(ctx, *storeURL)
		if err != nil {
			return fail(err, "check that PostgreSQL is reachable and that search_path names the schema sessiond serve uses")
		}
		in = pin
	} else {
		sin, err := sqlite.OpenInspector(ctx, *data)
		switch {
		case errors.Is(err, sqlite.ErrCorrupt):
			// The file is there and damaged: that is a finding, not a failure to look.
			return printFsck(stdout, *jsonOut, out, &fsck.Report{Findings: []fsck.Finding{{Check: fsck.CheckDatabase, Message: err.Error()}}}, 0, "")
		case errors.Is(err, os.ErrNotExist):
			return fail(err, "pass the data directory sessiond serve uses with --data")
		case err != nil:
			return fail(err, "")
		}
		in, out.Online = sin, sin.Online()
	}
	defer in.Close()

	mode := "offline: no server can open the directory during the check"
	switch {
	case pg:
		mode = "each session read in one snapshot, beside the running instances"
	case out.Online:
		mode = "online: a server has the directory open; each session is read in one snapshot beside it"
	}
	prog := progressFor(stderr, *jsonOut, "checking")
	if !*jsonOut {
		fmt.Fprintf(stdout, "checking %s (%s; %s)\n", out.Store, out.Driver, mode)
	}
	opt := fsck.Options{ArchiveDir: *archiveDir}
	if prog != nil {
		opt.Progress = func(p fsck.Progress) {
			prog.drawLine(fmt.Sprintf("checking: %d sessions, %d events, %d archives", p.Sessions, p.Events, p.Archives))
		}
	}
	start := time.Now()
	rep, err := fsck.Check(ctx, in, opt)
	prog.clear()
	if err != nil {
		return fail(err, "")
	}
	return printFsck(stdout, *jsonOut, out, rep, time.Since(start), *archiveDir)
}

// printFsck prints the report and returns the exit code: 0 clean, 1 findings.
func printFsck(w io.Writer, jsonOut bool, out fsckReport, rep *fsck.Report, took time.Duration, archiveDir string) int {
	out.Report, out.Clean = rep, rep.Clean()
	code := 0
	if !out.Clean {
		code = 1
	}
	if jsonOut {
		printJSON(w, out)
		return code
	}
	for _, f := range rep.Findings {
		fmt.Fprintln(w, f.String())
	}
	archives := fmt.Sprintf("%d archives (%s)", rep.Archives, archiveDir)
	if archiveDir == "" {
		archives = "archives not checked"
	}
	verdict := "clean"
	if !out.Clean {
		verdict = fmt.Sprintf("%d findings", len(rep.Findings))
	}
	fmt.Fprintf(w, "checked %d sessions, %d events and %s in %s: %s\n", rep.Sessions, rep.Events, archives, took.Round(time.Millisecond), verdict)
	return code
}
