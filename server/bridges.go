package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/auth"
	"github.com/sessiond/sessiond/bridge"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
)

// The protocol bridges (docs/bridges.md): the Vercel AI SDK's UI message stream and AG-UI.
// The projection is package bridge's; these handlers decode the request, have the bridge
// service append what it stands for, and stream the run projected from the log.

// personStream is the rule of the bridges' POSTs: they are a person's client (they send a
// message that starts a run, answer approvals, stop) and answer with a long-lived stream, so
// they need the command scope and count as one of the key's streams.
var personStream = access{scope: auth.ScopeCommand, stream: true}

func (s *Server) bridgeRoutes() []route {
	return []route{
		{pattern: "POST /v1/sessions/{id}/chat", access: personStream, handle: s.handleChat, body: jsonBody},
		{pattern: "GET /v1/sessions/{id}/chat", access: readRoute, handle: s.handleChatHistory},
		{pattern: "GET /v1/sessions/{id}/chat/{chatId}/stream", access: access{scope: auth.ScopeRead, stream: true}, handle: s.handleChatResume},
		{pattern: "POST /v1/sessions/{id}/chat/stop", access: commandRoute, handle: s.handleChatStop},
		{pattern: "POST /v1/sessions/{id}/agui", access: personStream, handle: s.handleAGUI, body: jsonBody},
		{pattern: "GET /v1/sessions/{id}/agui/messages", access: readRoute, handle: s.handleAGUIMessages},
	}
}

// checkedRequest is a bridge request that checks itself against the session it is sent to.
type checkedRequest interface {
	Check(sessionID string) []bridge.Problem
}

// decodeChecked reads the body, decodes it strictly into v and checks it for session sid
// (what names it in a refusal). On a refusal it writes the error and answers false.
func (s *Server) decodeChecked(w http.ResponseWriter, r *http.Request, sid, what string, v checkedRequest) bool {
	body, aerr := s.readBody(w, r)
	if aerr == nil {
		aerr = decodeStrict(body, v)
	}
	if aerr != nil {
		writeError(w, aerr)
		return false
	}
	if probs := v.Check(sid); len(probs) > 0 {
		writeError(w, problemsError(what, probs))
		return false
	}
	return true
}

// decisions are the approvals a chat client answered, for the session's chat.
func decisions(ds []bridge.Decision) []session.ApprovalDecision {
	out := make([]session.ApprovalDecision, len(ds))
	for i, d := range ds {
		out[i] = session.ApprovalDecision{ApprovalID: d.ApprovalID, Approved: d.Approved, Reason: d.Reason}
	}
	return out
}

// scan reads the log of session sid after the sequence after, decoding each event for the
// bridges, until fn returns false or the log ends.
func (s *Server) scan(ctx context.Context, sid string, after int64, fn func(*bridge.Event) bool) error {
	for {
		evs, err := s.svc.Events(ctx, sid, after, streamBatch)
		if err != nil {
			return err
		}
		for _, se := range evs {
			e, err := bridge.Decode(se.Data)
			if err != nil {
				return fmt.Errorf("event %d: %w", se.Sequence, err)
			}
			if !fn(e) {
				return nil
			}
			after = se.Sequence
		}
		if len(evs) < streamBatch {
			return nil
		}
	}
}

func problemsError(what string, probs []bridge.Problem) *api.Error {
	ps := make([]contract.Problem, len(probs))
	for i, p := range probs {
		ps[i] = contract.Problem{Path: p.Path, Rule: "bridge", Layer: contract.LayerRule, Message: p.Message}
	}
	return validationError(what, ps)
}

// handleChat serves useChat's POST: a new user message queues a run, approvals answered in
// the client become approval commands; the answer is the run's UI message stream.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("id")
	major, ok := aiMajor(w, r)
	if !ok {
		return
	}
	var req bridge.ChatRequest
	if !s.decodeChecked(w, r, sid, "chat request", &req) {
		return
	}
	if probs := req.Unsupported(); len(probs) > 0 {
		e := problemsError("chat request", probs)
		e.Code = contract.CodeCommandNotSupported
		writeError(w, e)
		return
	}
	chat := s.svc.Chat()
	last := req.Messages[len(req.Messages)-1]
	var (
		runID      string
		after, cut int64
		err        error
	)
	if last.Role == "user" {
		parts := make([]contract.RawJSON, len(last.Parts))
		for i, p := range last.Parts {
			parts[i] = contract.RawJSON(p)
		}
		runID, after, err = chat.Submit(r.Context(), sid, last.ID, parts)
		cut = after
	} else {
		runID, cut, err = chat.Decide(r.Context(), sid, decisions(req.Approvals()))
		after = -1
	}
	if err != nil {
		writeError(w, apiError(err, sid))
		return
	}
	s.streamRun(w, r, sid, runID, after, cut, uiProtocol(runID, major))
}

