package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
)

// Recorder connects an ACP agent to a sessiond session: each user message appended to the
// session becomes a session/prompt, one run per prompt; what the agent reports becomes the
// run's events; approvals and stop commands on the session answer the agent's permission
// requests and cancel its turn. Everything goes through the HTTP API (package client).
type Recorder struct {
	Client    *client.Client
	SessionID string
	// Root is the directory the agent works in (its cwd and session cwd) and the only one its
	// fs/* and terminal/* calls may touch.
	Root string
	// Log, if set, is told what happens (one line each).
	Log func(format string, args ...any)
	// Tap, if set, sees every JSON-RPC frame in both directions.
	Tap func(Direction, []byte)
	// OnEvent, if set, is called after each batch of events was appended.
	OnEvent func([]contract.Event)

	conn      *Conn
	ws        *Workspace
	acpID     string
	agentName string

	mu      sync.Mutex
	turn    *turn // the prompt turn in progress, nil between prompts
	queue   chan pendingPrompt
	seen    map[string]bool // user messages that have a run (or are queued for one)
	appendQ chan []contract.Event
	closed  bool // appendQ is closed
	counter map[string]int
}

// turn is one prompt in progress.
type turn struct {
	runID, source string
	began         time.Time
	m             *Mapper
	cancelled     bool
	approvals     map[string]chan string // approvalId -> decision
}

type pendingPrompt struct {
	messageID string
	parts     []contract.RawJSON
	runID     string // a run the server queued; "" for a new message (run acp-<messageId>)
}

func (r *Recorder) logf(format string, args ...any) {
	if r.Log != nil {
		r.Log(format, args...)
	}
}

// Agent is an ACP agent to run: a program and its arguments.
type Agent struct {
	Path string
	Args []string
	// Stderr receives the agent's standard error (default os.Stderr).
	Stderr io.Writer
}

// Run starts the agent, initializes it, opens (or loads) its ACP session, and records until
// ctx ends or the agent exits. The session must exist.
func (r *Recorder) Run(ctx context.Context, a Agent) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	root := r.Root
	if root == "" {
		root = "."
	}
	ws, err := NewWorkspace(root, r.recordWorkspace)
	if err != nil {
		return err
	}
	r.ws = ws
	defer ws.Close()
	r.queue = make(chan pendingPrompt, 1024)
	r.seen = map[string]bool{}
	r.appendQ = make(chan []contract.Event, 1024)
	r.counter = map[string]int{}

	cmd := exec.CommandContext(ctx, a.Path, a.Args...)
	cmd.Dir = ws.Root
	cmd.Stderr = a.Stderr
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the agent %s: %w", a.Path, err)
	}
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
	r.conn = NewConn(stdout, stdin, r)
	r.conn.Tap = r.Tap
	connDone := make(chan error, 1)
	go func() { connDone <- r.conn.Run(ctx) }()
	appendDone := make(chan struct{})
	go func() { defer close(appendDone); r.appender(ctx) }()
	defer func() {
		r.mu.Lock()
		r.closed = true // what the agent still sends is not recorded any more
		close(r.appendQ)
		r.mu.Unlock()
		<-appendDone
	}()

	if err := r.open(ctx); err != nil {
		return err
	}
	streamDone := make(chan error, 1)
	go func() { streamDone <- r.follow(ctx) }()
	promptDone := make(chan error, 1)
	go func() { promptDone <- r.prompts(ctx) }()
	select {
	case err := <-connDone:
		if ctx.Err() != nil { // the agent ended because sessiond acp was interrupted
			r.interruptTurn()
			return ctx.Err()
		}
		r.failTurn("the agent process ended: " + errText(err))
		return fmt.Errorf("the agent ended: %w", err)
	case err := <-streamDone:
		return fmt.Errorf("the session stream ended: %w", err)
	case err := <-promptDone:
		if ctx.Err() != nil {
			r.interruptTurn()
		}
		return err
	case <-ctx.Done():
		r.interruptTurn()
		return ctx.Err()
	}
}

