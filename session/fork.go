package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// MaxInheritedMessages is the most messages a new thread inherits (the newest are kept).
const MaxInheritedMessages = 24

// forkSpec describes a new thread branched from a message of a source thread.
type forkSpec struct {
	origin        string // "fork", "edit-and-rerun" or "continuation": namespaces the ids
	fromSession   string // the session the request was sent to
	key           string // its idempotency key
	sourceThread  string
	sourceMessage string
	sourceRun     string
	inheritance   contract.Inheritance
	replacement   []contract.RawJSON // edit-and-rerun: the source message's new parts
	queueRun      bool               // edit-and-rerun: queue a new run in the new thread
	snapshot      contract.Snapshot  // the new thread's snapshot
	sourceFold    *Fold              // the caught-up projection of the source thread, if at hand
}

// forkResult is what a fork created.
type forkResult struct {
	thread       *store.Session
	lineage      contract.Lineage
	branch       contract.ActiveBranch
	appended     []store.AppendResult
	unavailable  []contract.UnavailableResource
	context      contract.InheritedContext
	alreadyExist bool // the thread existed: this repeats an earlier fork
}

func (f *forkSpec) hash(what string) string {
	h := sha256.Sum256([]byte(f.origin + "\x00" + f.fromSession + "\x00" + f.key + "\x00" + what))
	return hex.EncodeToString(h[:8])
}

// threadID is the new thread's id: derived from the request, so a repeated request finds the
// thread it created before instead of creating another.
func (f *forkSpec) threadID() string { return "S-" + f.hash("thread") }

// inherited is the state of the source thread at the fork point.
type inherited struct {
	messages []Message
	summary  string
	// all is every tool call, diff and artifact of the source, latest state at the fork
	// point; kept is those the new thread inherits.
	all, kept []resource
}

// resource is an inheritable item with the message it belongs to.
type resource struct {
	kind      string // attachment, tool-result, code-change
	messageID string
	event     contract.Event
}

