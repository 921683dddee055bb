package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sessiond/sessiond/wire"

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

// storedOrigin is the origin of the events the fork copies into its new thread: a
// continuation's own, or a command's (fork, edit-and-rerun).
func (f *forkSpec) storedOrigin() Origin {
	if f.origin == "continuation" {
		return OriginContinuation
	}
	return OriginCommand
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
	messages []wire.Message
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
	src, msg, rej, err := s.forkSource(ctx, spec)
	if rej != nil || err != nil {
		return nil, rej, err
	}
	// The fork point is the last event that changed the source message: the new thread
	// inherits the source thread as it stood then.
	inh, err := s.inheritedAt(ctx, spec, msg.Sequence)
	if err != nil {
		return nil, nil, err
	}
	now := s.timestamp()
	res, finishing, err := s.createThread(ctx, spec, src, now)
	if err != nil {
		return nil, nil, err
	}
	events, ctxMsgs := spec.inheritedEvents(inh, now)
	res.unavailable = inh.unavailable(spec.inheritance)
	res.context = contract.InheritedContext{SourceThreadID: spec.sourceThread, SourceMessageID: spec.sourceMessage,
		SourceRunID: spec.sourceRun, Messages: ctxMsgs, Summary: inh.summary, UnavailableResources: res.unavailable, CapturedAt: now}
	if res.appended, err = s.appendInherited(ctx, spec.storedOrigin(), spec.threadID(), events, finishing); err != nil {
		return nil, nil, err
	}
	return res, nil, nil
}

// forkSource looks up the source thread and the caught-up state of its source message, and
// checks that the message and the source run belong together. A missing thread, run or
// message, or a message the run has nothing to do with, is a *RejectError.
func (s *Service) forkSource(ctx context.Context, spec *forkSpec) (*store.Session, *wire.Message, *RejectError, error) {
	src, err := s.visibleSession(ctx, spec.sourceThread)
	if errors.Is(err, store.ErrSessionNotFound) {
		return nil, nil, reject(contract.CodeSourceThreadNotFound, "source thread %q does not exist", spec.sourceThread), nil
	}
	if err != nil {
		return nil, nil, nil, err
	}
	run, err := s.st.Run(ctx, spec.sourceThread, spec.sourceRun)
	if errors.Is(err, store.ErrRunNotFound) {
		return nil, nil, reject(contract.CodeSourceRunNotFound, "run %q does not exist in thread %q", spec.sourceRun, spec.sourceThread), nil
	}
	if err != nil {
		return nil, nil, nil, err
	}
	fold := spec.sourceFold
	if fold == nil {
		fold = NewFold(spec.sourceThread)
		if err := s.catchUp(ctx, spec.sourceThread, fold); err != nil {
			return nil, nil, nil, err
		}
	}
	var msg *wire.Message
	for i := range fold.t.Messages {
		if fold.t.Messages[i].MessageID == spec.sourceMessage {
			msg = &fold.t.Messages[i]
		}
	}
	if msg == nil {
		return nil, nil, reject(contract.CodeSourceMessageNotFound, "message %q does not exist in thread %q", spec.sourceMessage, spec.sourceThread), nil
	}
	if run.SourceMessageID != msg.MessageID && msg.RunID != run.RunID {
		return nil, nil, reject(contract.CodeSourceLineageInvalid, "message %q neither started run %q nor belongs to it (the run was started by %q)",
			msg.MessageID, run.RunID, run.SourceMessageID), nil
	}
	return src, msg, nil, nil
}

// newRunID is the id of the run an edit-and-rerun queues in the new thread.
func (f *forkSpec) newRunID() string { return "run-" + f.hash("run") }