func errText(err error) string {
	if errors.Is(err, io.EOF) {
		return "its output closed"
	}
	return err.Error()
}

// open initializes the agent and opens its ACP session: session/load of the session recorded
// in the log's last acp resume event when the agent can load sessions, else session/new
// (recorded as a resume event).
func (r *Recorder) open(ctx context.Context) error {
	var init InitializeResponse
	err := r.conn.Call(ctx, MethodInitialize, InitializeRequest{ProtocolVersion: ProtocolVersion,
		ClientCapabilities: ClientCapabilities{FS: FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}, Terminal: true},
		ClientInfo:         &Implementation{Name: "sessiond", Version: "1"}}, &init)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if init.AgentInfo != nil {
		r.agentName = init.AgentInfo.Name
	}
	prev, err := r.lastACPSession(ctx)
	if err != nil {
		return err
	}
	if prev != "" && init.AgentCapabilities.LoadSession {
		err := r.conn.Call(ctx, MethodSessionLoad, LoadSessionRequest{SessionID: prev, Cwd: r.ws.Root, MCPServers: []json.RawMessage{}}, nil)
		if err == nil {
			r.acpID = prev
			r.logf("loaded the agent's session %s", prev)
			return nil
		}
		r.logf("session/load %s failed (%v): starting a new agent session", prev, err)
	}
	var ns NewSessionResponse
	if err := r.conn.Call(ctx, MethodSessionNew, NewSessionRequest{Cwd: r.ws.Root, MCPServers: []json.RawMessage{}}, &ns); err != nil {
		return fmt.Errorf("session/new: %w", err)
	}
	r.acpID = ns.SessionID
	state, _ := json.Marshal(map[string]any{"acp": map[string]any{"sessionId": ns.SessionID, "agent": r.agentName, "loadSession": init.AgentCapabilities.LoadSession}})
	reason := "the ACP agent's session; sessiond acp loads it again when the agent can load sessions"
	ev := r.event("", "", "acp-session-"+ns.SessionID, Out{"resume", &contract.ResumePayload{Resumable: init.AgentCapabilities.LoadSession, State: state, Reason: &reason}})
	if _, err := r.Client.AppendEvents(ctx, r.SessionID, []contract.Event{ev}, nil); err != nil {
		return fmt.Errorf("record the agent's session: %w", err)
	}
	r.logf("agent session %s", ns.SessionID)
	return nil
}

// lastACPSession reads the log for the agent session of the last acp resume event.
func (r *Recorder) lastACPSession(ctx context.Context) (string, error) {
	last := ""
	after := int64(-1)
	for {
		page, err := r.Client.ReadEvents(ctx, r.SessionID, after, 1000)
		if err != nil {
			return "", fmt.Errorf("read session %s: %w", r.SessionID, err)
		}
		for i, raw := range page.Events {
			// The stored events are canonical JSON: only a resume event (and a page's last,
			// for where the next page starts) needs decoding.
			if i < len(page.Events)-1 && !bytes.Contains(raw, []byte(`"eventType":"resume"`)) {
				continue
			}
			var e contract.Event
			if err := e.UnmarshalJSON(raw); err != nil {
				return "", fmt.Errorf("read session %s: %w", r.SessionID, err)
			}
			after = e.Sequence
			if p, ok := e.Payload.(*contract.ResumePayload); ok && len(p.State) > 0 {
				var st struct {
					ACP struct {
						SessionID string `json:"sessionId"`
					} `json:"acp"`
				}
				if json.Unmarshal(p.State, &st) == nil && st.ACP.SessionID != "" {
					last = st.ACP.SessionID
				}
			}
		}
		if len(page.Events) == 0 || after >= page.LastSequence {
			return last, nil
		}
	}
}

