package bridge

import (
	"encoding/json"
	"fmt"

	"github.com/sessiond/sessiond/contract"
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
