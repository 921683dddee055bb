package importer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
)

// DefaultBatch is how many events one append carries (the server takes at most 1000).
const DefaultBatch = 500

// maxBatchBytes bounds the canonical size of one append's events (the server's default body
// limit is 16 MiB).
const maxBatchBytes = 8 << 20

// Writer writes transcripts into sessiond through its HTTP API: it creates each session (a
// session that exists already is written into: a re-import finds every event a duplicate),
// or, for a sub-agent's transcript, a continuation of its parent's session, and appends the
// events in batches, each all or nothing.
type Writer struct {
	Client *client.Client
	// Batch is the number of events per append (default DefaultBatch).
	Batch int
	// Concurrency is how many sessions are written at once (default DefaultConcurrency).
	Concurrency int
	// Progress, if set, is told after each append how many events of how many are written
	// (one call at a time). The total is that of the transcripts known so far: all of them
	// for Write, those of the files read so far for Import (it grows while files are read).
	Progress func(done, total int)

	encodedBytes, encodedEvents atomic.Int64 // the bodies encoded so far (bodySize)
}

// DefaultConcurrency is how many sessions a Writer writes at once by default.
const DefaultConcurrency = 4

// Snapshot is the snapshot of an imported session: the work preset and the capabilities the
// imported events show (reasoning, plan, threadForking for sub-agents' continuations).
func Snapshot(model string) contract.Snapshot {
	yes := true
	if model == "" {
		model = "unknown-model"
	}
	return contract.Snapshot{Mode: "work", ModelID: model, Capabilities: contract.Capabilities{Text: &yes, Reasoning: &yes, Plan: &yes,
		Tools: &yes, MCP: &yes, Shell: &yes, FileChange: &yes, Usage: &yes, Diff: &yes, Terminal: &yes, ThreadForking: &yes, Summary: &yes}}
}

// Write writes the transcripts, each continuation after the session it branches from, and
// returns what each became, in the order of ts. A transcript that fails is reported in the
// errors (and a continuation of it is written as a session of its own); the others are
// still written.
func (w *Writer) Write(ctx context.Context, ts []*Transcript) ([]SessionResult, []error) {
	s := w.schedule(ctx)
	for _, t := range ts {
		s.expect(t)
	}
	results := make([]SessionResult, len(ts))
	failed := make([]error, len(ts))
	for i, t := range ts {
		s.add(&job{t: t, res: &results[i], err: &failed[i]})
	}
	s.finish()
	return results, compact(failed)
}

// compact returns the errors that are not nil, in order.
func compact(errs []error) []error {
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// scheduler writes transcripts as they come, Concurrency at a time (the store commits
// concurrent appends together): a transcript without a parent at once, a continuation as soon
// as the transcript it branches from is written (or has failed). A continuation whose parent
// has not come is held until finish, which writes it as a session of its own when its parent
// never came.
type scheduler struct {
	w   *Writer
	ctx context.Context
	sem chan struct{} // a token per transcript being written
	wg  sync.WaitGroup

	mu      sync.Mutex
	forks   map[string]map[string]ForkPoint // session id of each transcript added → its Forks
	done    map[string]bool                 // session ids written or failed
	written map[string]string               // transcript session id → the session it was written to
	waiting map[string][]*job               // parent session id → continuations waiting for it
	total   int                             // events of the transcripts expected
	events  int                             // events written
}

// job is one transcript to write and where its outcome goes.
type job struct {
	t   *Transcript
	res *SessionResult
	err *error
	// alone: written as a session of its own even if its parent is written (a continuation
	// in a cycle of parents, which has no first).
	alone bool
}

func (w *Writer) schedule(ctx context.Context) *scheduler {
	conc := w.Concurrency
	if conc <= 0 {
		conc = DefaultConcurrency
	}
	return &scheduler{w: w, ctx: ctx, sem: make(chan struct{}, conc), forks: map[string]map[string]ForkPoint{},
		done: map[string]bool{}, written: map[string]string{}, waiting: map[string][]*job{}}
}

// expect counts t's events in the total that progress reports.
func (s *scheduler) expect(t *Transcript) {
	s.mu.Lock()
	s.total += len(t.Events)
	s.mu.Unlock()
}

// add writes j's transcript now, or after its parent: it blocks while Concurrency
// transcripts are being written.
func (s *scheduler) add(j *job) {
	s.mu.Lock()
	s.forks[j.t.SessionID] = j.t.Forks
	p := j.t.Parent
	ready := p == nil || s.done[p.SessionID]
	if !ready {
		s.waiting[p.SessionID] = append(s.waiting[p.SessionID], j)
	}
	s.mu.Unlock()
	if ready {
		s.start(j)
	}
}

// start writes j in a goroutine of its own once a token is free; when it is done, the
// continuations waiting for it are started.
func (s *scheduler) start(j *job) {
	s.sem <- struct{}{}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var from *fork
		s.mu.Lock()
		if p := j.t.Parent; p != nil && !j.alone {
			if fp, ok := s.forks[p.SessionID][p.AgentID]; ok && s.written[p.SessionID] != "" {
				from = &fork{session: s.written[p.SessionID], source: p.SessionID, at: fp}
			}
		}
		s.mu.Unlock()
		res, err := s.w.write(s.ctx, j.t, from, s.progress)
		<-s.sem
		id := j.t.SessionID
		s.mu.Lock()
		*j.res = res
		if err != nil {
			*j.err = fmt.Errorf("session %s: %w", id, err)
		} else {
			s.written[id] = res.SessionID
		}
		s.done[id] = true
		next := s.waiting[id]
		delete(s.waiting, id)
		s.mu.Unlock()
		for _, k := range next {
			s.start(k)
		}
	}()
}

