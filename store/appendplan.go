package store

import (
	"errors"
	"fmt"

	"github.com/sessiond/sessiond/contract"
)

// The append decision, made once for every driver.
//
// A driver's Append checks the batch (CheckBatch), takes the session's lock (or its writer's
// place), reads the log's last sequence and calls PlanAppend with an AppendLookup that answers
// from the log and the run table as they stand inside the appending transaction. The plan says
// everything the append does; the driver writes it (AppendPlan.Added, AppendPlan.Runs, the last
// sequence, and, when Added is not empty, the heartbeat and the command result of the options)
// or, on an error, writes nothing. PlanAppend does no I/O of its own and asks the lookup only
// what the decision needs, in batch order, so a driver can keep expensive lookups lazy.
//
// The rules, in the order they are applied:
//
//  1. The batch (CheckBatch, before any I/O): at most MaxBatchEvents events (*LimitError
//     "batch"), no nil event, every event's sessionId the session appended to
//     (*SessionMismatchError).
//  2. The precondition: when opts.ExpectedSequence is set and the log does not end there, the
//     answer is *SequenceConflictError — unless the batch is not empty and every event of it is
//     already stored with the same content under its idempotency key (a retried append that did
//     succeed), in which case every event is answered as a duplicate with its stored sequence
//     and nothing is written. An event repeating an earlier event of the batch with the same
//     content counts as a duplicate of it. Only keys are looked up here (StoredKey); eventIds,
//     sizes and runs are not checked, since nothing is written.
//  3. Otherwise, with opts.Interrupt set, the interrupt first: unless every event of the batch
//     is stored with the same content under its idempotency key (StoredKey: a retried request,
//     which stops nothing), Interrupt is called with the session's current run as stored (the
//     earliest created active run, AppendLookup.ActiveRuns) and its lease (AppendLookup.Lease),
//     and the events it returns are planned before the batch's, by the rules below but without
//     the lease check; the results answer them first, and an error's index names the batch's
//     event (an error on one of them says it was the interrupt's). Then each event in batch order; the next new event takes the sequence after the
//     last one taken (the log's last sequence + 1 for the first):
//     a. Within the batch: an event whose idempotency key an earlier event of the batch has is a
//     duplicate of it (same sequence) when its content is the same, else a *ConflictError
//     "idempotency-key" naming that earlier event's sequence; an event whose eventId an
//     earlier event of the batch has (under another key) is a *ConflictError "event-id".
//     b. Its canonical bytes with the sequence it would take (EncodedEvent.JSON) are at most
//     MaxEventBytes, else *LimitError "event".
//     c. Against the log (Stored): a stored event with its idempotency key makes it a duplicate
//     of that event when the content is the same, else a *ConflictError "idempotency-key";
//     otherwise a stored event with its eventId is a *ConflictError "event-id". The key
//     decides first, over the whole log; the eventId is only consulted when no stored event
//     has the key.
//     d. The lease (only when opts.Fence is set, for an event with a runId): the run's lease as
//     stored (AppendLookup.Lease) decides with CheckLease: a leased run takes the event only
//     when the append names its current lease (leaseId and fencing token), else *LeaseError
//     "required" (no lease given) or "lost" (another one); a lease given for a run that has
//     none (released, expired, ended, another run's) is "lost" too, unless the session does
//     not have the run yet (the batch may create it). With Fence.ExpiredBy the lease must also
//     have expired by then. Events without a runId are not checked.
//     e. The run projection, for a run status event (EncodedEvent.RunStatus): a run the
//     session does not have yet may be created only when no other run of the session is
//     active, or, with opts.Enqueue, when it is created queued (contract.CheckNewRun against
//     the earliest created run whose status is not terminal, as the batch leaves the runs so
//     far); the status is then applied with contract.ApplyRunStatus (legal transition, same
//     source message). A refusal is a *RunError with the event's index. A duplicate is never
//     applied again.
//     f. The event is accepted: its result carries its new sequence, it joins Added, and the
//     changed run joins Runs. A run write says whether the run is claimable, its attempt
//     (opts.Attempts for a run the batch creates, else 1) and whether it loses its lease
//     (terminal). A run is claimable when it is queued and no run created before it is still
//     active (a run enqueued behind another waits for it); when the batch ends a run, the
//     earliest active run left, if queued, joins Runs as claimable (unchanged otherwise).
//  4. Any error refuses the whole batch: nothing of it may be written and no sequence is
//     consumed. The errors are the bare typed errors above (drivers add "append to session
//     %q: "), or a lookup's own error passed through unchanged.
//
// Two consequences let a driver decide some appends without holding the session's lock through
// a round trip to its database (PostgreSQL does, see store/postgres):
//
//   - An unconditional batch (Unconditional: no run status event, no lease to check, no key or
//     eventId repeated within the batch, every event small enough at any sequence) is accepted
//     whole exactly when the session stores none of its idempotency keys and eventIds and, when
//     opts.ExpectedSequence is set, the log ends there: event i then takes last+1+i with the
//     bytes EncodedEvent.JSON(last+1+i), which AcceptAll answers. The driver may test those
//     conditions and write the batch in one statement, while it holds the lock, and need not
//     call PlanAppend.
//   - A plan that writes nothing (Added empty, or an error) rests on stored events, which
//     never change or go away, and on the log's last sequence: made from one consistent
//     snapshot of the log, without the lock, it is a correct answer as of that snapshot. A plan
//     that does add events must be made under the lock.
//
// Results are never nil: an empty batch that passes the precondition answers an empty slice.

