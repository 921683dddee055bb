package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/sessiond/sessiond/wire"
	"io"
	"strings"
	"time"

	"github.com/sessiond/sessiond/contract"
)

func init() {
	commands["fork"] = command{summary: "branch a new thread from a message of a session", args: "<session-id> <message-id> <run-id>",
		about: "The new thread inherits the session through the message, which belongs to the run.", run: runFork}
	commands["rerun"] = command{summary: "edit a message and run again in a new thread", args: "<session-id> <message-id> <run-id> <text>...",
		about: "The new thread's copy of the message says the text, and a new run is queued there.\nText that starts with - goes after --.", run: runRerun}
	commands["lineage"] = command{summary: "show a session's ancestors and forks", args: "<session-id>", run: runLineage}
}

// inheritanceFlags adds the inheritance flag; every resource is inherited by default. The
// returned func fails on a name it does not know.
func inheritanceFlags(fs *flag.FlagSet) func() (contract.Inheritance, error) {
	exclude := fs.String("exclude", "", "comma-separated resources not to inherit: messages, attachments, summaries, toolResults, codeChanges (or all)")
	return func() (contract.Inheritance, error) {
		in := contract.Inheritance{Messages: "through-source-message", Attachments: "inherit", Summaries: "inherit", ToolResults: "inherit", CodeChanges: "inherit"}
		if *exclude == "" {
			return in, nil
		}
		for _, x := range strings.Split(*exclude, ",") {
			switch strings.TrimSpace(x) {
			case "all":
				in = contract.Inheritance{Messages: "exclude", Attachments: "exclude", Summaries: "exclude", ToolResults: "exclude", CodeChanges: "exclude"}
			case "messages":
				in.Messages = "exclude"
			case "attachments":
				in.Attachments = "exclude"
			case "summaries":
				in.Summaries = "exclude"
			case "toolResults":
				in.ToolResults = "exclude"
			case "codeChanges":
				in.CodeChanges = "exclude"
			default:
				return in, fmt.Errorf("--exclude %q: unknown resource; use messages, attachments, summaries, toolResults, codeChanges or all", x)
			}
		}
		return in, nil
	}
}

func runFork(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return branch("fork", args, stdout, stderr)
}

func runRerun(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return branch("rerun", args, stdout, stderr)
}

// branch sends a fork or edit-and-rerun command to SESSION, branching from MESSAGE of RUN in the
// same session.
func branch(name string, args []string, stdout, stderr io.Writer) int {
	f := newCommandFlags(name, stdout, stderr)
	inheritance := inheritanceFlags(f.fs)
	a, code, ok := f.parse(args)
	if !ok {
		return code
	}
	sid, msg, run := a[0], a[1], a[2]
	inh, err := inheritance()
	if err != nil {
		return f.usageError(err.Error())
	}
	c := &contract.Command{Contract: "AgentSessionCommand", SessionID: sid, IdempotencyKey: *f.key,
		IssuedAt: contract.FormatTime(time.Now()), CommandType: "fork",
		Payload: &contract.ForkCommand{SourceThreadID: sid, SourceMessageID: msg, SourceRunID: run, Inheritance: inh}}
	if name == "rerun" {
		text, _ := json.Marshal(strings.Join(a[3:], " "))
		c.CommandType = "edit-and-rerun"
		c.Payload = &contract.EditAndRerunCommand{SourceThreadID: sid, SourceMessageID: msg, SourceRunID: run,
			ReplacementParts: []contract.RawJSON{text}, Inheritance: inh}
	}
	cl := f.client()
	ctx, cancel := f.withTimeout(context.Background(), 0)
	defer cancel()
	s, err := cl.GetSession(ctx, sid)
	if err != nil {
		return fail(stderr, name, err)
	}
	c.ExpectedSequence = s.LastSequence
	res, code := f.send(ctx, cl, c, 0, args)
	if code != 0 || *f.json {
		return code
	}
	b := res.Operation.ActiveBranch
	fmt.Fprintf(stdout, "%s: new thread %s (branch %s, run %s), %d events inherited\n", res.Outcome, b.ThreadID, b.BranchID, b.RunID, len(res.ResultEventIDs))
	return 0
}

func runLineage(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("lineage", stdout, stderr)
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	id := pos[0]
	l, err := f.client().Lineage(context.Background(), id)
	if err != nil {
		return fail(stderr, "lineage", err)
	}
	if *f.json {
		printJSON(stdout, l)
		return 0
	}
	for i := len(l.Ancestors) - 1; i >= 0; i-- {
		a := l.Ancestors[i]
		fmt.Fprintf(stdout, "%s%s\n", strings.Repeat("  ", len(l.Ancestors)-1-i), a.SessionID)
	}
	depth := len(l.Ancestors)
	from := ""
	if l.Lineage != nil {
		from = fmt.Sprintf("  (from message %s, run %s)", l.Lineage.ForkedFromMessageID, l.Lineage.SourceRunID)
	}
	fmt.Fprintf(stdout, "%s%s  <- this session%s\n", strings.Repeat("  ", depth), id, from)
	var walk func(nodes []wire.LineageNode, depth int)
	walk = func(nodes []wire.LineageNode, depth int) {
		for _, n := range nodes {
			fmt.Fprintf(stdout, "%s%s  (from message %s, run %s)\n", strings.Repeat("  ", depth), n.SessionID, n.Lineage.ForkedFromMessageID, n.Lineage.SourceRunID)
			walk(n.Children, depth+1)
		}
	}
	walk(l.Descendants, depth+1)
	if l.Truncated {
		fmt.Fprintln(stdout, "(the tree is larger than shown)")
	}
	return 0
}