// progress counts n events written and tells the Writer's Progress.
func (s *scheduler) progress(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events += n
	if s.w.Progress != nil {
		s.w.Progress(s.events, s.total)
	}
}

// finish returns when every transcript added is written. The continuations still held are
// those whose parent never came: each becomes a session of its own (and its own
// continuations continue it); what is left after them waits in a cycle of parents, and is
// written as sessions of their own.
func (s *scheduler) finish() {
	for {
		s.wg.Wait()
		s.mu.Lock()
		var orphans []*job
		for pid, js := range s.waiting {
			if _, ok := s.forks[pid]; !ok {
				orphans = append(orphans, js...)
				delete(s.waiting, pid)
			}
		}
		if len(orphans) == 0 {
			break
		}
		s.mu.Unlock()
		for _, j := range orphans {
			s.start(j)
		}
	}
	var rest []*job
	for pid, js := range s.waiting {
		rest = append(rest, js...)
		delete(s.waiting, pid)
	}
	s.mu.Unlock()
	for _, j := range rest {
		j.alone = true
		s.start(j)
	}
	s.wg.Wait()
}

// fork is where a continuation branches from: the session its parent was written to, the
// parent transcript's session id, and the parent's run that called the sub-agent.
type fork struct {
	session, source string
	at              ForkPoint
}

func (w *Writer) write(ctx context.Context, t *Transcript, from *fork, progress func(int)) (SessionResult, error) {
	res := SessionResult{Source: t.SessionID, SessionID: t.SessionID, Events: len(t.Events)}
	target := t.SessionID
	if from != nil {
		c, err := w.Client.Continue(ctx, from.session, &contract.ContinuationRequest{IdempotencyKey: "import:" + t.SessionID,
			SourceMessageID: from.at.SourceMessageID, SourceRunID: from.at.RunID,
			Inheritance: contract.Inheritance{Messages: "exclude", Attachments: "exclude", Summaries: "exclude", ToolResults: "exclude", CodeChanges: "exclude"}})
		if err != nil {
			return res, fmt.Errorf("continue from %s: %w", from.source, err)
		}
		target = c.ThreadID
		res.ContinuationOf = from.session
	} else {
		req := api.CreateSessionRequest{SessionID: t.SessionID, AgentID: t.AgentID, Role: "implementer", Snapshot: Snapshot(t.ModelID)}
		if t.Project != "" {
			p := t.Project
			req.Project = &p
		}
		_, err := w.Client.CreateSession(ctx, req)
		var ae *api.Error
		if err != nil && !(errors.As(err, &ae) && ae.Code == contract.CodeSessionExists) {
			return res, fmt.Errorf("create: %w", err)
		}
	}
	res.SessionID = target
	batch := w.Batch
	if batch <= 0 || batch > 1000 {
		batch = DefaultBatch
	}
	// The events are encoded straight into the batch's body, each followed by its newline
	// (appendEvent; encoding/json for what it declines: the bytes contract.Marshal gives); one
	// that does not fit the batch is carried to the next.
	// The body starts at the size the Writer's bodies so far suggest for a batch (bodySize),
	// so that it does not grow (and copy itself) event by event.
	body := make([]byte, 0, w.bodySize(min(batch, len(t.Events))))
	var carry []byte // event i, encoded, when it did not fit the batch before
	var one bytes.Buffer
	enc := json.NewEncoder(&one)
	enc.SetEscapeHTML(false)
	for i := 0; i < len(t.Events); {
		body = append(body[:0], carry...)
		j := i
		if carry != nil {
			carry, j = nil, j+1
		}
		for j < len(t.Events) && j-i < batch {
			mark := len(body)
			e := t.Events[j]
			e.SessionID = target
			var ok bool
			if body, ok = appendEvent(body, &e); ok {
				body = append(body, '\n')
			} else {
				one.Reset()
				if err := enc.Encode(e); err != nil {
					return res, fmt.Errorf("event %s: %w", e.EventID, err)
				}
				body = append(body, one.Bytes()...)
			}
			if j > i && len(body)-1 > maxBatchBytes {
				carry = bytes.Clone(body[mark:])
				body = body[:mark]
				break
			}
			j++
		}
		w.sized(len(body), j-i)
		r, err := w.Client.AppendNDJSON(ctx, target, body, nil)
		if err != nil {
			return res, fmt.Errorf("append events %d–%d: %w", i, j-1, err)
		}
		for _, x := range r.Results {
			if x.Status == api.Duplicate {
				res.Duplicate++
			} else {
				res.Accepted++
			}
		}
		progress(j - i)
		i = j
	}
	return res, nil
}

// bodySize is the capacity to give the body of an append of n events: the bytes per event of
// the bodies the Writer has sent so far, with an eighth to spare, and at most maxBatchBytes and
// an eighth (64 KiB before the first body).
func (w *Writer) bodySize(n int) int {
	size, events := w.encodedBytes.Load(), w.encodedEvents.Load()
	if events == 0 {
		return 64 << 10
	}
	return min(int(size/events)*n*9/8, maxBatchBytes+maxBatchBytes/8)
}

// sized counts a body of size bytes and n events in the Writer's bytes per event.
func (w *Writer) sized(size, n int) {
	w.encodedBytes.Add(int64(size))
	w.encodedEvents.Add(int64(n))
}