// follow reads the session's stream. A user message appended while it follows becomes a
// prompt; so does a run the server queued (resume, retry, edit-and-rerun), with its source
// message. Of the log as it stood when it started, only the last user message is prompted,
// when no run came after it (what was typed while no agent was attached; earlier messages are
// history, and a fork's inherited messages are context), and the runs still queued. Stop and
// approval commands reach the turn in progress. A run of this client left active by an
// earlier process is failed.
func (r *Recorder) follow(ctx context.Context) error {
	s, err := r.Client.GetSession(ctx, r.SessionID)
	if err != nil {
		return err
	}
	head := s.LastSequence
	parts := map[string][]contract.RawJSON{} // user messages' parts, by messageId
	runs := map[string]*contract.Event{}     // during the history: each run's last status event
	var runOrder []string
	var lastUser *pendingPrompt // during the history: the last user message after the last run
	live := head < 0
	return r.Client.Stream(ctx, r.SessionID, client.StreamOptions{After: -1}, func(se client.StreamEvent) error {
		var e contract.Event
		if err := e.UnmarshalJSON(se.Data); err != nil {
			return fmt.Errorf("event %d: %w", se.Sequence, err)
		}
		switch p := e.Payload.(type) {
		case *contract.MessagePayload:
			if p.Role == "user" && e.RunID == "" {
				parts[p.MessageID] = append(parts[p.MessageID], p.Parts...)
				if p.Status != "streaming" && !r.seenMessage(p.MessageID) {
					pp := pendingPrompt{messageID: p.MessageID, parts: parts[p.MessageID]}
					if live {
						r.queue <- pp
					} else {
						lastUser = &pp
					}
				}
			}
		case *contract.StatusPayload:
			if e.RunID != "" && e.SourceMessageID != "" {
				r.markSeen(e.SourceMessageID)
				if !live {
					if _, ok := runs[e.RunID]; !ok {
						runOrder = append(runOrder, e.RunID)
					}
					runs[e.RunID] = &e
					if lastUser != nil && lastUser.messageID == e.SourceMessageID {
						lastUser = nil
					}
				}
			}
			if live && p.Status == contract.RunStatusQueued && e.RunID != "" {
				r.queue <- pendingPrompt{messageID: e.SourceMessageID, parts: parts[e.SourceMessageID], runID: e.RunID}
			}
			if live && p.Status == contract.RunStatusStopping {
				r.stop(e.RunID)
			}
		case *contract.ApprovalPayload:
			if live && (p.Status == "approved" || p.Status == "rejected") {
				r.decide(p.ApprovalID, p.Status)
			}
		}
		if !live && se.Sequence >= head {
			live = true
			for _, id := range runOrder {
				ev := runs[id]
				st := ev.Payload.(*contract.StatusPayload).Status
				switch {
				case st == contract.RunStatusQueued:
					r.queue <- pendingPrompt{messageID: ev.SourceMessageID, parts: parts[ev.SourceMessageID], runID: id}
				case strings.HasPrefix(id, "acp-") && !contract.IsTerminal(st):
					r.abandon(ctx, id, ev.SourceMessageID)
				}
			}
			if lastUser != nil {
				r.queue <- *lastUser
			}
		}
		return nil
	})
}

func (r *Recorder) seenMessage(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[id]
}

func (r *Recorder) markSeen(id string) {
	r.mu.Lock()
	r.seen[id] = true
	r.mu.Unlock()
}

// abandon fails a run an earlier sessiond acp left active.
func (r *Recorder) abandon(ctx context.Context, runID, source string) {
	detail := "sessiond acp ended before the agent finished this prompt"
	now := stamp(time.Now())
	d := json.Number("0")
	ev := r.event(runID, source, runID+"-abandoned", Out{"status", &contract.StatusPayload{Status: contract.RunStatusFailed, Detail: &detail, FailedAt: now, DurationMs: &d}})
	if _, err := r.Client.AppendEvents(ctx, r.SessionID, []contract.Event{ev}, nil); err != nil {
		r.logf("run %s: could not fail it: %v", runID, err)
	}
}

