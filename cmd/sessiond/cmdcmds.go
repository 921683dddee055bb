package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sessiond/sessiond/contract"
)

func init() {
	commands["cmd"] = command{summary: "send a command: stop, approve, reject, steer, resume, retry, retry-summary", run: runCmd}
	commands["view"] = command{summary: "show a session's view model or transcript", run: runView}
}

func randomKey() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

const cmdUsage = `usage: sessiond cmd [flags] <kind> SESSION [args]

kinds:
  stop SESSION RUN [REASON]           ask the run to stop (--wait 10s waits for the runtime to confirm)
  approve SESSION RUN APPROVAL        approve a requested approval
  reject SESSION RUN APPROVAL         reject it
  steer SESSION RUN TEXT              send guidance to a running run
  resume SESSION RUN                  start a new run after a stopped, completed or failed one
  retry SESSION RUN EVENT             start a new run after a failure; EVENT is the retryable error
  retry-summary SESSION RUN EVENT     regenerate a failed summary; EVENT is the failed summary event

The command's expectedSequence is the log's current last sequence unless --expected-sequence
is given; its idempotency key is random unless --key is given (repeat a key to retry safely).`

func runCmd(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("cmd", stderr)
	key := f.fs.String("key", "", "idempotency key (random when empty); send the same key to retry safely")
	expected := f.fs.Int64("expected-sequence", -2, "the last sequence you saw (default: the log's current last sequence)")
	wait := f.fs.Duration("wait", 0, "for stop: wait this long for the runtime to confirm")
	f.fs.Usage = func() { fmt.Fprintln(stderr, cmdUsage); f.fs.PrintDefaults() }
	if err := f.fs.Parse(args); err != nil {
		return 2
	}
	a := f.fs.Args()
	need := map[string]int{"stop": 3, "approve": 4, "reject": 4, "steer": 4, "resume": 3, "retry": 4, "retry-summary": 4}
	if len(a) == 0 || need[a[0]] == 0 || len(a) < need[a[0]] {
		fmt.Fprintln(stderr, cmdUsage)
		return 2
	}
	kind, sid, run := a[0], a[1], a[2]
	c := &contract.Command{Contract: "AgentSessionCommand", SessionID: sid, RunID: run,
		IssuedAt: time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00"), CommandType: kind}
	switch kind {
	case "stop":
		c.Payload = &contract.StopCommand{Reason: strings.Join(a[3:], " ")}
	case "approve", "reject":
		c.CommandType = "approval"
		decision := map[string]string{"approve": "approved", "reject": "rejected"}[kind]
		c.Payload = &contract.ApprovalCommand{ApprovalID: a[3], Decision: decision}
	case "steer":
		c.Payload = &contract.SteerCommand{TargetRunID: run, Text: strings.Join(a[3:], " ")}
	case "resume":
		c.Payload = &contract.ResumeCommand{}
	case "retry":
		c.Payload = &contract.RetryCommand{SourceEventID: a[3]}
	case "retry-summary":
		c.Payload = &contract.RetrySummaryCommand{SourceEventID: a[3], SourceRunID: run}
	}
	c.IdempotencyKey = *key
	if c.IdempotencyKey == "" {
		c.IdempotencyKey = randomKey()
	}
	c.CommandID = "cli-" + c.IdempotencyKey
	cl := f.client()
	ctx := context.Background()
	c.ExpectedSequence = *expected
	if *expected < -1 {
		s, err := cl.GetSession(ctx, sid)
		if err != nil {
			return fail(stderr, "cmd", err)
		}
		c.ExpectedSequence = s.LastSequence
	}
	res, err := cl.Command(ctx, c, *wait)
	if err != nil {
		return fail(stderr, "cmd", err)
	}
	if *f.json {
		printJSON(stdout, res)
	} else if res.Error != nil {
		fmt.Fprintf(stderr, "sessiond cmd: %s %s: %s: %s (run is %s)\n", kind, res.Outcome, res.Error.Code, res.Error.Message, res.SessionStatus)
	} else {
		extra := ""
		if res.Termination != "" {
			extra = ", termination " + res.Termination
		}
		seq := "-"
		if res.AcceptedSequence != nil {
			seq = fmt.Sprint(*res.AcceptedSequence)
		}
		fmt.Fprintf(stdout, "%s %s: run %s is %s%s; events %v at sequence %s\n", kind, res.Outcome, res.RunID, res.SessionStatus, extra, res.ResultEventIDs, seq)
	}
	if res.Error != nil {
		return 1
	}
	return 0
}

func runView(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("view", stderr)
	transcript := f.fs.Bool("transcript", false, "print the transcript (folded state) instead of the view model")
	if err := f.fs.Parse(args); err != nil {
		return 2
	}
	id, ok := oneArg(f.fs, stderr, "view", "session")
	if !ok {
		return 2
	}
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