// aiMajor reads the AI SDK major the client names in bridge.AIMajorHeader (6 without it); a
// value that is neither 6 nor 7 is refused, naming the header.
func aiMajor(w http.ResponseWriter, r *http.Request) (int, bool) {
	v := r.Header.Get(bridge.AIMajorHeader)
	major, ok := bridge.AIMajor(v)
	if !ok {
		writeError(w, api.Errorf(contract.CodeMalformed, "header %s is %q: it names the major version of the AI SDK the client runs, 6 (the default) or 7", bridge.AIMajorHeader, v))
	}
	return major, ok
}

// handleChatResume serves the AI SDK's reconnect: 204 without an active run, else the active
// run's stream replayed from its start, then live.
func (s *Server) handleChatResume(w http.ResponseWriter, r *http.Request) {
	sid, chat := r.PathValue("id"), r.PathValue("chatId")
	major, ok := aiMajor(w, r)
	if !ok {
		return
	}
	if chat != sid {
		writeError(w, api.Errorf(contract.CodeNotFound, "chat %q is not session %q: a session's chat id is the session's id; reconnect to /v1/sessions/%s/chat/%s/stream", chat, sid, sid, sid))
		return
	}
	run, err := s.svc.Chat().ActiveRun(r.Context(), sid)
	if err != nil {
		writeError(w, apiError(err, sid))
		return
	}
	if run == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.streamRun(w, r, sid, run.RunID, -1, -1, uiProtocol(run.RunID, major))
}

// handleChatHistory answers the chat's UIMessages folded from the log.
func (s *Server) handleChatHistory(w http.ResponseWriter, r *http.Request) {
	h := bridge.NewUIHistory()
	s.writeHistory(w, r, h.Apply, func() any { return h.Messages() })
}

// handleAGUIMessages answers the session's AG-UI messages folded from the log.
func (s *Server) handleAGUIMessages(w http.ResponseWriter, r *http.Request) {
	h := bridge.NewAGUIHistory()
	s.writeHistory(w, r, h.Apply, func() any { return h.Messages() })
}

