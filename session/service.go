package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// StatusIdle is the status the command result and the view model report for a session that has
// no run yet (the contract leaves this case open; docs/reference.md#session-record-status-and-run-status
// explains it).
const StatusIdle = contract.StatusIdle

// Service is the domain of sessiond: it executes commands, and keeps the transcript and the
// view model of each session as projections of its log. It is safe for concurrent use.
type Service struct {
	st  store.Store
	opt Options // the settings, defaults filled in (runtime.go)

	maint  maintainer // the background work (runtime.go)
	onPass func(Pass) // told of every pass of background work; nil: nobody

	queue queueSignal // wakes waiting claims (workers.go)

	stored StoredFunc // told of every event stored (OnStored); nil: nobody

	mu    sync.Mutex
	locks map[string]*sessionLock
	clock uint64 // counts unlocks, to find the least recently used projection
}

// sessionLock serialises the commands of one session inside this process and holds the
// session's live transcript projection, caught up from the log on use.
type sessionLock struct {
	mu   sync.Mutex
	fold *Fold
	refs int    // holders and waiters; guarded by Service.mu
	used uint64 // Service.clock at the last unlock; guarded by Service.mu
}

// New returns a service over st with the settings opt. Its background work (the sweeper, the
// lease expirer, retention) runs once Start is called; Close stops it.
func New(st store.Store, opt Options) *Service {
	return &Service{st: st, opt: opt.withDefaults(), locks: map[string]*sessionLock{}}
}

// now is the service's clock's time.
func (s *Service) now() time.Time { return s.opt.Clock.Now() }

func (s *Service) lock(id string) *sessionLock {
	s.mu.Lock()
	l := s.locks[id]
	if l == nil {
		l = &sessionLock{fold: NewFold(id)}
		s.locks[id] = l
	}
	l.refs++
	s.mu.Unlock()
	l.mu.Lock()
	return l
}

// maxCachedProjections bounds how many sessions keep their live projection in memory.
const maxCachedProjections = 256

// unlock releases the session. Its projection stays cached for the next use; past
// maxCachedProjections cached sessions, the least recently used idle one is dropped (it is
// rebuilt from the log on its next use).
func (s *Service) unlock(id string, l *sessionLock) {
	l.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	l.refs--
	s.clock++
	l.used = s.clock
	if len(s.locks) <= maxCachedProjections {
		return
	}
	var oldest string
	for k, c := range s.locks {
		if c.refs == 0 && (oldest == "" || c.used < s.locks[oldest].used) {
			oldest = k
		}
	}
	if oldest != "" {
		delete(s.locks, oldest)
	}
}

// catchUpPage is how many events catchUp reads at a time.
const catchUpPage = 10000