// fork creates (or, for a repeated request, finishes) the new thread. A rejection is returned as
// *RejectError with the SOURCE_* codes; other errors are storage failures.
func (s *Service) fork(ctx context.Context, spec *forkSpec) (*forkResult, *RejectError, error) {
	src, err := s.st.GetSession(ctx, spec.sourceThread)
	if errors.Is(err, store.ErrSessionNotFound) {
		return nil, reject(contract.CodeSourceThreadNotFound, "source thread %q does not exist", spec.sourceThread), nil
	}
	if err != nil {
		return nil, nil, err
	}
	run, err := s.st.Run(ctx, spec.sourceThread, spec.sourceRun)
	if errors.Is(err, store.ErrRunNotFound) {
		return nil, reject(contract.CodeSourceRunNotFound, "run %q does not exist in thread %q", spec.sourceRun, spec.sourceThread), nil
	}
	if err != nil {
		return nil, nil, err
	}
	fold := spec.sourceFold
	if fold == nil {
		fold = NewFold(spec.sourceThread)
		if err := s.catchUp(ctx, spec.sourceThread, fold); err != nil {
			return nil, nil, err
		}
	}
	var msg *Message
	for i := range fold.t.Messages {
		if fold.t.Messages[i].MessageID == spec.sourceMessage {
			msg = &fold.t.Messages[i]
		}
	}
	if msg == nil {
		return nil, reject(contract.CodeSourceMessageNotFound, "message %q does not exist in thread %q", spec.sourceMessage, spec.sourceThread), nil
	}
	if run.SourceMessageID != msg.MessageID && msg.RunID != run.RunID {
		return nil, reject(contract.CodeSourceLineageInvalid, "message %q neither started run %q nor belongs to it (the run was started by %q)",
			msg.MessageID, run.RunID, run.SourceMessageID), nil
	}

	// The fork point is the last event that changed the source message: the new thread
	// inherits the source thread as it stood then.
	inh, err := s.inheritedAt(ctx, spec, msg.Sequence)
	if err != nil {
		return nil, nil, err
	}

	now := s.timestamp()
	res := &forkResult{lineage: contract.Lineage{ForkedFromThreadID: spec.sourceThread, ForkedFromMessageID: spec.sourceMessage, SourceRunID: spec.sourceRun}}
	branchRun := spec.sourceRun
	newRun := "run-" + spec.hash("run")
	if spec.queueRun {
		branchRun = newRun
	}
	id := spec.threadID()
	lin := res.lineage
	res.branch = contract.ActiveBranch{BranchID: "B-" + spec.hash("branch"), ThreadID: id, SourceMessageID: spec.sourceMessage,
		RunID: branchRun, Lineage: &lin, CreatedAt: now}
	rec := src.Record
	thread := &store.Session{
		Record: contract.SessionRecord{SchemaVersion: 1, SessionID: id, Project: rec.Project, AgentID: rec.AgentID, Role: rec.Role,
			Mode: rec.Mode, Status: contract.SessionStatusRunning, StartedAt: now, UpdatedAt: contract.Some(now)},
		Snapshot: spec.snapshot, Lineage: &lin, ActiveBranch: &res.branch, LastSequence: -1,
	}
	finishing := false // the thread exists already: look its events up before appending
	err = s.st.CreateSession(ctx, thread)
	if errors.Is(err, store.ErrSessionExists) {
		// A repeat of this request (or one interrupted by a crash): finish what it began.
		existing, gerr := s.st.GetSession(ctx, id)
		if gerr != nil {
			return nil, nil, gerr
		}
		if existing.Lineage == nil || *existing.Lineage != lin || existing.ActiveBranch == nil {
			return nil, nil, fmt.Errorf("fork: session %q exists but was not created by this request", id)
		}
		thread, res.branch, res.alreadyExist = existing, *existing.ActiveBranch, true
		finishing = true
	} else if err != nil {
		return nil, nil, fmt.Errorf("fork: create thread: %w", err)
	}
	res.thread = thread

	// The new thread's first events make the inherited context visible: the messages, then
	// the inherited tool calls, diffs and artifacts, the summary, and the queued run.
	var events []contract.Event
	n := 0
	add := func(eventType, runID, sourceMessageID string, p contract.Payload) {
		key := "fork-" + spec.hash("events") + fmt.Sprintf("-%d", n)
		n++
		events = append(events, contract.Event{Contract: "AgentSessionEvent", EventID: key, SessionID: id, RunID: runID,
			SourceMessageID: sourceMessageID, IdempotencyKey: key, OccurredAt: now, EventType: eventType, Payload: p})
	}
	ctxMsgs := make([]contract.InheritedMessage, 0, len(inh.messages))
	for _, m := range inh.messages {
		add("message", "", "", &contract.MessagePayload{MessageID: m.MessageID, Role: m.Role, Operation: "append", Parts: m.Parts, Status: "completed"})
		ctxMsgs = append(ctxMsgs, contract.InheritedMessage{MessageID: m.MessageID, Role: m.Role, Parts: m.Parts})
	}
	for _, r := range inh.kept {
		add(r.event.EventType, "", r.messageID, r.event.Payload)
	}
	if spec.queueRun {
		add("status", newRun, spec.sourceMessage, &contract.StatusPayload{Status: contract.RunStatusQueued})
	}
	res.unavailable = inh.unavailable(spec.inheritance)
	res.context = contract.InheritedContext{SourceThreadID: spec.sourceThread, SourceMessageID: spec.sourceMessage,
		SourceRunID: spec.sourceRun, Messages: ctxMsgs, Summary: inh.summary, UnavailableResources: res.unavailable, CapturedAt: now}
	for start := 0; start < len(events); start += store.MaxBatchEvents {
		end := min(start+store.MaxBatchEvents, len(events))
		batch := make([]*contract.EncodedEvent, 0, end-start)
		for i := start; i < end; i++ {
			enc, err := contract.EncodeEvent(&events[i])
			if err != nil {
				return nil, nil, fmt.Errorf("fork: inherited event %d is invalid: %w", i, err)
			}
			batch = append(batch, enc)
		}
		// Keys are derived from the request, so on a repeat these are duplicates. A repeat
		// runs at another time, so the same keys carry another occurredAt: look the stored
		// events up instead of appending again.
		if finishing {
			for _, e := range batch {
				se, err := s.st.EventByIdempotencyKey(ctx, id, e.IdempotencyKey)
				if errors.Is(err, store.ErrEventNotFound) {
					finishing = false // interrupted before this event: append from here
					break
				}
				if err != nil {
					return nil, nil, err
				}
				res.appended = append(res.appended, store.AppendResult{EventID: se.EventID, Sequence: se.Sequence, Duplicate: true})
			}
			if finishing {
				continue
			}
			res.appended = res.appended[:start]
		}
		out, err := s.st.Append(ctx, id, batch, store.AppendOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("fork: append inherited events: %w", err)
		}
		res.appended = append(res.appended, out...)
	}
	return res, nil, nil
}

