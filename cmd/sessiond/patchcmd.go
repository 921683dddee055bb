package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
)

func init() {
	commands["patch"] = command{summary: "change a session's snapshot (capabilities, mode, model) or its default multitask strategy (PATCH /v1/sessions/{id})", args: "<session-id>", run: runPatch}
}

// runPatch changes a session's snapshot. --snapshot sends a whole snapshot from a file (or
// stdin); --enable, --disable, --mode, --model and --permission-profile change the current
// snapshot, read from the server first; --multitask sets the session's default multitask
// strategy, alone or with a snapshot change. The server checks the result against the contract.
func runPatch(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("patch", stdout, stderr)
	file := f.fs.String("snapshot", "", "replace the whole snapshot with the JSON in this file (- for stdin)")
	enable := f.fs.String("enable", "", "comma-separated capabilities to turn on, e.g. approval,resume")
	disable := f.fs.String("disable", "", "comma-separated capabilities to turn off")
	mode := f.fs.String("mode", "", "snapshot mode: chat or work")
	model := f.fs.String("model", "", "model id")
	profile := f.fs.String("permission-profile", "", "approval-required, auto-approve or full-access")
	multitask := f.fs.String("multitask", "", "the session's default multitask strategy: reject, enqueue or interrupt (what an append that queues a run does while another run is active)")
	gate := f.fs.String("gate", "user", "who makes the change (updated_by_gate): owner, handoff, user or mission")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	id := pos[0]
	edits := *enable != "" || *disable != "" || *mode != "" || *model != "" || *profile != ""
	switch {
	case *file == "" && !edits && *multitask == "":
		return f.usageError("say what to change\nhint: sessiond patch SESSION --enable approval, --snapshot FILE|- for a whole snapshot, or --multitask enqueue")
	case *file != "" && edits:
		return f.usageError("--snapshot replaces the whole snapshot; give it alone, or use --enable/--disable/--mode/--model/--permission-profile without it")
	}
	ctx := context.Background()
	c := f.client()
	req := api.PatchSessionRequest{UpdatedByGate: *gate}
	if *multitask != "" {
		req.Multitask = multitask
	}
	var snap contract.Snapshot // sent when --snapshot or an edit is given
	switch {
	case *file != "":
		data, err := readSnapshotInput(*file, stdin)
		if err != nil {
			fmt.Fprintf(stderr, "sessiond patch: read --snapshot: %v\n", err)
			return 2
		}
		if err := contract.Decode(contract.KindSnapshot, data, contract.Limits{}, &snap); err != nil {
			fmt.Fprintf(stderr, "sessiond patch: %s is not a valid snapshot:\n", *file)
			printSnapshotProblems(stderr, err)
			return 2
		}
	case edits:
		cur, err := c.GetSession(ctx, id)
		if err != nil {
			return fail(stderr, "patch", err)
		}
		snap = cur.Snapshot
		for _, e := range []struct {
			list string
			on   bool
		}{{*enable, true}, {*disable, false}} {
			if e.list == "" {
				continue
			}
			names := strings.Split(e.list, ",")
			for i, n := range names {
				names[i] = strings.TrimSpace(n)
				if !slices.Contains(contract.CapabilityNames, names[i]) {
					fmt.Fprintf(stderr, "sessiond patch: unknown capability %q\nhint: capabilities are %s\n", n, strings.Join(contract.CapabilityNames, ", "))
					return 2
				}
			}
			snap.Capabilities = setCapabilities(snap.Capabilities, names, e.on)
		}
		if *mode != "" {
			snap.Mode = *mode
		}
		if *model != "" {
			snap.ModelID = *model
		}
		if *profile != "" {
			snap.PermissionProfile = *profile
		}
	}
	if *file != "" || edits {
		req.Snapshot = &snap
	}
	s, err := c.PatchSession(ctx, id, req)
	if err != nil {
		return fail(stderr, "patch", err)
	}
	if *f.json {
		printJSON(stdout, s)
		return 0
	}
	if req.Multitask != nil {
		fmt.Fprintf(stdout, "%s: multitask %s (a run queued while another is active)\n", id, s.Lifecycle.Multitask)
		if req.Snapshot == nil {
			return 0
		}
	}
	var on []string
	for _, n := range contract.CapabilityNames {
		if s.Snapshot.Capabilities.Has(n) {
			on = append(on, n)
		}
	}
	fmt.Fprintf(stdout, "%s: snapshot mode %s, model %s, capabilities %s\n", id, s.Snapshot.Mode, s.Snapshot.ModelID, strings.Join(on, ","))
	return 0
}

// readSnapshotInput reads a file, or stdin for "-".
func readSnapshotInput(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(name)
}

// setCapabilities returns c with the named flags set to on (the names are CapabilityNames).
func setCapabilities(c contract.Capabilities, names []string, on bool) contract.Capabilities {
	m := map[string]bool{}
	b, _ := json.Marshal(c)
	json.Unmarshal(b, &m)
	for _, n := range names {
		m[n] = on
	}
	b, _ = json.Marshal(m)
	var out contract.Capabilities
	json.Unmarshal(b, &out)
	return out
}

// printSnapshotProblems prints the contract problems of a validation error, one a line (path: message
// (rule)), or the error itself.
func printSnapshotProblems(w io.Writer, err error) {
	var ve *contract.ValidationError
	if !errors.As(err, &ve) {
		fmt.Fprintf(w, "  %v\n", err)
		return
	}
	for _, p := range ve.Problems {
		path := p.Path
		if path == "" {
			path = "/"
		}
		fmt.Fprintf(w, "  %s: %s (%s)\n", path, p.Message, p.Rule)
	}
}
