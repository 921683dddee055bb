// Command echoagent is an EXAMPLE agent runtime for sessiond, not part of the product. It shows
// the protocol a runtime follows (docs/runtime.md): it is a worker that claims queued runs of
// any number of sessions (client.Worker: a claim loop, the lease renewed in the background,
// released when a run is done, left to expire when its work failed), and works on several at
// once. For each run it follows the run's session
// stream, streams its reasoning and a reply to the run's source message, asks for approval before a "risky" tool
// call, and honours stop and steer commands, all by appending events under the run's lease.
//
//	go run ./examples/echoagent --concurrency 8
//
// The agent does no real work: its "model" echoes the user's words back, slowly.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/wire"
)

// Agent is the example runtime: a worker that claims queued runs (of any session its filter
// matches) and works on each with the run's session stream open for the commands.
type Agent struct {
	Client *client.Client
	// Filter selects the runs the agent claims (agent_id, project, …; wait and lease length).
	Filter wire.ClaimRequest
	// Concurrency is how many runs the agent works on at once (default 1).
	Concurrency int
	// Tick is the pause between streamed chunks (default 50ms).
	Tick time.Duration
	// Chunks is how many progress chunks a run streams after its tool call (default 20).
	Chunks int
	// SkipApproval runs the tool at once instead of asking a person first.
	SkipApproval bool
	// Log, if set, is told what the agent does.
	Log func(format string, args ...any)
	// OnError, if set, hears of failed claims and renewals, and of runs that failed.
	OnError func(error)

	mu sync.Mutex
	n  int
}

// run is the agent's view of one run it works on; the stream loop feeds it signals.
type run struct {
	id, session, source string
	job                 *client.Job
	approvals           chan string // decisions ("approved" or "rejected")
	steers              chan contract.SteerPayload
	stop                chan struct{}
	stopOnce            sync.Once
}

func (a *Agent) logf(format string, args ...any) {
	if a.Log != nil {
		a.Log(format, args...)
	}
}

// Run claims and works on runs until ctx is done; the leases of runs it did not finish then
// expire (client.Worker). It returns ctx.Err() then.
func (a *Agent) Run(ctx context.Context) error {
	if a.Tick <= 0 {
		a.Tick = 50 * time.Millisecond
	}
	if a.Chunks <= 0 {
		a.Chunks = 20
	}
	w := &client.Worker{Client: a.Client, Filter: a.Filter, Concurrency: a.Concurrency, Handle: a.handle, OnError: a.OnError}
	return w.Run(ctx)
}

// handle works on one claimed run: it follows the run's session from the start (for the
// source message's text and the commands), then works.
func (a *Agent) handle(ctx context.Context, job *client.Job) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &run{id: job.Claim.Run.RunID, session: job.Claim.Run.SessionID, source: job.Claim.Run.SourceMessageID, job: job,
		approvals: make(chan string, 1), steers: make(chan contract.SteerPayload, 8), stop: make(chan struct{})}
	ready := make(chan string, 1) // the source message's text, once the run's queued status is read
	streamDone := make(chan error, 1)
	go func() {
		messages := map[string]string{} // user messageId -> text
		queued := false
		streamDone <- a.Client.Stream(ctx, r.session, client.StreamOptions{After: -1}, func(se client.StreamEvent) error {
			var e contract.Event
			if err := e.UnmarshalJSON(se.Data); err != nil {
				return fmt.Errorf("event %d: %w", se.Sequence, err)
			}
			if !queued && e.RunID == r.id {
				if p, ok := e.Payload.(*contract.StatusPayload); ok && p.Status == "queued" {
					queued = true
					ready <- messages[r.source]
				}
			}
			observe(r, messages, &e)
			return nil
		})
	}()
	select {
	case text := <-ready:
		err := a.work(ctx, r, text)
		if err != nil && ctx.Err() == nil {
			// Not left active without a holder: fail it (best effort; LEASE_LOST means the
			// run is no longer ours to end).
			if ferr := a.finish(ctx, r, time.Now(), "failed"); ferr != nil {
				a.logf("run %s: could not record its failure: %v", r.id, ferr)
			}
			return fmt.Errorf("run %s of session %s: %w", r.id, r.session, err)
		}
		return nil
	case err := <-streamDone:
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("run %s of session %s: the stream ended before the run's queued status: %v", r.id, r.session, err)
	case <-ctx.Done():
		return nil
	}
}

