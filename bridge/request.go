package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
)

// ChatRequest is the body useChat's DefaultChatTransport posts: the chat's id, its messages
// (UIMessages), and what triggered the request.
type ChatRequest struct {
	ID        string        `json:"id"`
	Messages  []ChatMessage `json:"messages"`
	Trigger   string        `json:"trigger"`
	MessageID string        `json:"messageId,omitempty"`
}

// ChatMessage is a UIMessage as the client sends it.
type ChatMessage struct {
	ID       string            `json:"id"`
	Role     string            `json:"role"`
	Parts    []json.RawMessage `json:"parts"`
	Metadata json.RawMessage   `json:"metadata,omitempty"`
}

// Problem is what is wrong with a request: the field (a JSON Pointer) and the rule it breaks.
type Problem struct {
	Path, Message string
}

// Check returns what is wrong with a chat request for the session sid (nil when nothing).
func (r *ChatRequest) Check(sid string) []Problem {
	var probs []Problem
	if r.ID != sid {
		probs = append(probs, Problem{"/id", fmt.Sprintf("the chat id %q is not the session's id %q: give useChat the session's id (useChat({id: %q, …}))", r.ID, sid, sid)})
	}
	switch r.Trigger {
	case "submit-message":
	case "regenerate-message": // well-formed, but asks for what sessiond does not do: Unsupported
	default:
		probs = append(probs, Problem{"/trigger", fmt.Sprintf("trigger %q must be submit-message", r.Trigger)})
	}
	if len(r.Messages) == 0 {
		return append(probs, Problem{"/messages", "must hold at least the new message"})
	}
	last := r.Messages[len(r.Messages)-1]
	p := fmt.Sprintf("/messages/%d", len(r.Messages)-1)
	switch last.Role {
	case "user":
		if len(last.Parts) == 0 {
			probs = append(probs, Problem{p + "/parts", "the new user message has no parts"})
		}
	case "assistant":
		if len(r.Approvals()) == 0 {
			probs = append(probs, Problem{p, "the last message is the assistant's but answers no approval (no part in state approval-responded)"})
		}
	default:
		probs = append(probs, Problem{p + "/role", fmt.Sprintf("role %q: the last message must be the user's new message, or the assistant's with approval responses", last.Role)})
	}
	if last.ID == "" {
		probs = append(probs, Problem{p + "/id", "must not be empty"})
	}
	return probs
}

// Unsupported returns what a well-formed chat request asks for that sessiond does not do
// (nil when nothing): regenerate() (trigger regenerate-message), since none of the contract's
// commands means "replace this answer".
func (r *ChatRequest) Unsupported() []Problem {
	if r.Trigger == "regenerate-message" {
		return []Problem{{"/trigger", "regenerate-message is not supported: no command replaces an answer; send the message again (a new run in the same chat), or send a command yourself (POST /v1/sessions/{id}/commands)"}}
	}
	return nil
}

// Decision is an approval answered in a client: the approval's id and the decision.
type Decision struct {
	ApprovalID string
	Approved   bool
	Reason     string
}

// Approvals returns the approvals the last (assistant) message answers: its tool parts in
// state approval-responded.
func (r *ChatRequest) Approvals() []Decision {
	if len(r.Messages) == 0 {
		return nil
	}
	var out []Decision
	for _, raw := range r.Messages[len(r.Messages)-1].Parts {
		var p struct {
			State    string `json:"state"`
			Approval *struct {
				ID       string `json:"id"`
				Approved *bool  `json:"approved"`
				Reason   string `json:"reason"`
			} `json:"approval"`
		}
		if json.Unmarshal(raw, &p) != nil || p.State != "approval-responded" || p.Approval == nil || p.Approval.ID == "" || p.Approval.Approved == nil {
			continue
		}
		out = append(out, Decision{ApprovalID: p.Approval.ID, Approved: *p.Approval.Approved, Reason: p.Approval.Reason})
	}
	return out
}

// RunAgentInput is the body AG-UI's HttpAgent posts.
type RunAgentInput struct {
	ThreadID        string            `json:"threadId"`
	RunID           string            `json:"runId"`
	ProtocolVersion string            `json:"protocolVersion,omitempty"`
	ParentRunID     string            `json:"parentRunId,omitempty"`
	State           json.RawMessage   `json:"state,omitempty"`
	Messages        []AGUIInMessage   `json:"messages"`
	Tools           []json.RawMessage `json:"tools,omitempty"`
	Context         []json.RawMessage `json:"context,omitempty"`
	ForwardedProps  json.RawMessage   `json:"forwardedProps,omitempty"`
	Resume          []ResumeEntry     `json:"resume,omitempty"`
}