// catchUp applies every event after the fold's position. A long catch-up (more than one
// page) reads the next page on another goroutine while the fold applies the current one:
// reading and decoding are then done side by side.
func (s *Service) catchUp(ctx context.Context, id string, f *Fold) error {
	evs, err := s.st.ReadEvents(ctx, id, f.LastSequence(), catchUpPage)
	if err != nil {
		return err
	}
	if len(evs) < catchUpPage {
		return applyAll(f, evs)
	}
	type page struct {
		evs []store.StoredEvent
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the reader if the fold fails
	pages := make(chan page, 1)
	go func(after int64) {
		defer close(pages)
		for {
			p, err := s.st.ReadEvents(ctx, id, after, catchUpPage)
			select {
			case pages <- page{p, err}:
			case <-ctx.Done():
				return
			}
			if err != nil || len(p) < catchUpPage {
				return
			}
			after = p[len(p)-1].Sequence
		}
	}(evs[len(evs)-1].Sequence)
	if err := applyAll(f, evs); err != nil {
		return err
	}
	for p := range pages {
		if p.err != nil {
			return p.err
		}
		if err := applyAll(f, p.evs); err != nil {
			return err
		}
	}
	return nil
}

// applyAll applies events to the fold in order.
func applyAll(f *Fold, evs []store.StoredEvent) error {
	for _, e := range evs {
		if err := f.Apply(e); err != nil {
			return err
		}
	}
	return nil
}

// Transcript returns the folded state of a session's log (the live projection, caught up).
func (s *Service) Transcript(ctx context.Context, id string) (*Transcript, error) {
	var t Transcript
	if err := s.caughtUp(ctx, id, "transcript", func(f *Fold) { t = f.Transcript() }); err != nil {
		return nil, err
	}
	return &t, nil
}

// caughtUp runs fn on the session's live projection, caught up with its log; a failure to
// catch up is reported as what's.
func (s *Service) caughtUp(ctx context.Context, id, what string, fn func(f *Fold)) error {
	if _, err := s.st.GetSession(ctx, id); err != nil {
		return err
	}
	l := s.lock(id)
	defer s.unlock(id, l)
	if err := s.catchUp(ctx, id, l.fold); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	fn(l.fold)
	return nil
}

// Approval says where approval approvalID stands in the session's log, from the live
// projection (no scan of the log); ok is false when the log has no event of it.
func (s *Service) Approval(ctx context.Context, id, approvalID string) (ref ApprovalRef, ok bool, err error) {
	err = s.caughtUp(ctx, id, "approval", func(f *Fold) { ref, ok = f.approvalAt[approvalID] })
	return ref, ok, err
}

// HasMessages reports, for each of the message ids, whether the session's log has a message
// with that id, from the live projection (no scan of the log).
func (s *Service) HasMessages(ctx context.Context, id string, messageIDs []string) (has []bool, err error) {
	err = s.caughtUp(ctx, id, "messages", func(f *Fold) {
		has = make([]bool, len(messageIDs))
		for i, m := range messageIDs {
			_, has[i] = f.index[slotKey{"message", m}]
		}
	})
	return has, err
}

// Rebuild folds a session's whole log from scratch, ignoring the live projection.
func (s *Service) Rebuild(ctx context.Context, id string) (*Transcript, error) {
	f := NewFold(id)
	if err := s.catchUp(ctx, id, f); err != nil {
		return nil, err
	}
	t := f.Transcript()
	return &t, nil
}

// View returns the AgentSessionViewModel of a session: every event, the current run's status
// (StatusIdle before the first run), and resumable from the latest resume event.
func (s *Service) View(ctx context.Context, id string) (*contract.ViewModel, error) {
	sess, err := s.st.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	vm := &contract.ViewModel{SessionID: id, Snapshot: sess.Snapshot, Events: []contract.Event{}, LastSequence: -1,
		Lineage: sess.Lineage, ActiveBranch: sess.ActiveBranch, Status: StatusIdle}
	after := int64(-1)
	for {
		evs, err := s.st.ReadEvents(ctx, id, after, 10000)
		if err != nil {
			return nil, fmt.Errorf("view: %w", err)
		}
		for _, se := range evs {
			e, err := decodeEvent(se)
			if err != nil {
				return nil, fmt.Errorf("view: event %d: %w", se.Sequence, err)
			}
			if p, ok := e.Payload.(*contract.ResumePayload); ok {
				vm.Resumable = p.Resumable
			}
			vm.Events = append(vm.Events, e)
			after = se.Sequence
		}
		if len(evs) < 10000 {
			break
		}
	}
	vm.LastSequence = after
	runs, err := s.st.Runs(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("view: %w", err)
	}
	if len(runs) > 0 {
		vm.Status = contract.CurrentRun(runs).Status
	}
	return vm, nil
}

// commandEventKey is the deterministic eventId and idempotencyKey of the n-th event a command
// appends: a retried command produces the same ids, so the log cannot take its effect twice.
func commandEventKey(sessionID, key string, n int) string {
	h := sha256.Sum256([]byte(sessionID + "\x00" + key))
	return fmt.Sprintf("cmd-%s-%d", hex.EncodeToString(h[:12]), n)
}

// state is what a command is judged against, read under the session's lock.
type state struct {
	sess    *store.Session
	last    int64
	runs    []contract.Run
	current *contract.Run // the most recent run, nil before the first
	fold    *Fold
}

func (st *state) run(id string) *contract.Run {
	for i := range st.runs {
		if st.runs[i].RunID == id {
			return &st.runs[i]
		}
	}
	return nil
}

func (st *state) status() string {
	if st.current == nil {
		return StatusIdle
	}
	return st.current.Status
}

func (s *Service) load(ctx context.Context, id string, f *Fold) (*state, error) {
	sess, err := s.st.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	// The log first, then the runs: if an append lands in between, the runs are newer than
	// st.last, and the command's append (conditional on st.last) fails and is judged again.
	if err := s.catchUp(ctx, id, f); err != nil {
		return nil, err
	}
	runs, err := s.st.Runs(ctx, id)
	if err != nil {
		return nil, err
	}
	st := &state{sess: sess, last: f.LastSequence(), runs: runs, fold: f}
	if len(runs) > 0 {
		st.current = contract.CurrentRun(runs)
	}
	return st, nil
}

// ErrSessionMismatch is returned when a command's sessionId is not the session it was sent to.
var ErrSessionMismatch = errors.New("the command's sessionId is not the session it was sent to")
