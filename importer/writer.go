package importer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

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
	// (one call at a time).
	Progress func(done, total int)
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

// Write writes the transcripts, parents before the continuations that branch from them, and
// returns what each became, in the order of ts. A transcript that fails is reported in the
// errors (and a continuation of it is written as a session of its own); the others are
// still written.
func (w *Writer) Write(ctx context.Context, ts []*Transcript) ([]SessionResult, []error) {
	byID := map[string]*Transcript{}
	for _, t := range ts {
		byID[t.SessionID] = t
	}
	total := 0
	for _, t := range ts {
		total += len(t.Events)
	}
	// Parents first: a transcript's depth is the length of its chain of parents in the set;
	// the transcripts of one depth are written Concurrency at a time (the store commits
	// concurrent appends together).
	levels := map[int][]int{}
	maxDepth := 0
	for i, t := range ts {
		d := w.depth(t, byID)
		levels[d] = append(levels[d], i)
		maxDepth = max(maxDepth, d)
	}
	conc := w.Concurrency
	if conc <= 0 {
		conc = DefaultConcurrency
	}
	var mu sync.Mutex
	written := map[string]string{} // transcript session id → the session it was written to
	results := make([]SessionResult, len(ts))
	failed := make([]error, len(ts))
	done := 0
	progress := func(n int) {
		mu.Lock()
		defer mu.Unlock()
		done += n
		if w.Progress != nil {
			w.Progress(done, total)
		}
	}
	for d := 0; d <= maxDepth; d++ {
		// The parents' sessions are all written: a snapshot of where for this level.
		mu.Lock()
		parents := maps.Clone(written)
		mu.Unlock()
		sem := make(chan struct{}, conc)
		var wg sync.WaitGroup
		for _, i := range levels[d] {
			wg.Add(1)
			sem <- struct{}{}
			go func(i int) {
				defer func() { <-sem; wg.Done() }()
				res, err := w.write(ctx, ts[i], byID, parents, progress)
				results[i] = res
				if err != nil {
					failed[i] = fmt.Errorf("session %s: %w", ts[i].SessionID, err)
					return
				}
				mu.Lock()
				written[ts[i].SessionID] = res.SessionID
				mu.Unlock()
			}(i)
		}
		wg.Wait()
	}
	var errs []error
	for _, err := range failed {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return results, errs
}

func (w *Writer) depth(t *Transcript, byID map[string]*Transcript) int {
	d := 0
	for p := t.Parent; p != nil && d <= len(byID); d++ {
		pt := byID[p.SessionID]
		if pt == nil {
			break
		}
		p = pt.Parent
	}
	return d
}

func (w *Writer) write(ctx context.Context, t *Transcript, byID map[string]*Transcript, written map[string]string, progress func(int)) (SessionResult, error) {
	res := SessionResult{Source: t.SessionID, SessionID: t.SessionID, Events: len(t.Events)}
	target := t.SessionID
	var parent *Transcript
	if t.Parent != nil {
		parent = byID[t.Parent.SessionID]
	}
	fp, forked := ForkPoint{}, false
	if parent != nil {
		fp, forked = parent.Forks[t.Parent.AgentID]
	}
	if forked && written[parent.SessionID] != "" {
		c, err := w.Client.Continue(ctx, written[parent.SessionID], &contract.ContinuationRequest{IdempotencyKey: "import:" + t.SessionID,
			SourceMessageID: fp.SourceMessageID, SourceRunID: fp.RunID,
			Inheritance: contract.Inheritance{Messages: "exclude", Attachments: "exclude", Summaries: "exclude", ToolResults: "exclude", CodeChanges: "exclude"}})
		if err != nil {
			return res, fmt.Errorf("continue from %s: %w", parent.SessionID, err)
		}
		target = c.ThreadID
		res.ContinuationOf = written[parent.SessionID]
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
	var body, next []byte // next: event i, encoded, when it did not fit the batch before
	for i := 0; i < len(t.Events); {
		body = body[:0]
		j := i
		for j < len(t.Events) && j-i < batch {
			b := next
			next = nil
			if b == nil {
				e := t.Events[j]
				e.SessionID = target
				var err error
				if b, err = contract.Marshal(e); err != nil {
					return res, fmt.Errorf("event %s: %w", e.EventID, err)
				}
			}
			if j > i && len(body)+len(b) > maxBatchBytes {
				next = b
				break
			}
			body = append(append(body, b...), '\n')
			j++
		}
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
