package server

import (
	"errors"
	"net/http"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
)

// maxStopWait bounds ?wait= on a stop command.
const maxStopWait = 5 * time.Minute

// handleCommand executes an AgentSessionCommand and answers its AgentSessionCommandResult:
// 200 when accepted or a duplicate, the error code's status when rejected or failed (the body
// is the result in every case). A document that breaks the contract is a 422 error instead.
func (s *Server) handleCommand(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var opt session.ExecOptions
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > maxStopWait {
			writeError(w, api.Errorf(contract.CodeMalformed, "wait=%s must be a duration from 0s to %s, e.g. 5s", quote(v), maxStopWait))
			return
		}
		opt.Wait = d
	}
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	cmd, err := contract.DecodeCommand(body, contract.Limits{})
	if err != nil {
		writeError(w, validationError("command", problemsOf(err)))
		return
	}
	res, err := s.svc.Execute(r.Context(), id, cmd, opt)
	outcome := "error"
	if err == nil {
		outcome = res.Outcome
	}
	s.opt.Metrics.command(cmd.CommandType, outcome)
	switch {
	case errors.Is(err, session.ErrSessionMismatch):
		writeError(w, api.Errorf(contract.CodeSessionMismatch, "the command's sessionId %q is not %q; send it to /v1/sessions/%s/commands", cmd.SessionID, id, cmd.SessionID))
		return
	case err != nil:
		writeError(w, apiError(err, id))
		return
	}
	withRemedy(id, cmd.CommandType, res)
	status := http.StatusOK
	if res.Error != nil {
		status = api.HTTPStatus(res.Error.Code)
	}
	writeJSON(w, status, res)
}

func (s *Server) handleView(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	vm, err := s.svc.View(r.Context(), id)
	if err != nil {
		writeError(w, apiError(err, id))
		return
	}
	writeJSON(w, http.StatusOK, vm)
}

func (s *Server) handleTranscript(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	t, err := s.svc.Transcript(r.Context(), id)
	if err != nil {
		writeError(w, apiError(err, id))
		return
	}
	writeJSON(w, http.StatusOK, t)
}

// handleContinuation starts a new thread from a message of the session, per an
// AgentSessionContinuationRequest, and answers the AgentSessionContinuationResult: 201 for a
// new thread, 200 for a repeat of the same request (duplicate true).
func (s *Server) handleContinuation(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var req contract.ContinuationRequest
	if err := contract.Decode(contract.KindContinuationRequest, body, contract.Limits{}, &req); err != nil {
		writeError(w, validationError("continuation request", problemsOf(err)))
		return
	}
	res, err := s.svc.Continue(r.Context(), id, &req)
	if err != nil {
		writeError(w, apiError(err, id))
		return
	}
	status := http.StatusCreated
	if res.Duplicate {
		status = http.StatusOK
	}
	writeJSON(w, status, res)
}

func (s *Server) handleLineage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	l, err := s.svc.LineageOf(r.Context(), id)
	if err != nil {
		writeError(w, apiError(err, id))
		return
	}
	writeJSON(w, http.StatusOK, l)
}