// prompts sends the queued prompts, one turn at a time.
func (r *Recorder) prompts(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case pp := <-r.queue:
			if pp.runID == "" && r.seenMessage(pp.messageID) {
				continue
			}
			if pp.runID == "" {
				// A message a front end sent with its run (a bridge appends the message and
				// the run's queued status in one append): that run prompts it, when the
				// follower reaches its status. The run is in the server already.
				queued, err := r.hasRun(ctx, pp.messageID)
				if err != nil {
					return err
				}
				if queued {
					continue
				}
			}
			r.markSeen(pp.messageID)
			if err := r.prompt(ctx, pp); err != nil {
				return err
			}
		}
	}
}

// hasRun reports whether a run of the session has the message as its source.
func (r *Recorder) hasRun(ctx context.Context, messageID string) (bool, error) {
	runs, err := r.Client.Runs(ctx, r.SessionID)
	if err != nil {
		return false, fmt.Errorf("read the runs of session %s: %w", r.SessionID, err)
	}
	for _, run := range runs {
		if run.SourceMessageID == messageID {
			return true, nil
		}
	}
	return false, nil
}

// prompt runs one prompt turn: the run opens (running), the agent's updates are recorded as
// they come, and the run closes with the status the stop reason maps to.
func (r *Recorder) prompt(ctx context.Context, pp pendingPrompt) error {
	runID := pp.runID
	if runID == "" {
		runID = "acp-" + pp.messageID
	}
	t := &turn{runID: runID, source: pp.messageID, began: time.Now(), approvals: map[string]chan string{},
		m: &Mapper{RunID: runID, Root: r.ws.Root, Terminal: r.ws.Output}}
	r.mu.Lock()
	r.turn = t
	r.mu.Unlock()
	r.logf("run %s: prompt for message %s", runID, pp.messageID)
	r.emit(t, Out{"status", &contract.StatusPayload{Status: contract.RunStatusRunning, StartedAt: stamp(t.began)}})
	var res PromptResponse
	err := r.conn.Call(ctx, MethodSessionPrompt, PromptRequest{SessionID: r.acpID, Prompt: PromptBlocks(pp.parts)}, &res)
	if err != nil && ctx.Err() != nil {
		return nil // sessiond acp was interrupted: Run ends the turn (interruptTurn), not the agent's fault
	}
	r.mu.Lock()
	r.turn = nil
	r.mu.Unlock()
	if err != nil {
		var je *Error
		if !errors.As(err, &je) {
			// The connection ended: Run reports it.
			r.finish(t, "", "the agent did not answer the prompt: "+err.Error())
			return nil
		}
		r.finish(t, "", je.Message)
		return nil
	}
	r.finish(t, res.StopReason, "")
	return nil
}

// finish closes a turn's run: the mapping's last events and the terminal status.
func (r *Recorder) finish(t *turn, reason StopReason, failure string) {
	outs := t.m.Finish(reason)
	status := RunStatus(reason)
	if reason == StopCancelled && !t.cancelled {
		failure = "the agent cancelled the turn without a stop command"
	}
	if failure != "" {
		status = contract.RunStatusFailed
		outs = append(outs, Out{"error", &contract.ErrorPayload{Code: "AGENT_ERROR", Message: failure, Retryable: false}})
	} else if reason == StopRefusal {
		outs = append(outs, Out{"error", &contract.ErrorPayload{Code: "AGENT_REFUSED", Message: "the agent refused the prompt (stop reason: refusal)", Retryable: false}})
	}
	now := time.Now()
	d := json.Number(strconv.FormatInt(now.Sub(t.began).Milliseconds(), 10))
	p := &contract.StatusPayload{Status: status, DurationMs: &d}
	if reason != "" && reason != StopEndTurn && reason != StopCancelled {
		detail := "stop reason: " + string(reason)
		p.Detail = &detail
	}
	switch status {
	case contract.RunStatusStopped:
		p.StoppedAt = stamp(now)
	case contract.RunStatusCompleted:
		p.CompletedAt = stamp(now)
	default:
		p.FailedAt = stamp(now)
	}
	r.emit(t, append(outs, Out{"status", p})...)
	r.logf("run %s: %s", t.runID, status)
}