// writeHistory folds the whole log of the request's session with apply and answers
// {"messages": messages()}: a session that does not exist is a 404, not an empty history.
func (s *Server) writeHistory(w http.ResponseWriter, r *http.Request, apply func(*bridge.Event), messages func() any) {
	sid := r.PathValue("id")
	if _, err := s.svc.LastSequence(r.Context(), sid); err != nil {
		writeError(w, apiError(err, sid))
		return
	}
	if err := s.scan(r.Context(), sid, -1, func(e *bridge.Event) bool {
		apply(e)
		return true
	}); err != nil {
		writeError(w, apiError(err, sid))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": messages()})
}

// handleChatStop stops the session's active run (the stop command) and answers its result.
func (s *Server) handleChatStop(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("id")
	res, err := s.svc.Chat().Stop(r.Context(), sid)
	if err != nil {
		writeError(w, apiError(err, sid))
		return
	}
	withRemedy(sid, "stop", res)
	status := http.StatusOK
	if res.Error != nil {
		status = api.HTTPStatus(res.Error.Code)
	}
	writeJSON(w, status, res)
}

// handleAGUI serves HttpAgent's POST (RunAgentInput): resume[] answers the pending approvals,
// a new user message queues a run; the answer is the run as AG-UI events, after RUN_STARTED
// and a MESSAGES_SNAPSHOT of the history.
func (s *Server) handleAGUI(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("id")
	var in bridge.RunAgentInput
	if !s.decodeChecked(w, r, sid, "RunAgentInput", &in) {
		return
	}
	ctx := r.Context()
	chat := s.svc.Chat()
	var (
		runID string
		cut   int64
		err   error
	)
	switch {
	case len(in.Resume) > 0:
		runID, cut, err = chat.Decide(ctx, sid, decisions(in.Decisions()))
	default:
		ids := make([]string, len(in.Messages))
		for i, m := range in.Messages {
			ids[i] = m.ID
		}
		known, kerr := s.svc.HasMessages(ctx, sid, ids)
		if kerr != nil {
			writeError(w, apiError(kerr, sid))
			return
		}
		var last *bridge.AGUIInMessage
		at := 0
		for i := range in.Messages {
			if m := &in.Messages[i]; m.Role == "user" && !known[i] {
				last, at = m, i
			}
		}
		if last != nil {
			parts, perr := last.Parts()
			if perr != nil {
				writeError(w, problemsError("RunAgentInput", []bridge.Problem{{Path: fmt.Sprintf("/messages/%d/content", at), Message: perr.Error()}}))
				return
			}
			var after int64
			runID, after, err = chat.Submit(ctx, sid, last.ID, parts)
			cut = after + 1 // the run's queued status: the snapshot has the message
			break
		}
		// Nothing new: follow the active run from now, or finish at once.
		run, rerr := chat.ActiveRun(ctx, sid)
		if rerr != nil {
			err = rerr
			break
		}
		if cut, err = s.svc.LastSequence(ctx, sid); err == nil && run != nil {
			runID = run.RunID
		}
	}
	if err != nil {
		writeError(w, apiError(err, sid))
		return
	}
	s.streamRun(w, r, sid, runID, -1, cut, aguiProtocol(bridge.AGUIRun{ThreadID: sid, RunID: in.RunID}))
}

// protocol is how a run's stream is written in one protocol.
type protocol struct {
	// header is an extra response header (name, value), or empty.
	header [2]string
	// observe sees every event up to the cut (history for a snapshot); may be nil.
	observe func(e *bridge.Event)
	// opening is sent once the events up to the cut are folded.
	opening func(b []byte) []byte
	// op writes one op.
	op func(b []byte, op *bridge.Op) []byte
	// closing ends the stream.
	closing string
}

func uiProtocol(runID string, major int) *protocol {
	return &protocol{
		header:  [2]string{bridge.UIStreamHeader, bridge.UIStreamVersion},
		opening: func(b []byte) []byte { return bridge.UIStart(b, runID) },
		op:      bridge.UIEncoder(major),
		closing: bridge.UIDone,
	}
}

func aguiProtocol(run bridge.AGUIRun) *protocol {
	h := bridge.NewAGUIHistory()
	return &protocol{
		observe: func(e *bridge.Event) { h.Apply(e) }, // only before the opening (events up to the cut)
		opening: func(b []byte) []byte {
			b = bridge.AGUIRunStarted(b, run)
			b = bridge.AGUISnapshot(b, h.Messages())
			h = nil // the history is in the snapshot: the rest of the stream does not keep it
			return b
		},
		op: func(b []byte, op *bridge.Op) []byte { return bridge.AppendAGUI(b, op, run) },
	}
}

// streamRun streams the run runID of session sid in protocol p: it reads the log after the
// sequence after, folds the events up to cut without sending them (the client has them),
// sends the opening, then the run's ops, live, until the run ends or waits for a person.
// Without a run (runID ""), it sends the opening and ends (AG-UI: RUN_FINISHED).
func (s *Server) streamRun(w http.ResponseWriter, r *http.Request, sid, runID string, after, cut int64, p *protocol) {
	ctx := r.Context()
	st := s.joinSession(sid)
	defer st.leave()
	sw := s.startSSE(w, r, p.header)
	defer sw.end()

	rt := &runTail{sessionTail: st, r: r, runID: runID, cursor: after, cut: cut, p: p, fold: bridge.NewFold(runID)}
	if runID == "" {
		if p.observe != nil {
			if err := s.scan(ctx, sid, after, func(e *bridge.Event) bool {
				p.observe(e)
				return true
			}); err != nil {
				if ctx.Err() == nil {
					sw.finalMessage(contract.CodeStreamFailed, fmt.Sprintf("reading the log failed: %v; reconnect", err))
				}
				return
			}
		}
		rt.open()
		rt.buf = p.op(rt.buf, &bridge.Op{Kind: bridge.OpRunCompleted})
		sw.flush(rt.finish().out)
		return
	}
	s.follow(ctx, sw, rt)
}

// runTail is the source of a bridge's run stream: the events of one run after a cursor,
// folded (bridge.Fold) into a protocol's stream. The events up to cut are folded without
// being sent (the client has them).
type runTail struct {
	*sessionTail
	r      *http.Request
	runID  string
	cursor int64
	cut    int64
	p      *protocol
	fold   *bridge.Fold
	opened bool
	// ended is the op that ended the run when the run ended at or before the cut: a tab that
	// joins as the run ends (its cut taken after the run's last status) is sent the end at
	// once, not left waiting for events the run will never have.
	ended   *bridge.Op
	buf     []byte
	scratch bridge.Event // the decoding of an event read from the store for this stream alone
}

func (t *runTail) position() int64 { return t.cursor }

// open sends the protocol's opening, once the events up to the cut are folded.
func (t *runTail) open() {
	if !t.opened {
		t.opened = true
		t.fold.Cut()
		t.buf = t.p.opening(t.buf)
	}
}

// finish ends the stream with what is pending and the protocol's closing.
func (t *runTail) finish() tailStep {
	return tailStep{out: append(t.buf, t.p.closing...), done: true}
}

func (t *runTail) next(ctx context.Context) (tailStep, error) {
	t.buf = t.buf[:0]
	v := t.view()
	// Recent events come from the ring of the live stream (encoded once for every
	// subscriber); older ones from the store.
	evs, live, err := t.events(ctx, v, t.cursor)
	if err != nil {
		return tailStep{}, fmt.Errorf("reading the log failed: %v; reconnect", err)
	}
	p := t.p
	for i, se := range evs {
		t.cursor = se.Sequence
		if !live && se.RunID != t.runID && (p.observe == nil || se.Sequence > t.cut) {
			continue // another run's, or a user's message: not in this run's stream
		}
		var e *bridge.Event
		if live {
			e, err = v.bridgeEvent(se)
		} else {
			// Read from the store for this stream alone: one Event for all of them.
			e, err = &t.scratch, t.scratch.Decode(se.Data)
		}
		if err != nil {
			return tailStep{final: api.Errorf(contract.CodeStreamFailed, "event %d: %v", se.Sequence, err)}, nil
		}
		if se.Sequence <= t.cut {
			if p.observe != nil {
				p.observe(e)
			}
			for _, op := range t.fold.Apply(e) {
				if op.Ends() && op.Kind != bridge.OpRunWaiting {
					// Copied: an op's strings may share the bytes of an event read for this
					// stream alone, which the next read reuses.
					t.ended = &bridge.Op{Kind: op.Kind, Text: strings.Clone(op.Text), Code: strings.Clone(op.Code)}
				}
			}
			continue
		}
		t.open()
		ops := t.fold.Apply(e)
		for j := range ops {
			op := &ops[j]
			if op.Kind == bridge.OpRunWaiting && (i < len(evs)-1 || !t.stillWaiting()) {
				continue // the approval was answered already: the run goes on, and so does the stream
			}
			t.buf = p.op(t.buf, op)
			if op.Ends() {
				return t.finish(), nil
			}
		}
	}
	if t.cursor >= t.cut && !t.opened {
		t.open()
		if t.ended != nil {
			t.buf = p.op(t.buf, t.ended)
			return t.finish(), nil
		}
		// A stream that starts while the run waits for a person (a reloaded tab) offers
		// what it waits for, as the stream that saw the run start waiting did.
		if pending := t.fold.Waiting(); pending != nil && t.stillWaiting() {
			t.buf = p.op(t.buf, &bridge.Op{Kind: bridge.OpRunWaiting, Approvals: pending})
			return t.finish(), nil
		}
	}
	return tailStep{out: t.buf, more: len(evs) == streamBatch, changed: v.changed}, nil
}

// stillWaiting reports whether the run is waiting for an approval now.
func (t *runTail) stillWaiting() bool {
	run, err := t.s.svc.Run(t.r.Context(), t.sid, t.runID)
	return err == nil && run.Status == contract.RunStatusWaitingApproval
}