// AppendLookup answers PlanAppend's questions about what the session already holds, as the
// appending transaction sees it (including what earlier appends of the same transaction wrote).
// Each method may return an error of the driver's own (a failed query); PlanAppend then stops
// and returns it unchanged.
type AppendLookup interface {
	// StoredKey returns the sequence and bytes of the stored event with the idempotency key.
	StoredKey(key string) (seq int64, data []byte, found bool, err error)
	// Stored looks up the event that would take sequence seq with the bytes data: the stored
	// event with its idempotency key (KeyFound), else the one with its eventId (IDFound). It
	// is called once per event the batch does not settle by itself, in batch order, right
	// before the event is accepted or the batch is refused: an event it finds in neither way
	// is in the plan's Added unless the plan fails (SQLite notes it here and inserts Added
	// once the plan has succeeded). A driver may also answer it by trying the insert; if the
	// plan then fails, the driver must discard what it wrote, as it discards everything of a
	// refused batch.
	Stored(ev *contract.EncodedEvent, seq int64, data []byte) (StoredMatch, error)
	// Run returns the session's stored run with that id.
	Run(runID string) (run StoredRun, found bool, err error)
	// ActiveRuns returns the session's stored runs whose status is not terminal (normally at
	// most one). It is called at most once per plan, when the batch creates its first run.
	ActiveRuns() ([]StoredRun, error)
	// Lease returns the lease held on the session's run now (nil when none is, or when there
	// is no such run). It is called only when opts.Fence is set, once per run.
	Lease(runID string) (*Lease, error)
}

// StoredMatch is what AppendLookup.Stored found.
type StoredMatch struct {
	// KeyFound: a stored event has the idempotency key; KeySeq and KeyData are its sequence and
	// bytes.
	KeyFound bool
	KeySeq   int64
	KeyData  []byte
	// IDFound: no stored event has the key, one has the eventId, at sequence IDSeq.
	IDFound bool
	IDSeq   int64
}

// StoredRun is a run as a driver stores it: the run and its creation order in the session.
type StoredRun struct {
	Run *contract.Run
	Ord int64
}

// RunWrite is a run an append changes, to be written with it.
type RunWrite struct {
	Run *contract.Run
	// Created is true when the append creates the run. Ord is then its position among the runs
	// the append creates (0, 1, ...), and the driver stores it after the session's existing
	// runs in that order; for a stored run Ord is its stored order, unchanged.
	Created bool
	Ord     int64
	// Attempt is the attempt number of a created run (opts.Attempts, default 1); 0 for a
	// stored run, whose attempt does not change.
	Attempt int
	// Queued is true when the run's status is queued: the run is claimable while it has no
	// lease. The driver records when it became queued, to hand runs out oldest first.
	Queued bool
	// EndsLease is true when the run's status is terminal: its lease, if any, is dropped.
	EndsLease bool
}