// inheritedAt scans the source thread up to the fork point and picks what the new thread
// inherits. It reads only the events up to the fork point, and fully decodes only the events
// it keeps: the rest are looked at through the fast contract parser (ids and operation) or
// skipped by type.
func (s *Service) inheritedAt(ctx context.Context, spec *forkSpec, forkPoint int64) (*inherited, error) {
	runs, err := s.st.Runs(ctx, spec.sourceThread)
	if err != nil {
		return nil, err
	}
	runMessage := map[string]string{}
	for _, r := range runs {
		runMessage[r.RunID] = r.SourceMessageID
	}
	type scanned struct {
		kind, id, messageID string
		seq                 int64
		data                []byte
	}
	var (
		msgOrder  []string                // message ids in order of first appearance
		msgEvents = map[string][][]byte{} // message id -> its events since its last replace
		latest    = map[string]int{}      // kind+id -> index in items
		items     []scanned               // tool calls, diffs, artifacts, summaries: latest event each
	)
	after := int64(-1)
	for after < forkPoint {
		evs, err := s.st.ReadEvents(ctx, spec.sourceThread, after, int(min(forkPoint-after, 10000)))
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			break
		}
		for _, se := range evs {
			after = se.Sequence
			var kind, idField string
			switch se.EventType {
			case "message":
				kind, idField = "message", "messageId"
			case "tool":
				kind, idField = "tool-result", "toolCallId"
			case "diff":
				kind, idField = "code-change", "path"
			case "artifact":
				kind, idField = "attachment", "artifactId"
			case "summary":
				kind, idField = "summary", "summaryId"
			default:
				continue
			}
			v, err := contract.Parse(se.Data, contract.Limits{})
			if err != nil {
				return nil, fmt.Errorf("fork: stored event %d: %w", se.Sequence, err)
			}
			pl := v.Get("payload")
			id := pl.Get(idField).Str
			if kind == "message" {
				if _, seen := msgEvents[id]; !seen {
					msgOrder = append(msgOrder, id)
				}
				if op := pl.Get("operation"); op != nil && op.Str == "replace" {
					msgEvents[id] = nil
				}
				msgEvents[id] = append(msgEvents[id], se.Data)
				continue
			}
			mid := ""
			if m := v.Get("sourceMessageId"); m != nil {
				mid = m.Str
			}
			if mid == "" {
				mid = runMessage[se.RunID]
			}
			if mid == "" {
				mid = spec.sourceMessage
			}
			it := scanned{kind: kind, id: id, messageID: mid, seq: se.Sequence, data: se.Data}
			if i, ok := latest[kind+"\x00"+id]; ok {
				items[i] = it
			} else {
				latest[kind+"\x00"+id] = len(items)
				items = append(items, it)
			}
		}
	}

	inh := &inherited{}
	if spec.inheritance.Messages == "through-source-message" {
		// Messages through the source message; decode only the newest ones kept.
		var candidates []Message
		reached := false // walking back, past the messages that came after the source
		for i := len(msgOrder) - 1; i >= 0 && len(candidates) < MaxInheritedMessages; i-- {
			id := msgOrder[i]
			if reached = reached || id == spec.sourceMessage; !reached {
				continue
			}
			m := Message{MessageID: id}
			for _, data := range msgEvents[id] {
				var e contract.Event
				if err := json.Unmarshal(data, &e); err != nil {
					return nil, err
				}
				p := e.Payload.(*contract.MessagePayload)
				m.Role = p.Role
				if p.Operation == "replace" {
					m.Parts = append([]json.RawMessage(nil), p.Parts...)
				} else {
					m.Parts = append(m.Parts, p.Parts...)
				}
			}
			if id == spec.sourceMessage && spec.replacement != nil {
				m.Parts = spec.replacement
			}
			if (m.Role == "user" || m.Role == "assistant") && len(m.Parts) > 0 {
				candidates = append(candidates, m)
			}
		}
		for i := len(candidates) - 1; i >= 0; i-- {
			inh.messages = append(inh.messages, candidates[i])
		}
	}
	summarySeq := int64(-1)
	for _, it := range items {
		var e contract.Event
		if err := json.Unmarshal(it.data, &e); err != nil {
			return nil, err
		}
		if it.kind == "summary" {
			if p := e.Payload.(*contract.SummaryPayload); spec.inheritance.Summaries == "inherit" && p.Status == "completed" && !blank(p.Text) && it.seq > summarySeq {
				inh.summary, summarySeq = p.Text, it.seq // the most recent completed summary
			}
			continue
		}
		r := resource{kind: it.kind, messageID: it.messageID, event: e}
		inh.all = append(inh.all, r)
		if inherits(spec.inheritance, r.kind) && available(r) {
			inh.kept = append(inh.kept, r)
		}
	}
	return inh, nil
}

