package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/sessiond/sessiond/importer"
	"github.com/sessiond/sessiond/session"
)

func init() {
	commands["import"] = command{summary: "import Claude Code or Codex transcript files as sessions", args: "<path>...",
		about: `Each path is a transcript file or a directory searched recursively (Claude Code: *.jsonl,
e.g. ~/.claude/projects; Codex: rollout-*.jsonl, e.g. ~/.codex/sessions). Each transcript
becomes a session whose ids derive from the file, so importing again writes nothing new.
--format sessiond imports files sessiond export wrote: each is verified first (sessiond
verify), and its events are appended as they are, keeping their bytes and sequences.
Sessions are written through the server's HTTP API (--server), in batches: the server may be
running and serving the sessions meanwhile. Every line of every file is reported as mapped,
merged into another line's event, or skipped with a reason.`, run: runImport}
	commands["export"] = command{summary: "write a session's events as JSON lines (contract events) and its hash chain", args: "<session-id>",
		about: `Writes every event of the session, as stored, one per line (--format jsonl, the only format),
then one trailer line, {"sessiondChain":{...}}, that carries the log's hash chain and what
sessiond import needs to create the session again. sessiond verify checks the chain offline;
sessiond validate skips the trailer.`, run: runExport}
}

// exportFormat is import's --format for files sessiond export wrote.
const exportFormat = "sessiond"

// runImportExports imports files sessiond export wrote (importExport), each verified first.
func runImportExports(f clientFlags, paths []string, stdout, stderr io.Writer) int {
	code := 0
	var all []importResult
	for _, p := range paths {
		res := importExport(context.Background(), f.client(), p)
		all = append(all, res)
		if res.Error != "" {
			code = 1
		}
		if *f.json {
			continue
		}
		if res.Error != "" {
			fmt.Fprintf(stderr, "sessiond import: %s: %s\n", p, res.Error)
			for _, pr := range res.Problems {
				fmt.Fprintf(stderr, "  %s\n", pr)
			}
			continue
		}
		fmt.Fprintf(stdout, "%s: session %s: %d events, %d accepted, %d duplicate\n", p, res.SessionID, res.Events, res.Accepted, res.Duplicate)
	}
	if *f.json {
		printJSON(stdout, all)
	}
	return code
}

// importSummary is what "sessiond import --json" prints.
type importSummary struct {
	Files     []*importer.Report `json:"files"`
	Lines     int                `json:"lines"`
	Sessions  int                `json:"sessions"`
	Accepted  int                `json:"accepted"`
	Duplicate int                `json:"duplicate"`
	Skipped   map[string]int     `json:"skipped"`
	Errors    []string           `json:"errors"`
}

func runImport(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("import", stdout, stderr)
	format := f.fs.String("format", "", "the files' format: "+strings.Join(importer.Formats, ", ")+" or "+exportFormat+" (files sessiond export wrote) (required)")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if *format == exportFormat {
		return runImportExports(f, pos, stdout, stderr)
	}
	if !slices.Contains(importer.Formats, *format) {
		return f.usageError(fmt.Sprintf("--format must be %s or %s, not %q\nhint: sessiond import --format claude-code ~/.claude/projects", strings.Join(importer.Formats, ", "), exportFormat, *format))
	}
	files, err := transcriptFiles(*format, pos)
	if err != nil {
		fmt.Fprintf(stderr, "sessiond import: %v\n", err)
		return 2
	}
	if len(files) == 0 {
		fmt.Fprintf(stderr, "sessiond import: no %s transcript files in %s\n", *format, strings.Join(pos, ", "))
		return 2
	}
	sum := importSummary{Skipped: map[string]int{}, Errors: []string{}}
	d := progressFor(stderr, *f.json, fmt.Sprintf("importing %d files", len(files)))
	w := &importer.Writer{Client: f.client()}
	if d != nil {
		w.Progress = func(done, total int) {
			d.draw(session.Progress{Phase: "writing", Done: int64(done), Total: int64(total)})
		}
	}
	imported := w.Import(context.Background(), *format, files)
	d.clear()
	for _, fi := range imported {
		sum.Files = append(sum.Files, fi.Report)
		if fi.Err != nil {
			sum.Errors = append(sum.Errors, fi.Err.Error())
		}
	}
	for _, fi := range imported {
		for _, err := range fi.Errs {
			sum.Errors = append(sum.Errors, err.Error())
		}
		for _, r := range fi.Report.Sessions {
			sum.Sessions++
			sum.Accepted += r.Accepted
			sum.Duplicate += r.Duplicate
		}
	}
	for _, rep := range sum.Files {
		sum.Lines += rep.Lines
		for k, v := range rep.Skipped {
			sum.Skipped[k] += v
		}
	}
	if *f.json {
		printJSON(stdout, sum)
	} else {
		for _, rep := range sum.Files {
			printReport(stdout, rep)
		}
		fmt.Fprintf(stdout, "%d files, %d lines: %d sessions, %d events accepted, %d duplicate\n", len(sum.Files), sum.Lines, sum.Sessions, sum.Accepted, sum.Duplicate)
		for _, e := range sum.Errors {
			fmt.Fprintf(stderr, "sessiond import: %s\n", e)
		}
	}
	if len(sum.Errors) > 0 {
		return 1
	}
	return 0
}

// printReport prints one file's account: its lines, the sessions it became, what was
// skipped and why.
func printReport(w io.Writer, rep *importer.Report) {
	fmt.Fprintf(w, "%s: %d lines, %d mapped, %d merged", rep.Path, rep.Lines, rep.Mapped, rep.Merged)
	skipped := 0
	for _, v := range rep.Skipped {
		skipped += v
	}
	fmt.Fprintf(w, ", %d skipped\n", skipped)
	for _, s := range rep.Sessions {
		fmt.Fprintf(w, "  session %s: %d events, %d accepted, %d duplicate", s.SessionID, s.Events, s.Accepted, s.Duplicate)
		if s.ContinuationOf != "" {
			fmt.Fprintf(w, " (a sub-agent, continuing %s)", s.ContinuationOf)
		}
		fmt.Fprintln(w)
	}
	for _, reason := range rep.SkippedReasons() {
		fmt.Fprintf(w, "  skipped %d: %s\n", rep.Skipped[reason], reason)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	if rep.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", rep.Error)
	}
}

// transcriptFiles lists the files to import: each path that is a file, and in each directory
// (recursively) the files of the format (Claude Code: *.jsonl; Codex: rollout-*.jsonl), sorted.
func transcriptFiles(format string, paths []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			add(p)
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := d.Name()
			if d.IsDir() || !strings.HasSuffix(name, ".jsonl") {
				return nil
			}
			if format == "codex" && !strings.HasPrefix(name, "rollout-") {
				return nil
			}
			found = append(found, path)
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(found)
		for _, f := range found {
			add(f)
		}
	}
	return out, nil
}

func runExport(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("export", stdout, stderr)
	format := f.fs.String("format", "jsonl", "the output format: jsonl (one contract event per line)")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if *format != "jsonl" {
		return f.usageError(fmt.Sprintf("--format must be jsonl, not %q", *format))
	}
	return pagingFail(stderr, "export", runExportChain(context.Background(), f.client(), pos[0], stdout))
}