// AppendPlan is the decision PlanAppend takes for a batch.
type AppendPlan struct {
	// Results answer every event of the batch, in batch order.
	Results []AppendResult
	// Added are the events to insert, in sequence order, as readers will receive them.
	Added []StoredEvent
	// Runs are the runs to write, each once, in the order the batch first changed them.
	Runs []RunWrite
	// Last is the log's last sequence after the append.
	Last int64
}

// Claimable reports whether the plan makes a run claimable: a run queued with nothing active
// before it, or one that waited behind a run the batch ended (RunWrite.Queued).
func (p AppendPlan) Claimable() bool {
	for _, w := range p.Runs {
		if w.Queued {
			return true
		}
	}
	return false
}

// ClaimableRun returns the run of runs (a session's runs in creation order) that is claimable
// by the rule the append applies (RunWrite.Queued): the earliest created run still active
// (contract.CurrentRun), when it is queued; runs queued behind an active run wait. It returns
// nil when no run is claimable. A driver importing runs (ImportSession) marks this one alone.
func ClaimableRun(runs []contract.Run) *contract.Run {
	if cur := contract.CurrentRun(runs); cur != nil && cur.Status == contract.RunStatusQueued {
		return cur
	}
	return nil
}

// CheckBatch applies the batch rules every driver checks before any I/O: at most
// MaxBatchEvents events, none nil, each naming sessionID. The error says which session.
func CheckBatch(sessionID string, events []*contract.EncodedEvent) error {
	if len(events) > MaxBatchEvents {
		return fmt.Errorf("append to session %q: %w", sessionID, &LimitError{What: "batch", Limit: MaxBatchEvents, Got: len(events)})
	}
	for i, ev := range events {
		if ev == nil {
			return fmt.Errorf("append to session %q: event %d is nil", sessionID, i)
		}
		if ev.SessionID != sessionID {
			return fmt.Errorf("append to session %q: %w", sessionID, &SessionMismatchError{Index: i, SessionID: sessionID, EventSID: ev.SessionID})
		}
	}
	return nil
}

// maxSeqDigits is the length of the largest sequence in decimal (math.MaxInt64).
const maxSeqDigits = 19

// Unconditional reports whether the batch (checked by CheckBatch) is unconditional: PlanAppend
// accepts it whole, each event taking the next sequence, whenever the session stores none of
// its idempotency keys and eventIds and its log ends at opts.ExpectedSequence (when that is
// set), whatever else the session holds. That is: the batch is not empty, has no run status
// event (no run to check or write), no event with a runId when opts.Fence is set (the run's
// stored lease would decide, rule 3d), no idempotency key or eventId twice, and no event over
// MaxEventBytes with the longest sequence.
func Unconditional(events []*contract.EncodedEvent, opts AppendOptions) bool {
	if len(events) == 0 {
		return false
	}
	var keys, ids map[string]struct{}
	if len(events) > 1 {
		keys, ids = make(map[string]struct{}, len(events)), make(map[string]struct{}, len(events))
	}
	for _, ev := range events {
		if ev.RunStatus != nil || (opts.Fence != nil && ev.RunID != "") {
			return false
		}
		head, tail := ev.Around()
		if len(head)+maxSeqDigits+len(tail) > MaxEventBytes {
			return false
		}
		if keys == nil {
			continue
		}
		if _, dup := keys[ev.IdempotencyKey]; dup {
			return false
		}
		if _, dup := ids[ev.EventID]; dup {
			return false
		}
		keys[ev.IdempotencyKey], ids[ev.EventID] = struct{}{}, struct{}{}
	}
	return true
}

// AcceptAll returns the results PlanAppend gives an unconditional batch (Unconditional) when
// the session stores none of its keys and eventIds and its log ends at last: event i is new,
// at sequence last+1+i.
func AcceptAll(last int64, events []*contract.EncodedEvent) []AppendResult {
	out := make([]AppendResult, len(events))
	for i, ev := range events {
		out[i] = AppendResult{EventID: ev.EventID, Sequence: last + 1 + int64(i)}
	}
	return out
}

