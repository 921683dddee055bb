package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// Chat carries out what a chat client asks of a session through the protocol bridges (the
// AI SDK's useChat, AG-UI's HttpAgent): a user message that queues a run, approvals answered
// in the client, a stop of the active run. These are the native API's operations (an append,
// approval and stop commands) with ids derived from the client's ids, so the same request
// twice takes effect once. The projection of the log onto the clients' protocols is package
// bridge's; Chat only drives the session. Get one from [Service.Chat].
type Chat struct{ s *Service }

// Chat returns the operations of the session's chat clients on this service.
func (s *Service) Chat() *Chat { return &Chat{s: s} }

// ChatRunID is the id of the run a user message queues through a chat: derived from the
// message's id, so that the same request twice queues one run.
func ChatRunID(messageID string) string { return "run-" + messageID }

// ApprovalDecision is an approval answered in a chat client: the approval's id, the
// decision, and the person's reason (may be empty).
type ApprovalDecision struct {
	ApprovalID string
	Approved   bool
	Reason     string
}

// chatMessage returns the events a user message stands for: the message, and the run it
// queues (its source message is the message). Their ids and keys are derived from the
// message id, so appending them twice appends them once.
func chatMessage(sid, messageID string, parts []contract.RawJSON, now string) []contract.Event {
	return []contract.Event{
		{Contract: "AgentSessionEvent", EventID: "bridge-msg-" + messageID, SessionID: sid, IdempotencyKey: "bridge-msg-" + messageID,
			OccurredAt: now, EventType: "message",
			Payload: &contract.MessagePayload{MessageID: messageID, Role: "user", Operation: "append", Parts: parts}},
		{Contract: "AgentSessionEvent", EventID: "bridge-run-" + messageID, SessionID: sid, IdempotencyKey: "bridge-run-" + messageID,
			RunID: ChatRunID(messageID), SourceMessageID: messageID, OccurredAt: now, EventType: "status",
			Payload: &contract.StatusPayload{Status: contract.RunStatusQueued}},
	}
}

// Submit appends a user message and queues its run (idempotent by the message id), and
// returns the run's id and the sequence just before the run's first event (where its stream
// starts). Errors are the store's (an active run refuses a new one: *store.RunError), an
// *InvalidError for parts the contract refuses, or a *RejectError IDEMPOTENCY_CONFLICT for a
// message id the log has with other content.
func (c *Chat) Submit(ctx context.Context, sid, messageID string, parts []contract.RawJSON) (runID string, from int64, err error) {
	evs := chatMessage(sid, messageID, parts, c.s.timestamp())
	enc := make([]*contract.EncodedEvent, len(evs))
	for i := range evs {
		if enc[i], err = contract.EncodeEvent(&evs[i]); err != nil {
			var ve *contract.ValidationError
			if errors.As(err, &ve) {
				return "", 0, &InvalidError{What: "the message breaks the contract", Problems: ve.Problems}
			}
			return "", 0, err
		}
	}
	res, err := c.s.AppendWith(ctx, sid, enc, AppendParams{Origin: OriginBridge})
	var conf *store.ConflictError
	if errors.As(err, &conf) && conf.Index == 0 {
		// The same request again, at another time (occurredAt differs): the same message is a
		// duplicate; another message under the same id is refused.
		return c.submitted(ctx, sid, messageID, parts, conf)
	}
	if err != nil {
		return "", 0, err
	}
	return ChatRunID(messageID), res.Results[1].Sequence - 1, nil
}

// submitted answers a request whose message is in the log already: the run it queued then,
// when the message is the same, else a RejectError (the id was used for another message).
func (c *Chat) submitted(ctx context.Context, sid, messageID string, parts []contract.RawJSON, conf *store.ConflictError) (string, int64, error) {
	evs, err := c.s.Events(ctx, sid, conf.Existing-1, 2)
	if err != nil {
		return "", 0, err
	}
	same := len(evs) == 2 && evs[1].EventID == "bridge-run-"+messageID
	if same {
		e, err := decodeEvent(evs[0])
		if err != nil {
			return "", 0, fmt.Errorf("event %d: %w", evs[0].Sequence, err)
		}
		m, ok := e.Payload.(*contract.MessagePayload)
		same = ok && e.EventType == "message" && m.MessageID == messageID && m.Role == "user" && len(m.Parts) == len(parts)
		for i := 0; same && i < len(parts); i++ {
			same = compactJSON(m.Parts[i]) == compactJSON(parts[i])
		}
	}
	if !same {
		return "", 0, reject(contract.CodeIdempotencyConflict, "message %q is in the log with other content (sequence %d); give a new message an id of its own", messageID, conf.Existing)
	}
	return ChatRunID(messageID), conf.Existing, nil
}

