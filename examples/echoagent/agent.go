// Command echoagent is an EXAMPLE agent runtime for sessiond, not part of the product. It shows
// the protocol a runtime follows (docs/runtime.md): it follows a session's event stream, and
// for every user message it starts a run, streams a reply, asks for approval before a "risky"
// tool call, and honours stop and steer commands, all by appending events.
//
//	go run ./examples/echoagent --session S-demo
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

	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
)

// Agent is the example runtime for one session.
type Agent struct {
	Client  *client.Client
	Session string
	// Tick is the pause between streamed chunks (default 50ms).
	Tick time.Duration
	// Chunks is how many progress chunks a run streams after its tool call (default 20).
	Chunks int
	// Log, if set, is told what the agent does.
	Log func(format string, args ...any)

	mu       sync.Mutex
	n        int
	messages map[string]string // user messageId -> text
	runs     map[string]*run
}

// run is the agent's view of one run it works on; the stream loop feeds it signals.
type run struct {
	id, source string
	approvals  chan string // decisions ("approved" or "rejected")
	steers     chan contract.SteerPayload
	stop       chan struct{}
	stopOnce   sync.Once
}

func (a *Agent) logf(format string, args ...any) {
	if a.Log != nil {
		a.Log(format, args...)
	}
}

// Run follows the session from its start until ctx is done. It returns ctx.Err() then.
func (a *Agent) Run(ctx context.Context) error {
	if a.Tick <= 0 {
		a.Tick = 50 * time.Millisecond
	}
	if a.Chunks <= 0 {
		a.Chunks = 20
	}
	a.messages, a.runs = map[string]string{}, map[string]*run{}
	var wg sync.WaitGroup
	defer wg.Wait()
	err := a.Client.Stream(ctx, a.Session, client.StreamOptions{After: -1}, func(se client.StreamEvent) error {
		var e contract.Event
		if err := e.UnmarshalJSON(se.Data); err != nil {
			return fmt.Errorf("event %d: %w", se.Sequence, err)
		}
		a.observe(ctx, &wg, &e)
		return nil
	})
	if errors.Is(err, context.Canceled) || ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// observe reacts to one event of the log: its own events and everyone else's.
func (a *Agent) observe(ctx context.Context, wg *sync.WaitGroup, e *contract.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch p := e.Payload.(type) {
	case *contract.MessagePayload:
		if p.Role == "user" {
			var text []string
			for _, part := range p.Parts {
				if t, ok := partText(part); ok {
					text = append(text, t)
				}
			}
			a.messages[p.MessageID] = strings.Join(text, " ")
			// A user message starts a run, unless one is already working.
			if !a.busy() {
				a.start(ctx, wg, "run-"+p.MessageID, p.MessageID, true)
			}
		}
	case *contract.StatusPayload:
		r := a.runs[e.RunID]
		switch {
		case e.RunID == "":
		case r == nil && p.Status == "queued" && !a.busy():
			// A run queued by a resume or retry command: work on it.
			a.start(ctx, wg, e.RunID, e.SourceMessageID, false)
		case r != nil && p.Status == "stopping":
			r.stopOnce.Do(func() { close(r.stop) })
		}
	case *contract.ApprovalPayload:
		if r := a.runs[e.RunID]; r != nil && (p.Status == "approved" || p.Status == "rejected") {
			select {
			case r.approvals <- p.Status:
			default:
			}
		}
	case *contract.SteerPayload:
		if r := a.runs[p.TargetRunID]; r != nil && p.Status == "accepted" {
			select {
			case r.steers <- *p:
			default:
			}
		}
	}
}

func (a *Agent) busy() bool { return len(a.runs) > 0 }

// start begins work on a run in its own goroutine; the caller holds a.mu.
func (a *Agent) start(ctx context.Context, wg *sync.WaitGroup, runID, source string, announce bool) {
	r := &run{id: runID, source: source, approvals: make(chan string, 1), steers: make(chan contract.SteerPayload, 8), stop: make(chan struct{})}
	a.runs[runID] = r
	text := a.messages[source]
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := a.work(ctx, r, text, announce)
		if err != nil && ctx.Err() == nil {
			a.logf("run %s: %v", runID, err)
		}
		a.mu.Lock()
		delete(a.runs, runID)
		a.mu.Unlock()
	}()
}

// work is one run: reply, ask for approval, call the tool, stream progress, finish.
func (a *Agent) work(ctx context.Context, r *run, text string, announce bool) error {
	began := time.Now()
	if announce {
		if err := a.emit(ctx, r, "status", &contract.StatusPayload{Status: "queued"}); err != nil {
			return err
		}
	}
	if err := a.emit(ctx, r, "status", &contract.StatusPayload{Status: "running", StartedAt: now()}); err != nil {
		return err
	}
	a.logf("run %s: started for %q", r.id, text)
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

	// A "risky" tool call: ask first.
	tool, approval := "tool-"+r.id, "approval-"+r.id
	err := a.emitAll(ctx, r,
		ev("tool", &contract.ToolPayload{ToolCallID: tool, ToolName: "shell", Status: "pending", Input: contract.RawJSON(`{"cmd":"echo hello"}`)}),
		ev("approval", &contract.ApprovalPayload{ApprovalID: approval, ToolCallID: tool, Status: "requested", Title: "Run `echo hello`?"}),
		ev("status", &contract.StatusPayload{Status: "waiting_approval"}))
	if err != nil {
		return err
	}
	a.logf("run %s: waiting for approval %s", r.id, approval)
	var decision string
	select {
	case decision = <-r.approvals:
	case <-r.stop:
		return a.finish(ctx, r, began, "stopped")
	case <-ctx.Done():
		return ctx.Err()
	}
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

// emitAll appends events of a run as one batch. Keys are unique per agent process; a real
// runtime derives them from its own durable state so that its retries are safe.
func (a *Agent) emitAll(ctx context.Context, r *run, evs ...pending) error {
	batch := make([]contract.Event, len(evs))
	for i, p := range evs {
		a.mu.Lock()
		a.n++
		key := fmt.Sprintf("echoagent-%s-%d-%d", r.id, time.Now().UnixNano(), a.n)
		a.mu.Unlock()
		batch[i] = contract.Event{Contract: "AgentSessionEvent", EventID: key, SessionID: a.Session, RunID: r.id,
			SourceMessageID: r.source, IdempotencyKey: key, OccurredAt: now(), EventType: p.eventType, Payload: p.payload}
	}
	_, err := a.Client.AppendEvents(ctx, a.Session, batch, nil)
	return err
}

func now() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00") }

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