// PlanAppend decides the append of events (checked by CheckBatch) to the session sessionID
// whose log ends at last (-1 when empty), by the rules above, asking lk about the stored events
// and runs.
func PlanAppend(sessionID string, last int64, events []*contract.EncodedEvent, opts AppendOptions, lk AppendLookup) (AppendPlan, error) {
	p := planner{sid: sessionID, lk: lk, events: events, fence: opts.Fence, attempts: opts.Attempts, enqueue: opts.Enqueue}
	if exp := opts.ExpectedSequence; exp != nil && *exp != last {
		datas := p.begin()
		if err := p.allDuplicates(datas, &SequenceConflictError{SessionID: sessionID, Expected: *exp, Actual: last}); err != nil {
			return AppendPlan{}, err
		}
		return AppendPlan{Results: p.results, Last: last}, nil
	}
	if opts.Interrupt != nil {
		stops, err := p.interrupt(opts.Interrupt)
		if err != nil {
			return AppendPlan{}, err
		}
		if len(stops) > 0 {
			p.events = append(stops[:len(stops):len(stops)], events...)
			p.unfenced = len(stops)
		}
	}
	// datas stays out of the planner, whose contents escape through the lookup: a batch of one
	// then keeps it on the stack.
	datas := p.begin()
	next := last + 1
	for i, ev := range p.events {
		added, err := p.event(i, ev, next, datas)
		if err != nil {
			return AppendPlan{}, p.requestIndex(err)
		}
		if added {
			next++
		}
	}
	runs, err := p.runWrites()
	if err != nil {
		return AppendPlan{}, err
	}
	return AppendPlan{Results: p.results, Added: p.added, Runs: runs, Last: next - 1}, nil
}

// begin sizes the plan's results and batch indexes for p.events and returns the slice of
// their bytes.
func (p *planner) begin() [][]byte {
	n := len(p.events)
	p.results = make([]AppendResult, n)
	if n > 1 {
		p.byKey = make(map[string]int, n)
		p.byID = make(map[string]int, n)
	}
	return make([][]byte, n)
}

// interrupt returns the events that stop the session's current run before the batch
// (AppendOptions.Interrupt): none when every event of the batch is stored with the same
// content under its idempotency key (a retried request is answered from the log and stops
// nothing, whatever run is current now), else what stop says for the current run as this
// transaction sees it, so that racing interrupts each see the stops of those that committed
// before them.
func (p *planner) interrupt(stop func(*contract.Run, *Lease) ([]*contract.EncodedEvent, error)) ([]*contract.EncodedEvent, error) {
	if len(p.events) == 0 {
		return nil, nil
	}
	retried := true
	for _, ev := range p.events {
		_, data, found, err := p.lk.StoredKey(ev.IdempotencyKey)
		if err != nil {
			return nil, err
		}
		if !found || !ev.SameContent(data) {
			retried = false
			break
		}
	}
	if retried {
		return nil, nil
	}
	if err := p.loadActive(); err != nil {
		return nil, err
	}
	var (
		cur  *contract.Run
		held *Lease
	)
	if pr := p.earliestActivePlan(); pr != nil {
		cur = pr.run
		var err error
		if held, err = p.lease(cur.RunID); err != nil {
			return nil, err
		}
	}
	stops, err := stop(cur, held)
	if err != nil {
		return nil, err
	}
	for i, ev := range stops {
		if ev == nil || ev.SessionID != p.sid {
			return nil, fmt.Errorf("the interrupt's event %d does not belong to session %q", i, p.sid)
		}
	}
	return stops, nil
}

// requestIndex makes the batch position an error names a position among the caller's events,
// when the plan added events of an interrupt before them (AppendOptions.Interrupt). A refusal
// of one of those (a bug: they are built from the run as stored) says so.
func (p *planner) requestIndex(err error) error {
	n := p.unfenced
	if n == 0 {
		return err
	}
	var (
		conf *ConflictError
		lim  *LimitError
		run  *RunError
		ls   *LeaseError
		idx  *int
	)
	switch {
	case errors.As(err, &conf):
		idx = &conf.Index
	case errors.As(err, &lim) && lim.What == "event":
		idx = &lim.Index
	case errors.As(err, &run):
		idx = &run.Index
	case errors.As(err, &ls):
		idx = &ls.Index
	}
	if idx == nil {
		return err
	}
	if *idx < n {
		return fmt.Errorf("the interrupt's stop of the current run was refused: %w", err)
	}
	*idx -= n
	return err
}