// compactJSON is a JSON value without insignificant whitespace (the store keeps free values
// so).
func compactJSON(v []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return string(v)
	}
	return b.String()
}

// Decide answers approvals through approval commands (idempotent by the approval id) and
// returns the run they belong to and the sequence just before the last decision in the log:
// the stream that continues the run starts with that decision (and its reason), so that what
// a person decided reaches the stream as it reaches history. An approval already decided is
// answered from the log. A refused command is a *RejectError with the result's code.
func (c *Chat) Decide(ctx context.Context, sid string, ds []ApprovalDecision) (runID string, cut int64, err error) {
	cut = -1
	for _, d := range ds {
		run, seq, err := c.decide(ctx, sid, d)
		if err != nil {
			return "", 0, err
		}
		runID, cut = run, max(cut, seq)
	}
	return runID, cut, nil
}

func (c *Chat) decide(ctx context.Context, sid string, d ApprovalDecision) (string, int64, error) {
	decision := "rejected"
	if d.Approved {
		decision = "approved"
	}
	ref, found, err := c.s.Approval(ctx, sid, d.ApprovalID)
	if err != nil {
		return "", 0, err
	}
	if !found || !ref.Requested {
		return "", 0, reject(contract.CodeApprovalNotFound, "approval %q was never requested in session %q", d.ApprovalID, sid)
	}
	if ref.Decided >= 0 { // already decided
		return ref.RunID, ref.Decided - 1, nil
	}
	// The person answered what they saw, not a sequence: the command is judged at the log's
	// end (AtHead), however far the runtime has appended meanwhile.
	cmd := &contract.Command{Contract: "AgentSessionCommand", CommandID: "bridge-approval-" + d.ApprovalID, SessionID: sid, RunID: ref.RunID,
		IdempotencyKey: "bridge-approval-" + d.ApprovalID, IssuedAt: c.s.timestamp(), CommandType: "approval",
		Payload: &contract.ApprovalCommand{ApprovalID: d.ApprovalID, Decision: decision}}
	if strings.TrimSpace(d.Reason) != "" {
		cmd.Payload.(*contract.ApprovalCommand).Reason = d.Reason
	}
	res, err := c.s.Execute(ctx, sid, cmd, ExecOptions{AtHead: true})
	if err != nil {
		return "", 0, err
	}
	if res.Error != nil {
		return "", 0, &RejectError{Code: res.Error.Code, Message: res.Error.Message, Remedy: CommandRemedy(cmd.CommandType, res.Error)}
	}
	if res.AcceptedSequence != nil { // the last of the command's events (the decision first)
		return ref.RunID, *res.AcceptedSequence - int64(len(res.ResultEventIDs)), nil
	}
	now, ok, err := c.s.Approval(ctx, sid, d.ApprovalID)
	decided := int64(-1)
	if ok && now.Requested {
		decided = now.Decided
	}
	return ref.RunID, decided - 1, err
}

// Stop stops the session's active run (a stop command, idempotent by the run's id) and
// returns the command's result; a *RejectError ACTIVE_RUN_NOT_FOUND when no run is active.
func (c *Chat) Stop(ctx context.Context, sid string) (*contract.CommandResult, error) {
	run, err := c.ActiveRun(ctx, sid)
	if err != nil {
		return nil, err
	}
	if run == nil {
		return nil, reject(contract.CodeActiveRunNotFound, "session %q has no active run to stop", sid)
	}
	cmd := &contract.Command{Contract: "AgentSessionCommand", CommandID: "bridge-stop-" + run.RunID, SessionID: sid, RunID: run.RunID,
		IdempotencyKey: "bridge-stop-" + run.RunID, IssuedAt: c.s.timestamp(), CommandType: "stop",
		Payload: &contract.StopCommand{Reason: "stopped from the chat"}}
	return c.s.Execute(ctx, sid, cmd, ExecOptions{AtHead: true})
}

// ActiveRun returns the session's current run (contract.CurrentRun: the earliest run still
// active, with runs queued behind it waiting their turn) if it is active, else nil.
func (c *Chat) ActiveRun(ctx context.Context, sid string) (*contract.Run, error) {
	runs, err := c.s.Runs(ctx, sid)
	if err != nil {
		return nil, err
	}
	r := contract.CurrentRun(runs)
	if r == nil || contract.IsTerminal(r.Status) {
		return nil, nil
	}
	return r, nil
}