// failTurn ends the turn in progress as failed (the agent or this process went away).
func (r *Recorder) failTurn(why string) {
	r.mu.Lock()
	t := r.turn
	r.turn = nil
	r.mu.Unlock()
	if t != nil {
		r.finish(t, "", why)
	}
}

// interruptTurn stops the turn in progress because sessiond acp itself was interrupted (Ctrl-C,
// or its context ended): the person ended it, not the agent, so the run goes stopping, then
// stopped with that reason, rather than failed.
func (r *Recorder) interruptTurn() {
	r.mu.Lock()
	t := r.turn
	r.turn = nil
	stopping := t != nil && t.cancelled // a stop command is stopping it already
	if t != nil {
		t.cancelled = true
	}
	r.mu.Unlock()
	if t == nil {
		return
	}
	if !stopping {
		why := "sessiond acp was interrupted"
		r.emit(t, Out{"status", &contract.StatusPayload{Status: contract.RunStatusStopping, StoppingRequestedAt: stamp(time.Now()), Detail: &why}})
	}
	r.finish(t, StopCancelled, "")
}

// stop cancels the turn of runID: session/cancel, and pending permission requests answered
// cancelled.
func (r *Recorder) stop(runID string) {
	r.mu.Lock()
	t := r.turn
	if t == nil || t.runID != runID || t.cancelled {
		r.mu.Unlock()
		return
	}
	t.cancelled = true
	for _, ch := range t.approvals {
		select {
		case ch <- "":
		default:
		}
	}
	r.mu.Unlock()
	r.logf("run %s: stop: session/cancel", runID)
	if err := r.conn.Notify(MethodSessionCancel, CancelNotification{SessionID: r.acpID}); err != nil {
		r.logf("session/cancel: %v", err)
	}
}

// decide hands an approval decision to the permission request waiting for it.
func (r *Recorder) decide(approvalID, decision string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.turn == nil {
		return
	}
	if ch, ok := r.turn.approvals[approvalID]; ok {
		select {
		case ch <- decision:
		default:
		}
	}
}

// Request serves the agent's requests: permissions, files and terminals.
func (r *Recorder) Request(ctx context.Context, method string, params json.RawMessage) (any, error) {
	if method == MethodRequestPermission {
		return r.permission(ctx, params)
	}
	res, ok, err := r.ws.Serve(ctx, method, params)
	if !ok {
		return nil, Errorf(CodeMethodNotFound, "method %q is not served by sessiond", method)
	}
	return res, err
}

// permission records the request as an approval and waits for the decision (or a stop).
func (r *Recorder) permission(ctx context.Context, params json.RawMessage) (any, error) {
	var req RequestPermissionRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, Errorf(CodeInvalidParams, "session/request_permission: %v", err)
	}
	r.mu.Lock()
	t := r.turn
	r.mu.Unlock()
	if t == nil || t.cancelled {
		return RequestPermissionResponse{Outcome: RequestPermissionOutcome{Outcome: "cancelled"}}, nil
	}
	outs, id, err := t.m.Permission(req)
	if err != nil {
		return nil, Errorf(CodeInvalidParams, "%v", err)
	}
	ch := make(chan string, 1)
	r.mu.Lock()
	t.approvals[id] = ch
	r.mu.Unlock()
	r.emit(t, outs...)
	r.logf("run %s: waiting for approval %s", t.runID, id)
	var decision string
	select {
	case decision = <-ch:
	case <-ctx.Done():
	}
	r.mu.Lock()
	delete(t.approvals, id)
	r.mu.Unlock()
	out := Choose(req.Options, decision)
	if decision == "rejected" {
		var tc ToolCall
		_ = json.Unmarshal(req.ToolCall, &tc)
		r.emit(t, t.m.Denied(tc.ToolCallID)...)
	}
	return RequestPermissionResponse{Outcome: out}, nil
}