// planner holds a plan in the making.
type planner struct {
	sid    string
	lk     AppendLookup
	events []*contract.EncodedEvent

	results []AppendResult
	byKey   map[string]int
	byID    map[string]int // within the batch; nil for a batch of one
	added   []StoredEvent

	fence        *Fence              // opts.Fence
	unfenced     int                 // the interrupt's events at the start of events (unfenced)
	enqueue      bool                // opts.Enqueue
	attempts     map[string]int      // opts.Attempts
	leaseRun     string              // the first run whose lease was looked up (rule 3d)
	leaseHeld    *Lease              // its lease (nil: none held)
	leases       map[string]*Lease   // the leases of the other runs looked up: most batches name one run
	runs         map[string]*planRun // the runs the batch has looked at, as it leaves them
	active       map[string]*planRun // those of runs whose status is not terminal
	activeLoaded bool                // the stored active runs are in runs
	changed      []*planRun          // the runs the batch changed, in order
	created      int64               // runs created so far
}

// planRun is a run as the batch leaves it.
type planRun struct {
	run     *contract.Run
	ord     int64
	created bool // created by the batch: ord counts the batch's creations, after every stored run
	changed bool
}

// allDuplicates answers the batch as duplicates when every event is stored with the same
// content (rule 2), else returns conflict. datas[i] is set to the stored bytes event i matched.
func (p *planner) allDuplicates(datas [][]byte, conflict *SequenceConflictError) error {
	if len(p.events) == 0 {
		return conflict
	}
	for i, ev := range p.events {
		if j, ok := p.byKey[ev.IdempotencyKey]; ok && ev.SameContent(datas[j]) {
			p.duplicate(i, p.results[j].Sequence)
			datas[i] = datas[j]
			continue
		}
		seq, data, found, err := p.lk.StoredKey(ev.IdempotencyKey)
		if err != nil {
			return err
		}
		if !found || !ev.SameContent(data) {
			return conflict
		}
		p.duplicate(i, seq)
		datas[i] = data
		if p.byKey != nil {
			p.byKey[ev.IdempotencyKey] = i
		}
	}
	return nil
}

// event decides event i, which would take sequence next (rule 3); added says it took it.
// datas[i] is set to the bytes event i was stored or matched with.
func (p *planner) event(i int, ev *contract.EncodedEvent, next int64, datas [][]byte) (added bool, err error) {
	if p.byKey != nil {
		if j, ok := p.byKey[ev.IdempotencyKey]; ok {
			if !ev.SameContent(datas[j]) {
				return false, conflict(i, ev, ConflictIdempotencyKey, p.results[j].Sequence)
			}
			p.duplicate(i, p.results[j].Sequence)
			datas[i] = datas[j]
			return false, nil
		}
		if j, ok := p.byID[ev.EventID]; ok {
			return false, conflict(i, ev, ConflictEventID, p.results[j].Sequence)
		}
		p.byKey[ev.IdempotencyKey] = i
		p.byID[ev.EventID] = i
	}
	data := ev.JSON(next)
	if len(data) > MaxEventBytes {
		return false, &LimitError{What: "event", Index: i, Limit: MaxEventBytes, Got: len(data)}
	}
	m, err := p.lk.Stored(ev, next, data)
	switch {
	case err != nil:
		return false, err
	case m.KeyFound && !ev.SameContent(m.KeyData):
		return false, conflict(i, ev, ConflictIdempotencyKey, m.KeySeq)
	case m.KeyFound:
		p.duplicate(i, m.KeySeq)
		datas[i] = m.KeyData
		return false, nil
	case m.IDFound:
		return false, conflict(i, ev, ConflictEventID, m.IDSeq)
	}
	if p.fence != nil && ev.RunID != "" && i >= p.unfenced {
		if err := p.checkLease(i, ev.RunID); err != nil {
			return false, err
		}
	}
	if ev.RunStatus != nil {
		if err := p.applyRun(i, ev.RunStatus); err != nil {
			return false, err
		}
	}
	p.results[i] = AppendResult{EventID: ev.EventID, Sequence: next}
	datas[i] = data
	if p.added == nil {
		p.added = make([]StoredEvent, 0, len(p.events)-i)
	}
	p.added = append(p.added, StoredEvent{Sequence: next, EventID: ev.EventID, IdempotencyKey: ev.IdempotencyKey, EventType: ev.EventType, RunID: ev.RunID, Data: data})
	return true, nil
}