func blank(s string) bool {
	for _, r := range s {
		if r != ' ' && r != '\t' && r != '\n' && r != '\r' {
			return false
		}
	}
	return true
}

func inherits(in contract.Inheritance, kind string) bool {
	switch kind {
	case "attachment":
		return in.Attachments == "inherit"
	case "tool-result":
		return in.ToolResults == "inherit"
	case "code-change":
		return in.CodeChanges == "inherit"
	}
	return false
}

// available reports whether an inherited resource can be carried over: an attachment must be
// ready, a tool call finished.
func available(r resource) bool {
	switch p := r.event.Payload.(type) {
	case *contract.ArtifactPayload:
		return p.Status == "ready"
	case *contract.ToolPayload:
		return p.Status == "completed" || p.Status == "failed" || p.Status == "denied"
	}
	return true
}

// unavailable lists the resources of the source that the new thread does not get, and why.
func (inh *inherited) unavailable(in contract.Inheritance) []contract.UnavailableResource {
	out := []contract.UnavailableResource{}
	for _, r := range inh.all {
		switch {
		case !inherits(in, r.kind):
			out = append(out, contract.UnavailableResource{MessageID: r.messageID, Kind: r.kind, Reason: "excluded"})
		case !available(r):
			out = append(out, contract.UnavailableResource{MessageID: r.messageID, Kind: r.kind, Reason: "unavailable"})
		}
	}
	return out
}

func forkSpecFor(c *contract.Command, snapshot contract.Snapshot) *forkSpec {
	spec := &forkSpec{origin: c.CommandType, fromSession: c.SessionID, key: c.IdempotencyKey, snapshot: snapshot}
	switch p := c.Payload.(type) {
	case *contract.ForkCommand:
		spec.sourceThread, spec.sourceMessage, spec.sourceRun, spec.inheritance = p.SourceThreadID, p.SourceMessageID, p.SourceRunID, p.Inheritance
	case *contract.EditAndRerunCommand:
		spec.sourceThread, spec.sourceMessage, spec.sourceRun, spec.inheritance = p.SourceThreadID, p.SourceMessageID, p.SourceRunID, p.Inheritance
		spec.replacement, spec.queueRun = p.ReplacementParts, true
	}
	return spec
}

// executeFork runs a fork or edit-and-rerun command: the policy checks on the session the
// command was sent to (which is left as it was), then the new thread. A repeat of an accepted
// fork whose result was lost (a crash) finds the thread it began and finishes it.
func (s *Service) executeFork(ctx context.Context, sid string, c *contract.Command, l *sessionLock) (*contract.CommandResult, error) {
	st, err := s.load(ctx, sid, l.fold)
	if errors.Is(err, store.ErrSessionNotFound) {
		return s.rejected(c, StatusIdle, reject(contract.CodeSessionNotFound, "session %q does not exist", sid)), nil
	}
	if err != nil {
		return nil, fmt.Errorf("command %s: %w", c.CommandID, err)
	}
	spec := forkSpecFor(c, st.sess.Snapshot)
	if spec.sourceThread == sid {
		spec.sourceFold = l.fold
	}
	if _, err := s.st.GetSession(ctx, spec.threadID()); errors.Is(err, store.ErrSessionNotFound) {
		if _, _, _, rej := s.decide(ctx, st, c); rej != nil {
			return s.rejected(c, st.status(), rej), nil
		}
	} else if err != nil {
		return nil, err
	}
	fr, rej, err := s.fork(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("command %s: %w", c.CommandID, err)
	}
	if rej != nil {
		return s.rejected(c, st.status(), rej), nil
	}
	res := &contract.CommandResult{Contract: "AgentSessionCommandResult", CommandID: c.CommandID, SessionID: sid,
		RunID: fr.branch.RunID, IdempotencyKey: c.IdempotencyKey, Outcome: "accepted", SessionStatus: st.status(),
		ResultEventIDs: []string{}, Operation: &contract.Operation{Lineage: fr.lineage, ActiveBranch: fr.branch}, OccurredAt: s.timestamp()}
	for _, a := range fr.appended {
		res.ResultEventIDs = append(res.ResultEventIDs, a.EventID)
		seq := a.Sequence
		res.AcceptedSequence = &seq
	}
	return s.store(ctx, sid, c, res)
}