// observe reacts to one event of the run's session: the user's messages and the commands
// aimed at the run.
func observe(r *run, messages map[string]string, e *contract.Event) {
	switch p := e.Payload.(type) {
	case *contract.MessagePayload:
		if p.Role == "user" {
			var text []string
			for _, part := range p.Parts {
				if t, ok := partText(part); ok {
					text = append(text, t)
				}
			}
			messages[p.MessageID] = strings.Join(text, " ")
		}
	case *contract.StatusPayload:
		if e.RunID == r.id && p.Status == "stopping" {
			r.stopOnce.Do(func() { close(r.stop) })
		}
	case *contract.ApprovalPayload:
		if e.RunID == r.id && (p.Status == "approved" || p.Status == "rejected") {
			select {
			case r.approvals <- p.Status:
			default:
			}
		}
	case *contract.SteerPayload:
		if p.TargetRunID == r.id && p.Status == "accepted" {
			select {
			case r.steers <- *p:
			default:
			}
		}
	}
}

// work is one run: reply, ask for approval, call the tool, stream progress, finish.
func (a *Agent) work(ctx context.Context, r *run, text string) error {
	began := time.Now()
	select {
	case <-r.stop: // stopped while it was queued
		return a.finish(ctx, r, began, "stopped")
	default:
	}
	if err := a.emit(ctx, r, "status", &contract.StatusPayload{Status: "running", StartedAt: now()}); err != nil {
		return err
	}
	a.logf("run %s: started for %q", r.id, text)
	// The "model" thinks before it answers.
	if err := a.emit(ctx, r, "reasoning", &contract.ReasoningPayload{ReasoningID: "reasoning-" + r.id,
		Text: fmt.Sprintf("The user said %q; echo it back.", text), Status: "completed"}); err != nil {
		return err
	}
	reply := "reply-" + r.id
	for i, chunk := range []string{"You said: ", text, "."} {
		status := "streaming"
		if i == 2 {
			status = "completed"
		}
		if err := a.emit(ctx, r, "message", &contract.MessagePayload{MessageID: reply, Role: "assistant", Operation: "append",
			Parts: []contract.RawJSON{textPart(chunk)}, Status: status}); err != nil {
			return err
		}
	}

	// A "risky" tool call: ask first (unless told to skip the approval).
	tool, approval := "tool-"+r.id, "approval-"+r.id
	decision := "approved"
	if a.SkipApproval {
		if err := a.emit(ctx, r, "tool", &contract.ToolPayload{ToolCallID: tool, ToolName: "shell", Status: "pending", Input: contract.RawJSON(`{"cmd":"echo hello"}`)}); err != nil {
			return err
		}
	} else {
		err := a.emitAll(ctx, r,
			ev("tool", &contract.ToolPayload{ToolCallID: tool, ToolName: "shell", Status: "pending", Input: contract.RawJSON(`{"cmd":"echo hello"}`)}),
			ev("approval", &contract.ApprovalPayload{ApprovalID: approval, ToolCallID: tool, Status: "requested", Title: "Run `echo hello`?"}),
			ev("status", &contract.StatusPayload{Status: "waiting_approval"}))
		if err != nil {
			return err
		}
		a.logf("run %s: waiting for approval %s", r.id, approval)
		select {
		case decision = <-r.approvals:
		case <-r.stop:
			return a.finish(ctx, r, began, "stopped")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var err error
	// The server appended the decision and moved the run back to running.
	if decision == "approved" {
		err = a.emitAll(ctx, r,
			ev("tool", &contract.ToolPayload{ToolCallID: tool, ToolName: "shell", Status: "running", StartedAt: now()}),
			ev("terminal", &contract.TerminalPayload{TerminalID: tool, Stream: "stdout", Chunk: "hello\n"}),
			ev("tool", &contract.ToolPayload{ToolCallID: tool, ToolName: "shell", Status: "completed", Output: contract.RawJSON(`"hello\n"`), CompletedAt: now()}))
	} else {
		err = a.emit(ctx, r, "tool", &contract.ToolPayload{ToolCallID: tool, ToolName: "shell", Status: "denied"})
	}
	if err != nil {
		return err
	}

	// Progress, until done, steered along the way, or stopped.
	progress := "progress-" + r.id
	tick := time.NewTicker(a.Tick)
	defer tick.Stop()
	for i := 0; i < a.Chunks; i++ {
		select {
		case s := <-r.steers:
			err = a.emitAll(ctx, r,
				ev("steer", &contract.SteerPayload{CommandID: s.CommandID, TargetRunID: r.id, Text: s.Text, Status: "applied"}),
				ev("message", &contract.MessagePayload{MessageID: progress, Role: "assistant", Operation: "append", Parts: []contract.RawJSON{textPart(" (steered: " + s.Text + ")")}, Status: "streaming"}))
		case <-r.stop:
			return a.finish(ctx, r, began, "stopped")
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			err = a.emit(ctx, r, "message", &contract.MessagePayload{MessageID: progress, Role: "assistant", Operation: "append", Parts: []contract.RawJSON{textPart(".")}, Status: "streaming"})
		}
		if err != nil {
			return err
		}
	}
	if err := a.emitAll(ctx, r,
		ev("message", &contract.MessagePayload{MessageID: progress, Role: "assistant", Operation: "append", Parts: []contract.RawJSON{textPart(" done")}, Status: "completed"}),
		ev("usage", &contract.UsagePayload{InputTokens: ptr(int64(len(text))), OutputTokens: ptr(int64(a.Chunks)), TotalTokens: ptr(int64(len(text) + a.Chunks))})); err != nil {
		return err
	}
	return a.finish(ctx, r, began, "completed")
}

// finish appends the run's terminal status.
func (a *Agent) finish(ctx context.Context, r *run, began time.Time, status string) error {
	d := json.Number(fmt.Sprint(time.Since(began).Milliseconds()))
	p := &contract.StatusPayload{Status: status, DurationMs: &d}
	switch status {
	case "stopped":
		p.StoppedAt = now()
	case "completed":
		p.CompletedAt = now()
	case "failed":
		p.FailedAt = now()
	}
	a.logf("run %s: %s", r.id, status)
	return a.emit(ctx, r, "status", p)
}

type pending struct {
	eventType string
	payload   contract.Payload
}

func ev(t string, p contract.Payload) pending { return pending{t, p} }

func (a *Agent) emit(ctx context.Context, r *run, eventType string, p contract.Payload) error {
	return a.emitAll(ctx, r, ev(eventType, p))
}

// emitAll appends events of a run as one batch under the run's lease. Keys are unique per
// agent process; a real runtime derives them from its own durable state so that its retries
// are safe. Each event id names the fencing token it is appended under
// ("echoagent-<runId>-t<token>-…"), so the log shows which holder wrote what.
func (a *Agent) emitAll(ctx context.Context, r *run, evs ...pending) error {
	token := r.job.Lease().Token
	batch := make([]contract.Event, len(evs))
	for i, p := range evs {
		a.mu.Lock()
		a.n++
		key := fmt.Sprintf("echoagent-%s-t%d-%d-%d", r.id, token, time.Now().UnixNano(), a.n)
		a.mu.Unlock()
		batch[i] = contract.Event{Contract: "AgentSessionEvent", EventID: key, SessionID: r.session, RunID: r.id,
			SourceMessageID: r.source, IdempotencyKey: key, OccurredAt: now(), EventType: p.eventType, Payload: p.payload}
	}
	// A transport error or a 5xx (a server restarting) is retried with the same keys, which
	// never duplicates anything; a refusal (LEASE_LOST, …) or the end of ctx is final.
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		_, err := r.job.Append(ctx, batch)
		var aerr *api.Error
		if err == nil || ctx.Err() != nil || (errors.As(err, &aerr) && aerr.Status < 500) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
}

func now() string { return contract.FormatTime(time.Now()) }

// textPart is a text part of a message: {"type":"text","text":s}.
func textPart(s string) contract.RawJSON {
	b, _ := contract.Marshal(map[string]string{"type": "text", "text": s})
	return b
}

// partText is the text of a message part: a text part's text, or a part that is a plain
// string (the contract allows any JSON value as a part).
func partText(part contract.RawJSON) (string, bool) {
	var obj struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(part, &obj) == nil && obj.Type == "text" {
		return obj.Text, true
	}
	var s string
	if json.Unmarshal(part, &s) == nil {
		return s, true
	}
	return "", false
}

func ptr[T any](v T) *T { return &v }