// Notify records the agent's session/update notifications into the turn in progress; others
// are ignored (updates between turns, e.g. the history an agent replays on session/load, are
// already in the log).
func (r *Recorder) Notify(_ context.Context, method string, params json.RawMessage) {
	if method != MethodSessionUpdate {
		return
	}
	var n SessionNotification
	if err := json.Unmarshal(params, &n); err != nil {
		r.logf("session/update: %v", err)
		return
	}
	r.mu.Lock()
	t := r.turn
	r.mu.Unlock()
	if t == nil {
		return
	}
	outs, err := t.m.Update(n.Update)
	if err != nil {
		r.logf("run %s: %v", t.runID, err)
		return
	}
	r.emit(t, outs...)
}

// recordWorkspace records what the workspace did, in the turn in progress.
func (r *Recorder) recordWorkspace(outs ...Out) {
	r.mu.Lock()
	t := r.turn
	r.mu.Unlock()
	if t == nil {
		return
	}
	r.emit(t, outs...)
}

// event builds a contract event; key is its eventId and idempotencyKey.
func (r *Recorder) event(runID, source, key string, o Out) contract.Event {
	return contract.Event{Contract: "AgentSessionEvent", EventID: key, SessionID: r.SessionID, RunID: runID, SourceMessageID: source,
		IdempotencyKey: key, OccurredAt: stamp(time.Now()), EventType: o.Type, Payload: o.Payload}
}

// emit queues a turn's events for appending, in order; ids are the run's id and a counter.
func (r *Recorder) emit(t *turn, outs ...Out) {
	if len(outs) == 0 {
		return
	}
	evs := make([]contract.Event, len(outs))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	for i, o := range outs {
		r.counter[t.runID]++
		evs[i] = r.event(t.runID, t.source, t.runID+"-"+strconv.Itoa(r.counter[t.runID]), o)
	}
	// Sent under the lock, so that the queue keeps the order the events were made in (the
	// appender never takes the lock: a full queue only slows the agent's side down).
	r.appendQ <- evs
}

// appender appends the queued events in order, taking whatever is queued as one batch. A
// transport error or a 5xx is retried with the same keys; a batch the server refuses is
// retried event by event so that only the refused event is lost (and reported).
func (r *Recorder) appender(ctx context.Context) {
	for evs := range r.appendQ {
	more:
		for len(evs) < 500 {
			select {
			case next, ok := <-r.appendQ:
				if !ok {
					break more
				}
				evs = append(evs, next...)
			default:
				break more
			}
		}
		if err := r.append(ctx, evs); err != nil {
			for _, e := range evs {
				if err := r.append(ctx, []contract.Event{e}); err != nil {
					r.logf("event %s (%s) was refused: %v", e.EventID, e.EventType, err)
				}
			}
		}
		if r.OnEvent != nil {
			r.OnEvent(evs)
		}
	}
}

func (r *Recorder) append(ctx context.Context, evs []contract.Event) error {
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		_, err := r.Client.AppendEvents(context.WithoutCancel(ctx), r.SessionID, evs, nil)
		var ae *api.Error
		if err == nil || (errors.As(err, &ae) && ae.Status < 500 && ae.Status != 0) {
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		r.logf("append: %v (retrying)", err)
		time.Sleep(backoff)
	}
}

// PromptBlocks turns a user message's parts into ACP content blocks: a part that is already a
// content block (an object with a type) as it is, a string as a text block, anything else as
// a text block holding its JSON.
func PromptBlocks(parts []contract.RawJSON) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(parts))
	for _, p := range parts {
		var obj struct {
			Type string `json:"type"`
		}
		var s string
		switch {
		case json.Unmarshal(p, &obj) == nil && obj.Type != "":
			out = append(out, json.RawMessage(p))
		case json.Unmarshal(p, &s) == nil:
			b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
			out = append(out, b)
		default:
			b, _ := json.Marshal(map[string]string{"type": "text", "text": string(p)})
			out = append(out, b)
		}
	}
	return out
}

func stamp(t time.Time) string { return contract.FormatTime(t) }