// AGUIInMessage is an AG-UI message as a client sends it; only user messages are read (the
// others are the history the client already holds, which the log has).
type AGUIInMessage struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content,omitempty"`
}

// UnmarshalJSON reads id, role and content and ignores the rest of a message (tool calls,
// names, metadata of the messages the client echoes back).
func (m *AGUIInMessage) UnmarshalJSON(b []byte) error {
	var v struct {
		ID      string          `json:"id"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	m.ID, m.Role, m.Content = v.ID, v.Role, v.Content
	return nil
}

// ResumeEntry answers one interrupt (an approval) of the previous run.
type ResumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

// Check returns what is wrong with the input for the session sid (nil when nothing).
func (in *RunAgentInput) Check(sid string) []Problem {
	var probs []Problem
	if in.ThreadID != sid {
		probs = append(probs, Problem{"/threadId", fmt.Sprintf("the thread id %q is not the session's id %q: give HttpAgent threadId: %q", in.ThreadID, sid, sid)})
	}
	if in.RunID == "" {
		probs = append(probs, Problem{"/runId", "must not be empty"})
	}
	for i, m := range in.Messages {
		if m.ID == "" {
			probs = append(probs, Problem{fmt.Sprintf("/messages/%d/id", i), "must not be empty"})
		}
	}
	for i, r := range in.Resume {
		if r.InterruptID == "" {
			probs = append(probs, Problem{fmt.Sprintf("/resume/%d/interruptId", i), "must not be empty"})
		}
		if r.Status != "resolved" && r.Status != "cancelled" {
			probs = append(probs, Problem{fmt.Sprintf("/resume/%d/status", i), fmt.Sprintf("%q must be resolved or cancelled", r.Status)})
		}
	}
	return probs
}

// Decisions returns the approvals the resume entries answer: resolved is approved unless its
// payload says {"approved": false}; cancelled is rejected.
func (in *RunAgentInput) Decisions() []Decision {
	var out []Decision
	for _, r := range in.Resume {
		d := Decision{ApprovalID: r.InterruptID, Approved: r.Status == "resolved"}
		var p struct {
			Approved *bool  `json:"approved"`
			Reason   string `json:"reason"`
		}
		if len(r.Payload) > 0 && json.Unmarshal(r.Payload, &p) == nil {
			if p.Approved != nil && !*p.Approved {
				d.Approved = false
			}
			d.Reason = p.Reason
		}
		out = append(out, d)
	}
	return out
}

// Parts returns a user message's content as contract message parts: a string is one text
// part, content parts are kept as sent.
func (m *AGUIInMessage) Parts() ([]contract.RawJSON, error) {
	if len(m.Content) > 0 && m.Content[0] == '"' {
		var s string
		if err := json.Unmarshal(m.Content, &s); err != nil {
			return nil, err
		}
		return []contract.RawJSON{textPart(s)}, nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return nil, fmt.Errorf("content must be a string or an array of content parts")
	}
	out := make([]contract.RawJSON, len(parts))
	for i, p := range parts {
		out[i] = contract.RawJSON(p)
	}
	return out, nil
}

func textPart(s string) contract.RawJSON {
	return contract.RawJSON(append(contract.AppendString([]byte(`{"type":"text","text":`), s), '}'))
}

// RunIDFor is the id of the run a user message queues through a bridge: derived from the
// message's id, so that the same request twice queues one run.
func RunIDFor(messageID string) string { return "run-" + messageID }

// userMessage returns the events a user message stands for: the message, and the run it
// queues (its source message is the message). Their ids and keys are derived from the
// message id, so appending them twice appends them once.
func userMessage(sid, messageID string, parts []contract.RawJSON, now string) []contract.Event {
	return []contract.Event{
		{Contract: "AgentSessionEvent", EventID: "bridge-msg-" + messageID, SessionID: sid, IdempotencyKey: "bridge-msg-" + messageID,
			OccurredAt: now, EventType: "message",
			Payload: &contract.MessagePayload{MessageID: messageID, Role: "user", Operation: "append", Parts: parts}},
		{Contract: "AgentSessionEvent", EventID: "bridge-run-" + messageID, SessionID: sid, IdempotencyKey: "bridge-run-" + messageID,
			RunID: RunIDFor(messageID), SourceMessageID: messageID, OccurredAt: now, EventType: "status",
			Payload: &contract.StatusPayload{Status: contract.RunStatusQueued}},
	}
}

// RequestError is a request that cannot be carried out: a contract code and what to do.
type RequestError struct {
	Code     contract.ErrorCode
	Message  string
	Problems []contract.Problem
}

func (e *RequestError) Error() string { return string(e.Code) + ": " + e.Message }

// Service carries out the bridges' requests on the session service: the same operations as
// the native API, with ids derived from the clients' ids.
type Service struct {
	Svc *session.Service
	Now func() time.Time
}

func (s *Service) now() string { return contract.FormatTime(s.Now()) }

// Submit appends a user message and queues its run (idempotent by the message id), and
// returns the run's id and the sequence just before the run's first event (where its stream
// starts). Errors are the store's (an active run refuses a new one: *store.RunError) or a
// *RequestError for parts the contract refuses.
func (s *Service) Submit(ctx context.Context, sid, messageID string, parts []contract.RawJSON) (runID string, from int64, err error) {
	evs := userMessage(sid, messageID, parts, s.now())
	enc := make([]*contract.EncodedEvent, len(evs))
	for i := range evs {
		if enc[i], err = contract.EncodeEvent(&evs[i]); err != nil {
			var ve *contract.ValidationError
			if errors.As(err, &ve) {
				return "", 0, &RequestError{Code: contract.CodeContractViolation, Message: "the message breaks the contract", Problems: ve.Problems}
			}
			return "", 0, err
		}
	}
	res, err := s.Svc.AppendWith(ctx, sid, enc, session.AppendParams{Origin: session.OriginBridge})
	var conf *store.ConflictError
	if errors.As(err, &conf) && conf.Index == 0 {
		// The same request again, at another time (occurredAt differs): the same message is a
		// duplicate; another message under the same id is refused.
		return s.submitted(ctx, sid, messageID, parts, conf)
	}
	if err != nil {
		return "", 0, err
	}
	return RunIDFor(messageID), res.Results[1].Sequence - 1, nil
}

// submitted answers a request whose message is in the log already: the run it queued then,
// when the message is the same, else a RequestError (the id was used for another message).
func (s *Service) submitted(ctx context.Context, sid, messageID string, parts []contract.RawJSON, conf *store.ConflictError) (string, int64, error) {
	evs, err := s.Svc.Events(ctx, sid, conf.Existing-1, 2)
	if err != nil {
		return "", 0, err
	}
	same := len(evs) == 2 && evs[1].EventID == "bridge-run-"+messageID
	if same {
		e, err := Decode(evs[0].Data)
		if err != nil {
			return "", 0, err
		}
		same = e.Type == "message" && e.ID == messageID && e.Role == "user" && len(e.Parts) == len(parts)
		for i := 0; same && i < len(parts); i++ {
			same = compact(e.Parts[i]) == compact(parts[i])
		}
	}
	if !same {
		return "", 0, &RequestError{Code: contract.CodeIdempotencyConflict, Message: fmt.Sprintf("message %q is in the log with other content (sequence %d); give a new message an id of its own", messageID, conf.Existing)}
	}
	return RunIDFor(messageID), conf.Existing, nil
}

// Decide answers approvals through approval commands (idempotent by the approval id) and
// returns the run they belong to and the sequence just before the last decision in the log:
// the stream that continues the run starts with that decision (and its reason), so that what
// a person decided reaches the stream as it reaches history. An approval already decided is
// answered from the log.
func (s *Service) Decide(ctx context.Context, sid string, ds []Decision) (runID string, cut int64, err error) {
	cut = -1
	for _, d := range ds {
		run, seq, err := s.decide(ctx, sid, d)
		if err != nil {
			return "", 0, err
		}
		runID, cut = run, max(cut, seq)
	}
	return runID, cut, nil
}

func (s *Service) decide(ctx context.Context, sid string, d Decision) (string, int64, error) {
	decision := "rejected"
	if d.Approved {
		decision = "approved"
	}
	runID, seq, found, err := s.findApproval(ctx, sid, d.ApprovalID)
	if err != nil {
		return "", 0, err
	}
	if !found {
		return "", 0, &RequestError{Code: contract.CodeApprovalNotFound, Message: fmt.Sprintf("approval %q was never requested in session %q", d.ApprovalID, sid)}
	}
	if seq >= 0 { // already decided
		return runID, seq - 1, nil
	}
	for attempt := 0; attempt < 10; attempt++ {
		last, err := s.Svc.LastSequence(ctx, sid)
		if err != nil {
			return "", 0, err
		}
		c := &contract.Command{Contract: "AgentSessionCommand", CommandID: "bridge-approval-" + d.ApprovalID, SessionID: sid, RunID: runID,
			IdempotencyKey: "bridge-approval-" + d.ApprovalID, ExpectedSequence: last, IssuedAt: s.now(), CommandType: "approval",
			Payload: &contract.ApprovalCommand{ApprovalID: d.ApprovalID, Decision: decision}}
		if strings.TrimSpace(d.Reason) != "" {
			c.Payload.(*contract.ApprovalCommand).Reason = d.Reason
		}
		res, err := s.Svc.Execute(ctx, sid, c, session.ExecOptions{})
		if err != nil {
			return "", 0, err
		}
		if res.Error != nil {
			if res.Error.Code == contract.CodeSequenceConflict {
				continue
			}
			return "", 0, &RequestError{Code: res.Error.Code, Message: res.Error.Message}
		}
		if res.AcceptedSequence != nil { // the last of the command's events (the decision first)
			return runID, *res.AcceptedSequence - int64(len(res.ResultEventIDs)), nil
		}
		_, seq, _, err := s.findApproval(ctx, sid, d.ApprovalID)
		return runID, seq - 1, err
	}
	return "", 0, &RequestError{Code: contract.CodeCommandExecutionFailed, Message: "the session kept changing while the approval was applied; send it again"}
}

// findApproval finds the approval's request in the log: its run, and the sequence of its
// decision (-1 when undecided). The session's live projection knows where each approval
// stands, so this reads no more of the log than the projection has not seen yet.
func (s *Service) findApproval(ctx context.Context, sid, approvalID string) (runID string, decided int64, found bool, err error) {
	ref, ok, err := s.Svc.Approval(ctx, sid, approvalID)
	if err != nil || !ok || !ref.Requested {
		return "", -1, false, err
	}
	return ref.RunID, ref.Decided, true, nil
}

// Stop stops the session's active run (a stop command, idempotent by the run's id) and
// returns the command's result; a *RequestError when no run is active.
func (s *Service) Stop(ctx context.Context, sid string) (*contract.CommandResult, error) {
	run, err := s.ActiveRun(ctx, sid)
	if err != nil {
		return nil, err
	}
	if run == nil {
		return nil, &RequestError{Code: contract.CodeActiveRunNotFound, Message: fmt.Sprintf("session %q has no active run to stop", sid)}
	}
	last, err := s.Svc.LastSequence(ctx, sid)
	if err != nil {
		return nil, err
	}
	reason := "stopped from the chat"
	c := &contract.Command{Contract: "AgentSessionCommand", CommandID: "bridge-stop-" + run.RunID, SessionID: sid, RunID: run.RunID,
		IdempotencyKey: "bridge-stop-" + run.RunID, ExpectedSequence: last, IssuedAt: s.now(), CommandType: "stop",
		Payload: &contract.StopCommand{Reason: reason}}
	return s.Svc.Execute(ctx, sid, c, session.ExecOptions{})
}

// ActiveRun returns the session's current run (contract.CurrentRun: the earliest run still
// active, with runs queued behind it waiting their turn) if it is active, else nil.
func (s *Service) ActiveRun(ctx context.Context, sid string) (*contract.Run, error) {
	runs, err := s.Svc.Runs(ctx, sid)
	if err != nil {
		return nil, err
	}
	r := contract.CurrentRun(runs)
	if r == nil || contract.IsTerminal(r.Status) {
		return nil, nil
	}
	return r, nil
}

// Scan reads the log after the sequence after, decoding each event of the given types (all
// when none is given; the others are skipped undecoded), until fn returns false or the log
// ends.
func (s *Service) Scan(ctx context.Context, sid string, after int64, fn func(store.StoredEvent, *Event) bool, types ...string) error {
	for {
		evs, err := s.Svc.Events(ctx, sid, after, 512)
		if err != nil {
			return err
		}
		for _, se := range evs {
			if len(types) > 0 && !slices.Contains(types, se.EventType) {
				after = se.Sequence
				continue
			}
			e, err := Decode(se.Data)
			if err != nil {
				return err
			}
			if !fn(se, e) {
				return nil
			}
			after = se.Sequence
		}
		if len(evs) < 512 {
			return nil
		}
	}
}

// compact is a JSON value without insignificant whitespace (the store keeps free values so).
func compact(v []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return string(v)
	}
	return b.String()
}
