package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/auth"
	"github.com/sessiond/sessiond/bridge"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
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

func (s *Server) bridges() *bridge.Service { return &bridge.Service{Svc: s.svc, Now: s.svc.Now} }

// bridgeError maps what the bridge service returns to the API error.
func bridgeError(err error, sid string) *api.Error {
	var re *bridge.RequestError
	if errors.As(err, &re) {
		if len(re.Problems) > 0 {
			return validationError(re.Message, re.Problems)
		}
		return api.Errorf(re.Code, "%s", re.Message)
	}
	return storeError(err, sid)
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
	bs := s.bridges()
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
		runID, after, err = bs.Submit(r.Context(), sid, last.ID, parts)
		cut = after
	} else {
		runID, cut, err = bs.Decide(r.Context(), sid, req.Approvals())
		after = -1
	}
	if err != nil {
		writeError(w, bridgeError(err, sid))
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
		writeError(w, api.Errorf(api.CodeMalformed, "header %s is %q: it names the major version of the AI SDK the client runs, 6 (the default) or 7", bridge.AIMajorHeader, v))
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
		writeError(w, api.Errorf(api.CodeNotFound, "chat %q is not session %q: a session's chat id is the session's id; reconnect to /v1/sessions/%s/chat/%s/stream", chat, sid, sid, sid))
		return
	}
	run, err := s.bridges().ActiveRun(r.Context(), sid)
	if err != nil {
		writeError(w, storeError(err, sid))
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
		writeError(w, storeError(err, sid))
		return
	}
	if err := s.bridges().Scan(r.Context(), sid, -1, func(_ store.StoredEvent, e *bridge.Event) bool {
		apply(e)
		return true
	}); err != nil {
		writeError(w, storeError(err, sid))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": messages()})
}

// handleChatStop stops the session's active run (the stop command) and answers its result.
func (s *Server) handleChatStop(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("id")
	res, err := s.bridges().Stop(r.Context(), sid)
	if err != nil {
		writeError(w, bridgeError(err, sid))
		return
	}
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
	bs := s.bridges()
	var (
		runID string
		cut   int64
		err   error
	)
	switch {
	case len(in.Resume) > 0:
		runID, cut, err = bs.Decide(ctx, sid, in.Decisions())
	default:
		ids := make([]string, len(in.Messages))
		for i, m := range in.Messages {
			ids[i] = m.ID
		}
		known, kerr := s.svc.HasMessages(ctx, sid, ids)
		if kerr != nil {
			writeError(w, storeError(kerr, sid))
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
			runID, after, err = bs.Submit(ctx, sid, last.ID, parts)
			cut = after + 1 // the run's queued status: the snapshot has the message
			break
		}
		// Nothing new: follow the active run from now, or finish at once.
		run, rerr := bs.ActiveRun(ctx, sid)
		if rerr != nil {
			err = rerr
			break
		}
		if cut, err = s.svc.LastSequence(ctx, sid); err == nil && run != nil {
			runID = run.RunID
		}
	}
	if err != nil {
		writeError(w, bridgeError(err, sid))
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
	t := s.hub.join(sid)
	defer s.hub.leave(sid, t)
	s.opt.Metrics.subscriber(1)
	defer s.opt.Metrics.subscriber(-1)
	sw := s.startSSE(w, r, p.header)
	defer sw.end()

	fold := bridge.NewFold(runID)
	opened := false
	var buf []byte
	open := func() {
		if !opened {
			opened = true
			fold.Cut()
			buf = p.opening(buf)
		}
	}
	finish := func() {
		buf = append(buf, p.closing...)
		sw.flush(buf)
	}
	if runID == "" {
		if p.observe != nil {
			if err := s.bridges().Scan(ctx, sid, after, func(_ store.StoredEvent, e *bridge.Event) bool {
				p.observe(e)
				return true
			}); err != nil {
				if ctx.Err() == nil {
					sw.finalMessage(contract.CodeStreamFailed, fmt.Sprintf("reading the log failed: %v; reconnect", err))
				}
				return
			}
		}
		open()
		buf = p.op(buf, &bridge.Op{Kind: bridge.OpRunCompleted})
		finish()
		return
	}
	keepAlive := s.keepAliveTicker()
	defer keepAlive.Stop()
	cursor := after
	var ring []store.StoredEvent
	var scratch bridge.Event
	for {
		v := t.view.Load()
		// Recent events come from the ring of the live stream (encoded once for every
		// subscriber); older ones from the store.
		evs, ok := v.events(cursor, streamBatch, ring)
		ring = evs[:0]
		if !ok {
			var err error
			if evs, err = s.svc.Events(ctx, sid, cursor, streamBatch); err != nil {
				if ctx.Err() == nil {
					sw.finalMessage(contract.CodeStreamFailed, fmt.Sprintf("reading the log failed: %v; reconnect", err))
				}
				return
			}
		}
		for i, se := range evs {
			cursor = se.Sequence
			if !ok && se.RunID != runID && (p.observe == nil || se.Sequence > cut) {
				continue // another run's, or a user's message: not in this run's stream
			}
			var e *bridge.Event
			var err error
			if ok {
				e, err = v.bridgeEvent(se)
			} else {
				// Read from the store for this stream alone: one Event for all of them.
				e, err = &scratch, scratch.Decode(se.Data)
			}
			if err != nil {
				sw.finalMessage(contract.CodeStreamFailed, fmt.Sprintf("event %d: %v", se.Sequence, err))
				return
			}
			if se.Sequence <= cut {
				if p.observe != nil {
					p.observe(e)
				}
				fold.Apply(e)
				continue
			}
			open()
			ops := fold.Apply(e)
			for j := range ops {
				op := &ops[j]
				if op.Kind == bridge.OpRunWaiting && (i < len(evs)-1 || !s.stillWaiting(r, sid, runID)) {
					continue // the approval was answered already: the run goes on, and so does the stream
				}
				buf = p.op(buf, op)
				if op.Ends() {
					finish()
					return
				}
			}
		}
		if cursor >= cut && !opened {
			open()
			// A stream that starts while the run waits for a person (a reloaded tab) offers
			// what it waits for, as the stream that saw the run start waiting did.
			if pending := fold.Waiting(); pending != nil && s.stillWaiting(r, sid, runID) {
				buf = p.op(buf, &bridge.Op{Kind: bridge.OpRunWaiting, Approvals: pending})
				finish()
				return
			}
		}
		if len(buf) > 0 {
			if s.interrupted(sw, cursor) || !sw.flush(buf) {
				return
			}
			buf = buf[:0]
		}
		if len(evs) == streamBatch {
			continue
		}
		if !s.await(ctx, sw, v.changed, keepAlive.C, cursor) {
			return
		}
	}
}

// stillWaiting reports whether the run is waiting for an approval now.
func (s *Server) stillWaiting(r *http.Request, sid, runID string) bool {
	run, err := s.svc.Run(r.Context(), sid, runID)
	return err == nil && run.Status == contract.RunStatusWaitingApproval
}
