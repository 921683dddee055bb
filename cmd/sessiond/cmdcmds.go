package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
)

func init() {
	names := make([]string, 0, len(cmdKinds))
	for n := range cmdKinds {
		names = append(names, n)
	}
	sort.Strings(names)
	var about strings.Builder
	about.WriteString("kinds:\n")
	for _, n := range names {
		fmt.Fprintf(&about, "  %-50s %s\n", "cmd "+n+" "+cmdKinds[n].args, cmdKinds[n].summary)
	}
	about.WriteString(`
The command's expectedSequence is the log's current last sequence unless --expected-sequence
is given. Its idempotency key is random unless --key is given: when a command times out or
fails in a way a resend can fix, sessiond prints the key it used; send the same command again
with --key KEY and the server answers the first result instead of applying it twice.
Text that starts with - goes after --: sessiond cmd steer S-1 run-1 -- -v is too verbose`)
	commands["cmd"] = command{summary: "send a command: stop, approve, reject, steer, resume, retry, retry-summary",
		args: "<kind> <session-id> <run-id> [args...]", about: about.String(), run: runCmd}
	commands["view"] = command{summary: "show a session's view model or transcript", args: "<session-id>", run: runView}
}

// cmdKinds are the kinds of "sessiond cmd": the positional arguments after the kind.
var cmdKinds = map[string]struct{ args, summary string }{
	"stop":          {"<session-id> <run-id> [reason...]", "ask the run to stop (--wait 10s waits for the runtime to confirm)"},
	"approve":       {"<session-id> <run-id> <approval-id> [reason...]", "approve a requested approval (the reason is kept: the detail of the run's next status)"},
	"reject":        {"<session-id> <run-id> <approval-id> [reason...]", "reject it"},
	"steer":         {"<session-id> <run-id> <text>...", "send guidance to a running run"},
	"resume":        {"<session-id> <run-id>", "start a new run after a stopped, completed or failed one"},
	"retry":         {"<session-id> <run-id> <event-id>", "start a new run after a failure; the event is the retryable error"},
	"retry-summary": {"<session-id> <run-id> <event-id>", "regenerate a failed summary; the event is the failed summary event"},
}

func randomKey() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// commandFlags are the flags of the subcommands that send a command (cmd, fork, rerun).
type commandFlags struct {
	clientFlags
	key     *string
	timeout *time.Duration
}

func newCommandFlags(name string, stdout, stderr io.Writer) commandFlags {
	f := newClientFlags(name, stdout, stderr)
	return commandFlags{clientFlags: f,
		key:     f.fs.String("key", "", "idempotency key (random when empty); the same key again is answered with the first result, not applied twice"),
		timeout: f.fs.Duration("timeout", 30*time.Second, "how long to wait for the server's answer, on top of --wait (0: no limit)"),
	}
}

// unanswered is what --json prints when a command got no answer: the key to resend it with.
type unanswered struct {
	CommandID      string `json:"commandId"`
	IdempotencyKey string `json:"idempotencyKey"`
	Error          string `json:"error"`
	Resend         string `json:"resend"`
}

// send sends c (with ?wait= when wait is positive); args are the subcommand's arguments, to
// print the command line that resends it. It prints the result as JSON with --json, and
// otherwise any failure; the caller prints an accepted result for people. It returns the
// result (nil when there was none) and the exit code: 0 accepted or duplicate, 1 rejected or
// failed, 2 no answer. When the command may have been applied without an answer, or failed in a way
// the same command can fix (STOP_TIMEOUT, COMMAND_EXECUTION_FAILED, a server error), it
// prints the idempotency key and the command line that resends it with that key.
func (f commandFlags) send(ctx context.Context, cl *client.Client, c *contract.Command, wait time.Duration, args []string) (*contract.CommandResult, int) {
	if c.IdempotencyKey == "" {
		c.IdempotencyKey = randomKey()
	}
	if c.CommandID == "" {
		c.CommandID = "cli-" + c.IdempotencyKey
	}
	resend := resendLine(f.name, args, *f.key == "", c.IdempotencyKey)
	res, err := cl.Command(ctx, c, wait)
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) && ae.Status < 500 {
			return nil, fail(f.stderr, f.name, err) // refused as sent: resending the same changes nothing
		}
		if *f.json {
			printJSON(f.stdout, unanswered{CommandID: c.CommandID, IdempotencyKey: c.IdempotencyKey, Error: err.Error(), Resend: resend})
		}
		if ae != nil {
			fail(f.stderr, f.name, err)
		} else {
			fmt.Fprintf(f.stderr, "sessiond %s: %v\n", f.name, err)
		}
		fmt.Fprintf(f.stderr, "hint: the command may or may not have been applied; it used idempotency key %s. Send it again with that key:\n  %s\nthe server then answers the first result instead of applying it twice (if no server runs at %s, start one or point --server at it)\n",
			c.IdempotencyKey, resend, *f.server)
		if ae != nil {
			return nil, 1
		}
		return nil, 2
	}
	if *f.json {
		printJSON(f.stdout, res)
	}
	if res.Error == nil {
		return res, 0
	}
	if !*f.json {
		fmt.Fprintf(f.stderr, "sessiond %s: %s %s: %s: %s (run is %s)\n", f.name, c.CommandType, res.Outcome, res.Error.Code, res.Error.Message, res.SessionStatus)
	}
	if res.Outcome == "failed" && res.Error.Retryable {
		fmt.Fprintf(f.stderr, "hint: send the same command again with its idempotency key %s:\n  %s\n", c.IdempotencyKey, resend)
	}
	return res, 1
}