// Continue starts a new thread from a message of session id, as an
// AgentSessionContinuationRequest asks, and answers its AgentSessionContinuationResult. It is
// idempotent by the request's key: a repeat answers the same thread with duplicate true. A
// rejection (unknown session, message or run, or a message and run that do not belong
// together) is returned as *RejectError.
func (s *Service) Continue(ctx context.Context, id string, req *contract.ContinuationRequest) (*contract.ContinuationResult, error) {
	sess, err := s.st.GetSession(ctx, id)
	if errors.Is(err, store.ErrSessionNotFound) {
		return nil, reject(contract.CodeSourceThreadNotFound, "session %q does not exist", id)
	}
	if err != nil {
		return nil, err
	}
	// Under the session's lock, like a command: two requests with the same key in this process
	// take turns, and the second finds the thread the first created.
	l := s.lock(id)
	defer s.unlock(id, l)
	if err := s.catchUp(ctx, id, l.fold); err != nil {
		return nil, fmt.Errorf("continuation: %w", err)
	}
	spec := &forkSpec{origin: "continuation", fromSession: id, key: req.IdempotencyKey, sourceThread: id,
		sourceMessage: req.SourceMessageID, sourceRun: req.SourceRunID, inheritance: req.Inheritance, snapshot: sess.Snapshot,
		sourceFold: l.fold}
	fr, rej, err := s.fork(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("continuation: %w", err)
	}
	if rej != nil {
		return nil, rej
	}
	return &contract.ContinuationResult{IdempotencyKey: req.IdempotencyKey, ThreadID: fr.thread.Record.SessionID,
		Lineage: fr.lineage, Inheritance: req.Inheritance, UnavailableResources: fr.unavailable,
		Duplicate: fr.alreadyExist, CreatedAt: fr.thread.Record.StartedAt}, nil
}

// Limits of a lineage answer.
const (
	maxAncestors   = 1000
	maxDescendants = 10000
)

// LineageOf returns the chain of ancestors and the tree of descendants of a session, so that a
// UI can draw the tree. It returns store.ErrSessionNotFound for an unknown session.
func (s *Service) LineageOf(ctx context.Context, id string) (*Lineage, error) {
	sess, err := s.st.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &Lineage{SessionID: id, Lineage: sess.Lineage, ActiveBranch: sess.ActiveBranch, Ancestors: []LineageNode{}, Descendants: []LineageNode{}}
	seen := map[string]bool{id: true}
	for l := sess.Lineage; l != nil; {
		parent := l.ForkedFromThreadID
		if seen[parent] || len(out.Ancestors) >= maxAncestors {
			out.Truncated = true
			break
		}
		seen[parent] = true
		p, err := s.st.GetSession(ctx, parent)
		if errors.Is(err, store.ErrSessionNotFound) {
			out.Ancestors = append(out.Ancestors, LineageNode{SessionID: parent})
			break
		}
		if err != nil {
			return nil, err
		}
		out.Ancestors = append(out.Ancestors, LineageNode{SessionID: parent, Lineage: p.Lineage})
		l = p.Lineage
	}
	count := 0
	var children func(id string) ([]LineageNode, error)
	children = func(id string) ([]LineageNode, error) {
		nodes := []LineageNode{}
		after := ""
		for {
			page, next, err := s.st.ListSessions(ctx, store.ListFilter{ForkedFrom: id, After: after, Limit: 1000})
			if err != nil {
				return nil, err
			}
			for _, c := range page {
				cid := c.Record.SessionID
				if seen[cid] || count >= maxDescendants {
					out.Truncated = true
					continue
				}
				seen[cid] = true
				count++
				node := LineageNode{SessionID: cid, Lineage: c.Lineage}
				if node.Children, err = children(cid); err != nil {
					return nil, err
				}
				nodes = append(nodes, node)
			}
			if next == "" {
				return nodes, nil
			}
			after = next
		}
	}
	if out.Descendants, err = children(id); err != nil {
		return nil, err
	}
	return out, nil
}