// createThread creates the new thread with its lineage and active branch, copying the source
// record's project, agent, role and mode. When the thread exists already (a repeat of this
// request, or one interrupted by a crash) it returns that thread and finishing true: its events
// must be looked up before anything is appended. A thread of that id that another request
// created is an error.
func (s *Service) createThread(ctx context.Context, spec *forkSpec, src *store.Session, now string) (res *forkResult, finishing bool, err error) {
	res = &forkResult{lineage: contract.Lineage{ForkedFromThreadID: spec.sourceThread, ForkedFromMessageID: spec.sourceMessage, SourceRunID: spec.sourceRun}}
	branchRun := spec.sourceRun
	if spec.queueRun {
		branchRun = spec.newRunID()
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
	err = s.st.CreateSession(ctx, thread)
	if errors.Is(err, store.ErrSessionExists) {
		// A repeat of this request (or one interrupted by a crash): finish what it began.
		existing, gerr := s.st.GetSession(ctx, id)
		if gerr != nil {
			return nil, false, gerr
		}
		if existing.Lineage == nil || *existing.Lineage != lin || existing.ActiveBranch == nil {
			return nil, false, fmt.Errorf("fork: session %q exists but was not created by this request", id)
		}
		thread, res.branch, res.alreadyExist = existing, *existing.ActiveBranch, true
		finishing = true
	} else if err != nil {
		return nil, false, fmt.Errorf("fork: create thread: %w", err)
	}
	res.thread = thread
	return res, finishing, nil
}

// inheritedEvents builds the new thread's first events, which make the inherited context
// visible: the messages, then the inherited tool calls, diffs and artifacts, and the queued
// run of an edit-and-rerun. Their ids and idempotency keys are derived from the request. It
// also returns the inherited messages as the inherited context lists them.
func (f *forkSpec) inheritedEvents(inh *inherited, now string) ([]contract.Event, []contract.InheritedMessage) {
	id := f.threadID()
	var events []contract.Event
	n := 0
	add := func(eventType, runID, sourceMessageID string, p contract.Payload) {
		key := "fork-" + f.hash("events") + fmt.Sprintf("-%d", n)
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
	if f.queueRun {
		add("status", f.newRunID(), f.sourceMessage, &contract.StatusPayload{Status: contract.RunStatusQueued})
	}
	return events, ctxMsgs
}

// appendInherited appends the new thread's first events in batches of at most
// store.MaxBatchEvents. When finishing a repeated fork, the batches already stored are looked
// up instead of appended again, up to the first batch with an event missing; from that batch
// on it appends.
func (s *Service) appendInherited(ctx context.Context, origin Origin, id string, events []contract.Event, finishing bool) ([]store.AppendResult, error) {
	var appended []store.AppendResult
	for start := 0; start < len(events); start += store.MaxBatchEvents {
		end := min(start+store.MaxBatchEvents, len(events))
		batch := make([]*contract.EncodedEvent, 0, end-start)
		for i := start; i < end; i++ {
			enc, err := contract.EncodeEvent(&events[i])
			if err != nil {
				return nil, fmt.Errorf("fork: inherited event %d is invalid: %w", i, err)
			}
			batch = append(batch, enc)
		}
		if finishing {
			stored, complete, err := s.storedBatch(ctx, id, batch)
			if err != nil {
				return nil, err
			}
			if complete {
				appended = append(appended, stored...)
				continue
			}
			finishing = false // interrupted before this batch was stored: append from here
		}
		out, err := s.append(ctx, origin, id, batch, store.AppendOptions{})
		if err != nil {
			return nil, fmt.Errorf("fork: append inherited events: %w", err)
		}
		appended = append(appended, out...)
	}
	return appended, nil
}

// storedBatch looks the events of batch up by their idempotency keys, as duplicates. Keys are
// derived from the request, so on a repeat these are duplicates; but a repeat runs at another
// time, so the same keys carry another occurredAt and cannot simply be appended again.
// complete is false when an event of the batch is not stored (the fork was interrupted before
// it).
func (s *Service) storedBatch(ctx context.Context, id string, batch []*contract.EncodedEvent) (out []store.AppendResult, complete bool, err error) {
	for _, e := range batch {
		se, err := s.st.EventByIdempotencyKey(ctx, id, e.IdempotencyKey)
		if errors.Is(err, store.ErrEventNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		out = append(out, store.AppendResult{EventID: se.EventID, Sequence: se.Sequence, Duplicate: true})
	}
	return out, true, nil
}

// scannedItem is the latest event of one inheritable item (tool call, diff, artifact or
// summary) of the source thread, found by inheritedAt's scan.
type scannedItem struct {
	kind, id, messageID string
	seq                 int64
	data                []byte
}

// sourceScan is what a scan of the source thread up to the fork point found.
type sourceScan struct {
	msgOrder  []string            // message ids in order of first appearance
	msgEvents map[string][][]byte // message id -> its events since its last replace
	latest    map[string]int      // kind+id -> index in items
	items     []scannedItem       // tool calls, diffs, artifacts, summaries: latest event each
}

// inheritedAt scans the source thread up to the fork point and picks what the new thread
// inherits. It reads only the events up to the fork point, and fully decodes only the events
// it keeps: the rest are looked at through the fast contract parser (ids and operation) or
// skipped by type.
func (s *Service) inheritedAt(ctx context.Context, spec *forkSpec, forkPoint int64) (*inherited, error) {
	sc, err := s.scanSource(ctx, spec, forkPoint)
	if err != nil {
		return nil, err
	}
	inh := &inherited{}
	if spec.inheritance.Messages == "through-source-message" {
		if inh.messages, err = sc.messagesThrough(spec); err != nil {
			return nil, err
		}
	}
	if err := inh.pick(spec, sc.items); err != nil {
		return nil, err
	}
	return inh, nil
}

// scanSource reads the source thread's events up to the fork point in pages and keeps, for each
// message, its events since its last replace, and for each other inheritable item its latest
// event. Each item is tied to a message: the event's sourceMessageId, else the message that
// started its run, else the fork's source message.
func (s *Service) scanSource(ctx context.Context, spec *forkSpec, forkPoint int64) (*sourceScan, error) {
	runs, err := s.st.Runs(ctx, spec.sourceThread)
	if err != nil {
		return nil, err
	}
	runMessage := map[string]string{}
	for _, r := range runs {
		runMessage[r.RunID] = r.SourceMessageID
	}
	sc := &sourceScan{msgEvents: map[string][][]byte{}, latest: map[string]int{}}
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
			kind, idField, ok := inheritableKind(se.EventType)
			if !ok {
				continue
			}
			v, err := contract.Parse(se.Data, contract.Limits{})
			if err != nil {
				return nil, fmt.Errorf("fork: stored event %d: %w", se.Sequence, err)
			}
			pl := v.Get("payload")
			id := pl.Get(idField).Str
			if kind == "message" {
				sc.addMessageEvent(id, pl, se.Data)
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
			sc.setLatest(scannedItem{kind: kind, id: id, messageID: mid, seq: se.Sequence, data: se.Data})
		}
	}
	return sc, nil
}

// inheritableKind maps an event type to the kind of item it describes and the payload field
// that holds the item's id; ok is false for the event types a fork does not inherit.
func inheritableKind(eventType string) (kind, idField string, ok bool) {
	switch eventType {
	case "message":
		return "message", "messageId", true
	case "tool":
		return "tool-result", "toolCallId", true
	case "diff":
		return "code-change", "path", true
	case "artifact":
		return "attachment", "artifactId", true
	case "summary":
		return "summary", "summaryId", true
	}
	return "", "", false
}

// addMessageEvent records a message event (pl is its payload): a replace drops the message's
// earlier events.
func (sc *sourceScan) addMessageEvent(id string, pl *contract.Value, data []byte) {
	if _, seen := sc.msgEvents[id]; !seen {
		sc.msgOrder = append(sc.msgOrder, id)
	}
	if op := pl.Get("operation"); op != nil && op.Str == "replace" {
		sc.msgEvents[id] = nil
	}
	sc.msgEvents[id] = append(sc.msgEvents[id], data)
}

// setLatest records it as the latest event of its item, in the place of the item's first event.
func (sc *sourceScan) setLatest(it scannedItem) {
	if i, ok := sc.latest[it.kind+"\x00"+it.id]; ok {
		sc.items[i] = it
	} else {
		sc.latest[it.kind+"\x00"+it.id] = len(sc.items)
		sc.items = append(sc.items, it)
	}
}

// messagesThrough returns the messages through the source message, oldest first: the newest
// MaxInheritedMessages user and assistant messages with parts. Only those it keeps are decoded.
// The source message gets the replacement parts of an edit-and-rerun.
func (sc *sourceScan) messagesThrough(spec *forkSpec) ([]wire.Message, error) {
	var candidates []wire.Message
	reached := false // walking back, past the messages that came after the source
	for i := len(sc.msgOrder) - 1; i >= 0 && len(candidates) < MaxInheritedMessages; i-- {
		id := sc.msgOrder[i]
		if reached = reached || id == spec.sourceMessage; !reached {
			continue
		}
		m, err := decodeMessage(id, sc.msgEvents[id])
		if err != nil {
			return nil, err
		}
		if id == spec.sourceMessage && spec.replacement != nil {
			m.Parts = spec.replacement
		}
		if (m.Role == "user" || m.Role == "assistant") && len(m.Parts) > 0 {
			candidates = append(candidates, m)
		}
	}
	var out []wire.Message
	for i := len(candidates) - 1; i >= 0; i-- {
		out = append(out, candidates[i])
	}
	return out, nil
}

// decodeMessage folds a message's stored events (since its last replace) into the message.
func decodeMessage(id string, events [][]byte) (wire.Message, error) {
	m := wire.Message{MessageID: id}
	for _, data := range events {
		var e contract.Event
		if err := json.Unmarshal(data, &e); err != nil {
			return wire.Message{}, err
		}
		p := e.Payload.(*contract.MessagePayload)
		m.Role = p.Role
		if p.Operation == "replace" {
			m.Parts = append([]json.RawMessage(nil), p.Parts...)
		} else {
			m.Parts = append(m.Parts, p.Parts...)
		}
	}
	return m, nil
}

// pick decodes the scanned items: the most recent completed, non-blank summary becomes the
// inherited summary (when summaries are inherited); every other item is listed in all, and
// kept when its kind is inherited and it is available.
func (inh *inherited) pick(spec *forkSpec, items []scannedItem) error {
	summarySeq := int64(-1)
	for _, it := range items {
		var e contract.Event
		if err := json.Unmarshal(it.data, &e); err != nil {
			return err
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
	return nil
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
	sess, err := s.visibleSession(ctx, id)
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
// UI can draw the tree. It returns store.ErrSessionNotFound for an unknown session. A session
// the caller may not see ([Permits]) is drawn as a missing one: an ancestor by its id only
// (the session's own lineage names it), a descendant not at all.
func (s *Service) LineageOf(ctx context.Context, id string) (*wire.Lineage, error) {
	sess, err := s.visibleSession(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &wire.Lineage{SessionID: id, Lineage: sess.Lineage, ActiveBranch: sess.ActiveBranch, Ancestors: []wire.LineageNode{}, Descendants: []wire.LineageNode{}}
	seen := map[string]bool{id: true}
	for l := sess.Lineage; l != nil; {
		parent := l.ForkedFromThreadID
		if seen[parent] || len(out.Ancestors) >= maxAncestors {
			out.Truncated = true
			break
		}
		seen[parent] = true
		p, err := s.visibleSession(ctx, parent)
		if errors.Is(err, store.ErrSessionNotFound) {
			out.Ancestors = append(out.Ancestors, wire.LineageNode{SessionID: parent})
			break
		}
		if err != nil {
			return nil, err
		}
		out.Ancestors = append(out.Ancestors, wire.LineageNode{SessionID: parent, Lineage: p.Lineage})
		l = p.Lineage
	}
	count := 0
	var children func(id string) ([]wire.LineageNode, error)
	children = func(id string) ([]wire.LineageNode, error) {
		nodes := []wire.LineageNode{}
		after := ""
		for {
			page, next, err := s.st.ListSessions(ctx, store.ListFilter{ForkedFrom: id, After: after, Limit: 1000})
			if err != nil {
				return nil, err
			}
			for _, c := range page {
				cid := c.Record.SessionID
				if !Permits(ctx, cid, c.Record.Project.Get()) {
					continue // as if it did not exist
				}
				if seen[cid] || count >= maxDescendants {
					out.Truncated = true
					continue
				}
				seen[cid] = true
				count++
				node := wire.LineageNode{SessionID: cid, Lineage: c.Lineage}
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