// resendLine is the command line that sends the same command again: the arguments as given,
// with --key KEY added when the key was not given.
func resendLine(name string, args []string, addKey bool, key string) string {
	words := append([]string{"sessiond", name}, args...)
	if addKey {
		words = append(words, "--key", key)
	}
	for i, w := range words {
		words[i] = shellQuote(w)
	}
	return strings.Join(words, " ")
}

// shellQuote quotes s for a POSIX shell when it holds anything but plain characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@,+%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// withTimeout is ctx with the --timeout deadline (none when it is 0) plus wait.
func (f commandFlags) withTimeout(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	if *f.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, *f.timeout+wait)
}

func runCmd(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newCommandFlags("cmd", stdout, stderr)
	expected := f.fs.Int64("expected-sequence", -2, "the last sequence you saw (default: the log's current last sequence); stop ignores it")
	wait := f.fs.Duration("wait", 0, "for stop: wait this long for the runtime to confirm (at most 5m)")
	a, code, ok := f.parse(args)
	if !ok {
		return code
	}
	kind := a[0]
	k, known := cmdKinds[kind]
	if !known {
		return f.usageError(fmt.Sprintf("unknown kind %q", kind))
	}
	if err := checkPositionals(k.args, a[1:]); err != nil {
		return f.usageError(fmt.Sprintf("%v (usage: %s)", err, usageLine("cmd "+kind, k.args)))
	}
	if *wait != 0 && kind != "stop" {
		return f.usageError("--wait applies to stop only")
	}
	if *wait < 0 {
		return f.usageError("--wait must not be negative")
	}
	sid, run := a[1], a[2]
	c := &contract.Command{Contract: "AgentSessionCommand", SessionID: sid, RunID: run, IdempotencyKey: *f.key,
		IssuedAt: contract.FormatTime(time.Now()), CommandType: kind}
	switch kind {
	case "stop":
		c.Payload = &contract.StopCommand{Reason: strings.Join(a[3:], " ")}
	case "approve", "reject":
		c.CommandType = "approval"
		decision := map[string]string{"approve": "approved", "reject": "rejected"}[kind]
		c.Payload = &contract.ApprovalCommand{ApprovalID: a[3], Decision: decision, Reason: strings.Join(a[4:], " ")}
	case "steer":
		c.Payload = &contract.SteerCommand{TargetRunID: run, Text: strings.Join(a[3:], " ")}
	case "resume":
		c.Payload = &contract.ResumeCommand{}
	case "retry":
		c.Payload = &contract.RetryCommand{SourceEventID: a[3]}
	case "retry-summary":
		c.Payload = &contract.RetrySummaryCommand{SourceEventID: a[3], SourceRunID: run}
	}
	cl := f.client()
	ctx, cancel := f.withTimeout(context.Background(), *wait)
	defer cancel()
	c.ExpectedSequence = *expected
	if *expected < -1 {
		s, err := cl.GetSession(ctx, sid)
		if err != nil {
			return fail(stderr, "cmd", err)
		}
		c.ExpectedSequence = s.LastSequence
	}
	res, code := f.send(ctx, cl, c, *wait, args)
	if code != 0 || *f.json {
		return code
	}
	extra := ""
	if res.Termination != "" {
		extra = ", termination " + res.Termination
	}
	seq := "-"
	if res.AcceptedSequence != nil {
		seq = fmt.Sprint(*res.AcceptedSequence)
	}
	fmt.Fprintf(stdout, "%s %s: run %s is %s%s; events %v at sequence %s\n", kind, res.Outcome, res.RunID, res.SessionStatus, extra, res.ResultEventIDs, seq)
	return 0
}

func runView(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("view", stdout, stderr)
	transcript := f.fs.Bool("transcript", false, "print the transcript (folded state) instead of the view model")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	id := pos[0]
	cl := f.client()
	ctx := context.Background()
	if *transcript || !*f.json {
		t, err := cl.Transcript(ctx, id)
		if err != nil {
			return fail(stderr, "view", err)
		}
		if *f.json {
			printJSON(stdout, t)
			return 0
		}
		s, err := cl.GetSession(ctx, id)
		if err != nil {
			return fail(stderr, "view", err)
		}
		printSession(stdout, s)
		for _, m := range t.Messages {
			var text []string
			for _, p := range m.Parts {
				text = append(text, partText(p))
			}
			status := ""
			if m.Status != "" && m.Status != "completed" {
				status = " [" + m.Status + "]"
			}
			// Parts are usually streamed chunks of one text: join them as they are.
			fmt.Fprintf(stdout, "  %-10s %s%s\n", m.Role+":", clip(strings.Join(text, ""), 100), status)
		}
		for _, tl := range t.Tools {
			fmt.Fprintf(stdout, "  tool      %s %s\n", tl.ToolName, tl.Status)
		}
		for _, a := range t.Approvals {
			fmt.Fprintf(stdout, "  approval  %s %s (%s)\n", a.ApprovalID, a.Status, clip(a.Title, 60))
		}
		if t.Plan != nil {
			fmt.Fprintf(stdout, "  plan      %s, %d steps\n", t.Plan.Status, len(t.Plan.Steps))
		}
		fmt.Fprintf(stdout, "  usage     %d tokens in total\n", t.Usage.Total.TotalTokens)
		return 0
	}
	vm, err := cl.View(ctx, id)
	if err != nil {
		return fail(stderr, "view", err)
	}
	printJSON(stdout, vm)
	return 0
}