// checkLease checks the lease of run runID for the new event at index i (rule 3d).
func (p *planner) checkLease(i int, runID string) error {
	held, err := p.lease(runID)
	if err != nil {
		return err
	}
	if held == nil && p.fence.Lease != nil {
		// A lease given for a run without one: refused unless the session does not have the
		// run yet (the batch may create it, as the expirer's new attempt does).
		pr, err := p.run(runID)
		if err != nil {
			return err
		}
		if pr == nil || pr.created {
			return nil
		}
	}
	return checkFence(p.fence, i, runID, held)
}

// lease returns the lease held on run runID (nil: none), asking the lookup once per run.
func (p *planner) lease(runID string) (*Lease, error) {
	if p.leaseRun == runID && runID != "" {
		return p.leaseHeld, nil
	}
	if held, ok := p.leases[runID]; ok {
		return held, nil
	}
	held, err := p.lk.Lease(runID)
	if err != nil {
		return nil, err
	}
	switch {
	case p.leaseRun == "":
		p.leaseRun, p.leaseHeld = runID, held
	case p.leases == nil:
		p.leases = map[string]*Lease{runID: held}
	default:
		p.leases[runID] = held
	}
	return held, nil
}

func (p *planner) duplicate(i int, seq int64) {
	p.results[i] = AppendResult{EventID: p.events[i].EventID, Sequence: seq, Duplicate: true}
}

func conflict(i int, ev *contract.EncodedEvent, reason string, existing int64) *ConflictError {
	return &ConflictError{Index: i, Reason: reason, EventID: ev.EventID, IdempotencyKey: ev.IdempotencyKey, Existing: existing}
}

// applyRun folds the run status event at index i into the runs (rule 3d).
func (p *planner) applyRun(i int, f *contract.RunStatusFields) error {
	pr, err := p.run(f.RunID)
	if err != nil {
		return err
	}
	var prev *contract.Run
	if pr != nil {
		prev = pr.run
	} else {
		if !p.activeLoaded {
			if err := p.loadActive(); err != nil {
				return err
			}
		}
		if err := contract.CheckNewRun(p.earliestActive(), *f, p.enqueue); err != nil {
			return &RunError{Index: i, Err: err}
		}
	}
	run, err := contract.ApplyRunStatus(prev, p.sid, *f)
	if err != nil {
		return &RunError{Index: i, Err: err}
	}
	if pr == nil {
		pr = &planRun{ord: p.created, created: true}
		p.created++
		p.runs[f.RunID] = pr
	}
	pr.run = run
	if !pr.changed {
		pr.changed = true
		p.changed = append(p.changed, pr)
	}
	if contract.IsTerminal(run.Status) {
		delete(p.active, f.RunID)
	} else {
		p.active[f.RunID] = pr
	}
	return nil
}

// run returns the run as the batch leaves it so far, asking the lookup the first time; nil when
// the session has no such run.
func (p *planner) run(id string) (*planRun, error) {
	if p.runs == nil {
		p.runs = map[string]*planRun{}
		p.active = map[string]*planRun{}
	}
	if pr, ok := p.runs[id]; ok {
		return pr, nil
	}
	sr, found, err := p.lk.Run(id)
	if err != nil || !found {
		return nil, err
	}
	p.keep(id, sr)
	return p.runs[id], nil
}

// loadActive adds the stored active runs the batch has not looked at yet.
func (p *planner) loadActive() error {
	if p.activeLoaded {
		return nil
	}
	if p.runs == nil {
		p.runs = map[string]*planRun{}
		p.active = map[string]*planRun{}
	}
	stored, err := p.lk.ActiveRuns()
	if err != nil {
		return err
	}
	for _, sr := range stored {
		if _, ok := p.runs[sr.Run.RunID]; !ok {
			p.keep(sr.Run.RunID, sr)
		}
	}
	p.activeLoaded = true
	return nil
}

func (p *planner) keep(id string, sr StoredRun) {
	pr := &planRun{run: sr.Run, ord: sr.Ord}
	p.runs[id] = pr
	if !contract.IsTerminal(sr.Run.Status) {
		p.active[id] = pr
	}
}

// earliestActive returns the earliest created active run, or nil.
func (p *planner) earliestActive() *contract.Run {
	if best := p.earliestActivePlan(); best != nil {
		return best.run
	}
	return nil
}

// earliestActivePlan returns the earliest created active run as the batch leaves it, or nil.
// The active set holds one run, or a few with runs enqueued behind it, so this scan is cheap.
func (p *planner) earliestActivePlan() *planRun {
	var best *planRun
	for _, pr := range p.active {
		if best == nil || pr.before(best) {
			best = pr
		}
	}
	return best
}

// before orders runs by creation: stored runs by their order, then the batch's own.
func (r *planRun) before(o *planRun) bool {
	if r.created != o.created {
		return !r.created
	}
	return r.ord < o.ord
}

// runWrites returns the runs the batch changed, each saying whether it is claimable, plus the
// run a run's end made claimable (rule 3f).
func (p *planner) runWrites() ([]RunWrite, error) {
	if len(p.changed) == 0 {
		return nil, nil
	}
	// Whether a queued run is claimable depends on the runs created before it, and a run's end
	// may make the next one claimable: both need the session's active runs.
	for _, pr := range p.changed {
		if !p.activeLoaded && (pr.run.Status == contract.RunStatusQueued || contract.IsTerminal(pr.run.Status)) {
			if err := p.loadActive(); err != nil {
				return nil, err
			}
		}
	}
	first := p.earliestActivePlan()
	out := make([]RunWrite, 0, len(p.changed)+1)
	for _, pr := range p.changed {
		w := RunWrite{Run: pr.run, Created: pr.created, Ord: pr.ord,
			Queued: pr.run.Status == contract.RunStatusQueued && pr == first, EndsLease: contract.IsTerminal(pr.run.Status)}
		if pr.created {
			w.Attempt = 1
			if a := p.attempts[pr.run.RunID]; a > 1 {
				w.Attempt = a
			}
		}
		out = append(out, w)
	}
	if first != nil && !first.changed && first.run.Status == contract.RunStatusQueued {
		for _, pr := range p.changed {
			if contract.IsTerminal(pr.run.Status) {
				// The batch ended a run before this one: it waited, and is claimable now.
				out = append(out, RunWrite{Run: first.run, Ord: first.ord, Queued: true})
				break
			}
		}
	}
	return out, nil
}

// StoredDuplicates answers a batch of which every event is already stored with the same
// content under its idempotency key: each event is a duplicate with its stored sequence. Rules 2
// and 3 give that same answer for such a batch whatever the options say, and nothing is written,
// so a driver may answer it before taking the session's lock or its writer's place. An event
// repeating an earlier one of the batch is looked up like any other: it is stored too, under
// the same key, so it gets the answer rule 3a gives it.
//
// sameStored(i) looks event i up: the sequence of the stored event with its idempotency key,
// and same true when that event has the same content, that is when events[i].SameContent of
// the stored bytes holds (a driver may decide it without the bytes by any test that gives the
// same answer, such as comparing collision-resistant digests of the content; store/sqlite does).
// It must only report events that are committed (not necessarily synced: the driver waits for
// that before answering); it may miss some (same false). ok is false (and the driver plans the
// append as usual) for an empty batch, or as soon as an event is not found with the same
// content; the lookups after it are not made.
func StoredDuplicates(events []*contract.EncodedEvent, sameStored func(i int) (seq int64, same bool, err error)) (results []AppendResult, ok bool, err error) {
	if len(events) == 0 {
		return nil, false, nil
	}
	results = make([]AppendResult, len(events))
	for i, ev := range events {
		seq, same, err := sameStored(i)
		if err != nil {
			return nil, false, err
		}
		if !same {
			return nil, false, nil
		}
		results[i] = AppendResult{EventID: ev.EventID, Sequence: seq, Duplicate: true}
	}
	return results, true, nil
}
