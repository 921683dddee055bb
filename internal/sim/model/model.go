// Package model is the reference model of the session semantics that the simulation tester
// (package sim) checks the real service against: runs and their status transitions, queued
// runs and claims, leases with a time to live and fencing tokens, attempts and lease expiry,
// the multitask strategies, the stop and steer commands, idempotent retries of appends and
// commands, the sweeper and the record status it changes. It is written from the documents
// (docs/runtime.md, docs/lifecycle.md, docs/reference.md), not from the session or store
// code, and is pure: a Model is a value that each method changes, with no I/O and no clock
// of its own (Now is set by the caller).
package model

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Run statuses (docs/reference.md#runs).
const (
	Queued          = "queued"
	Running         = "running"
	WaitingApproval = "waiting_approval"
	Stopping        = "stopping"
	Stopped         = "stopped"
	Completed       = "completed"
	Failed          = "failed"
)

// Strategies of a run queued while another is active (docs/runtime.md, "Multitask").
const (
	Reject    = "reject"
	Enqueue   = "enqueue"
	Interrupt = "interrupt"
)

// Decision codes: the error code of a refusal, or one of Accepted and Duplicate.
const (
	Accepted              = "accepted"
	Duplicate             = "duplicate"
	LeaseRequired         = "LEASE_REQUIRED"
	LeaseLost             = "LEASE_LOST"
	InvalidTransition     = "INVALID_RUN_TRANSITION"
	InvalidSessionState   = "INVALID_SESSION_STATE"
	RunNotFound           = "RUN_NOT_FOUND"
	ActiveRunNotFound     = "ACTIVE_RUN_NOT_FOUND"
	RunAlreadyFinished    = "RUN_ALREADY_FINISHED"
	SequenceConflict      = "SEQUENCE_CONFLICT"
	NothingToClaim        = "NOTHING_TO_CLAIM"
	SessionStatusRunning  = "running"
	SessionStatusStale    = "stale"
	DefaultStaleAfterTest = time.Minute
)

// transitions is the run status table: the statuses each status may change to.
var transitions = map[string][]string{
	Queued:          {Running, Stopping, Failed},
	Running:         {WaitingApproval, Stopping, Completed, Failed},
	WaitingApproval: {Running, Stopping, Failed},
	Stopping:        {Stopped, Completed, Failed},
}

// Terminal reports whether a run status is final.
func Terminal(status string) bool {
	return status == Stopped || status == Completed || status == Failed
}

// Allowed reports whether a run may go from one status to another: a status may always be
// re-applied to itself (the contract's rule; a terminal one too, which changes nothing).
func Allowed(from, to string) bool { return from == to || slices.Contains(transitions[from], to) }

// Lease is a lease held on a run: its fencing token identifies it among the run's leases.
type Lease struct {
	Token   int64
	Expires time.Time
}

// LeaseRef is the lease an append, renewal or release carries: Forged is one the server never
// gave (another id); otherwise Token names one of the run's leases.
type LeaseRef struct {
	Token  int64
	Forged bool
}

// Run is a run of the session.
type Run struct {
	ID      string // the request's run id, or the server's (derived) for a new attempt
	Status  string
	Attempt int
	Token   int64  // the last fencing token given (0: never claimed)
	Lease   *Lease // the lease held now, expired or not (nil: none)
	// Claimed is true once the run was claimed.
	Claimed bool
	// ClaimableSince is when the run became claimable: queued, and the session's current run
	// (zero: never yet). The queue timeout counts from it.
	ClaimableSince time.Time
}

// Model is the state of one session.
type Model struct {
	Now         time.Time
	MaxAttempts int           // attempts a run gets (sessiond serve --max-attempts)
	StaleAfter  time.Duration // the heartbeat TTL of the sweeper
	// HeartbeatResolution is how far an append's heartbeat may run ahead of the recorded one
	// before the append records it (docs/storage.md: one second on SQLite, 0 on PostgreSQL); a
	// renewal's, and an append's to a stale session, are always recorded.
	HeartbeatResolution time.Duration
	// QueueTimeout is the schedule-to-start timeout (sessiond serve --queue-timeout; 0: none).
	QueueTimeout time.Duration
	// Passes counts what the background passes did, by what ("lease expired", "queue
	// timeout", "heartbeat lost", "stale"), to show what a simulation covered.
	Passes    map[string]int
	Runs      []*Run    // in creation order
	Last      int64     // the log's last sequence (-1: empty; the first event is 0)
	Record    string    // the record status: running or stale
	Heartbeat time.Time // the last heartbeat recorded (the session's start before the first)
	// beaten is true once a heartbeat was recorded: the first one always is.
	beaten   bool
	appended map[string]bool
	commands map[string]bool // accepted commands, by idempotency key
}

// New returns the model of a new running session started at now.
func New(now time.Time, maxAttempts int, staleAfter time.Duration) *Model {
	return &Model{Last: -1, Now: now, MaxAttempts: maxAttempts, StaleAfter: staleAfter, Record: SessionStatusRunning, Heartbeat: now,
		appended: map[string]bool{}, commands: map[string]bool{}, Passes: map[string]int{}}
}

// Clone returns a deep copy of m, for trying an order of racing requests.
func (m *Model) Clone() *Model {
	c := *m
	c.Runs = make([]*Run, len(m.Runs))
	for i, r := range m.Runs {
		cr := *r
		if r.Lease != nil {
			l := *r.Lease
			cr.Lease = &l
		}
		c.Runs[i] = &cr
	}
	c.appended, c.commands, c.Passes = maps.Clone(m.appended), maps.Clone(m.commands), maps.Clone(m.Passes)
	return &c
}

// Find returns the run with that id, or nil.
func (m *Model) Find(id string) *Run {
	for _, r := range m.Runs {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// Current is the earliest created active run, or nil.
func (m *Model) Current() *Run {
	for _, r := range m.Runs {
		if !Terminal(r.Status) {
			return r
		}
	}
	return nil
}

// settle notes when the current run became claimable: a queued run becomes so when every run
// created before it has ended. Every change of the runs calls it, at Now.
func (m *Model) settle() {
	if cur := m.Current(); cur != nil && cur.Status == Queued && cur.ClaimableSince.IsZero() {
		cur.ClaimableSince = m.Now
	}
}

// heartbeat is what every runtime append that adds events does: the session is alive, a stale
// one running again. The recorded heartbeat moves only when it is HeartbeatResolution old or
// older, or is the first, or the session was stale.
func (m *Model) heartbeat() {
	if !m.beaten || m.Record == SessionStatusStale || !m.Heartbeat.After(m.Now.Add(-m.HeartbeatResolution)) {
		m.Heartbeat, m.beaten = m.Now, true
	}
	m.Record = SessionStatusRunning
}

// renewed is the heartbeat of a lease renewal: always recorded.
func (m *Model) renewed() {
	m.Heartbeat, m.beaten = m.Now, true
	m.Record = SessionStatusRunning
}

// setStatus moves r to status; a run that ends drops its lease.
func (m *Model) setStatus(r *Run, status string) {
	r.Status = status
	m.Last++
	if Terminal(status) {
		r.Lease = nil
	}
}

// checkLease is the fencing check of an append to r carrying given (nil: none).
func checkLease(r *Run, given *LeaseRef) string {
	switch {
	case given == nil && r.Lease == nil:
		return ""
	case given == nil:
		return LeaseRequired
	case r.Lease == nil || given.Forged || given.Token != r.Lease.Token:
		return LeaseLost
	}
	return ""
}

// Queue is the append of a person's message and a new queued run newRun, one request with the
// idempotency key key, under the multitask strategy ("" takes the session's default, reject).
// It returns the decision and the run an interrupt asked to stop ("" when none).
func (m *Model) Queue(key, newRun, strategy string) (decision, interrupted string) {
	if m.appended[key] {
		return Duplicate, "" // answered from the log: no interrupt, whatever run is current now
	}
	if strategy == "" {
		strategy = Reject
	}
	cur := m.Current()
	if cur != nil && strategy == Reject {
		return InvalidSessionState, ""
	}
	if m.Find(newRun) != nil {
		// The run exists already (another request queued it): a queued status again is an
		// illegal transition from whatever it is.
		return InvalidTransition, ""
	}
	if strategy == Interrupt && cur != nil && cur.Status != Stopping {
		interrupted = cur.ID
		m.stop(cur)
	}
	m.appended[key] = true
	m.Last++ // the message
	m.Runs = append(m.Runs, &Run{ID: newRun, Status: Queued, Attempt: 1})
	m.Last++
	m.heartbeat()
	m.settle()
	return Accepted, interrupted
}

// Status is a runtime's append, under given, of run r's status, one request with key.
func (m *Model) Status(key string, r *Run, status string, given *LeaseRef) string {
	if m.appended[key] {
		return Duplicate
	}
	if code := checkLease(r, given); code != "" {
		return code
	}
	if !Allowed(r.Status, status) {
		return InvalidTransition
	}
	m.appended[key] = true
	m.setStatus(r, status)
	m.heartbeat()
	m.settle()
	return Accepted
}

// Claim gives the session's claimable run a lease of ttl: the current run, when it is queued
// and nobody holds it. It returns nil when there is none.
func (m *Model) Claim(ttl time.Duration) *Run {
	cur := m.Current()
	if cur == nil || cur.Status != Queued || cur.Lease != nil {
		return nil
	}
	cur.Token++
	cur.Claimed = true
	cur.Lease = &Lease{Token: cur.Token, Expires: m.Now.Add(ttl).Truncate(time.Millisecond)}
	return cur
}

// checkHeld is the check of a renewal or release: the lease given must be the run's, alive.
func (m *Model) checkHeld(r *Run, given LeaseRef) string {
	if r.Lease == nil || given.Forged || given.Token != r.Lease.Token || !r.Lease.Expires.After(m.Now) {
		return LeaseLost
	}
	return ""
}

// Renew extends r's lease to ttl from now (a heartbeat of the session).
func (m *Model) Renew(r *Run, given LeaseRef, ttl time.Duration) string {
	if code := m.checkHeld(r, given); code != "" {
		return code
	}
	r.Lease.Expires = m.Now.Add(ttl).Truncate(time.Millisecond)
	m.renewed()
	return Accepted
}

// Release drops r's lease: a queued run is claimable again, a started one stays as it is.
func (m *Model) Release(r *Run, given LeaseRef) string {
	if code := m.checkHeld(r, given); code != "" {
		return code
	}
	r.Lease = nil
	return Accepted
}

// command returns the decision common to the commands about a run: "" to go on.
func (m *Model) command(key string, r *Run, allowed ...string) string {
	if m.commands[key] {
		return Duplicate
	}
	if r == nil {
		if cur := m.Current(); cur == nil {
			return ActiveRunNotFound
		}
		return RunNotFound
	}
	if Terminal(r.Status) {
		return RunAlreadyFinished
	}
	if !slices.Contains(allowed, r.Status) {
		return InvalidSessionState
	}
	return ""
}

// Stop is the stop command (idempotency key key) about r (nil: a run that does not exist):
// the run becomes stopping; no sequence rule (target-run). A queued run that nobody holds
// alive is stopped at once (stopping, then stopped), as an interrupt does: nobody is there to
// confirm, and the runs queued behind it must not wait for a confirmation that never comes.
func (m *Model) Stop(key string, r *Run) string {
	if d := m.command(key, r, Queued, Running, WaitingApproval); d != "" {
		return d
	}
	m.commands[key] = true
	m.stop(r)
	m.settle()
	return Accepted
}

// stop asks r, an active run not stopping, to stop: stopping, and stopped at once when it is
// queued and nobody holds it alive.
func (m *Model) stop(r *Run) {
	unheld := r.Lease == nil || !r.Lease.Expires.After(m.Now)
	wasQueued := r.Status == Queued
	m.setStatus(r, Stopping)
	if wasQueued && unheld {
		m.setStatus(r, Stopped)
	}
}

// Steer is the steer command about r with expectedSequence expected (match-current): one
// steer event, no status change.
func (m *Model) Steer(key string, r *Run, expected int64) string {
	if d := m.command(key, r, Queued, Running); d != "" {
		return d
	}
	if expected != m.Last {
		return SequenceConflict
	}
	m.commands[key] = true
	m.Last++
	return Accepted
}

// ExpireLeases is the lease expirer's pass at Now: each run whose lease expired is failed
// (LEASE_EXPIRED, retryable) and, below MaxAttempts, queued again as a new run with the next
// attempt, whose id is attemptID(the run, its lease); a stopping run is stopped instead
// (LEASE_EXPIRED, not retryable) and gets no new attempt. Earliest expiry first. Then, with a
// QueueTimeout, the current run when it is queued, was never claimed, is held by nobody and
// became claimable QueueTimeout ago or earlier is failed (QUEUE_TIMEOUT, not retryable); the
// run behind it becomes claimable now. It returns how many leases it handled.
func (m *Model) ExpireLeases(attemptID func(r *Run) string) int {
	var expired []*Run
	for _, r := range m.Runs {
		if r.Lease != nil && !r.Lease.Expires.After(m.Now) {
			expired = append(expired, r)
		}
	}
	slices.SortStableFunc(expired, func(a, b *Run) int { return a.Lease.Expires.Compare(b.Lease.Expires) })
	for _, r := range expired {
		m.Passes["lease expired"]++
		id := attemptID(r)
		if r.Status == Stopping {
			m.setStatus(r, Stopped)
			m.Last++ // the error event
			continue
		}
		m.setStatus(r, Failed)
		m.Last++
		if r.Attempt+1 <= m.MaxAttempts {
			m.Runs = append(m.Runs, &Run{ID: id, Status: Queued, Attempt: r.Attempt + 1})
			m.Last++
		}
	}
	m.settle()
	if m.QueueTimeout > 0 {
		if cur := m.Current(); cur != nil && cur.Status == Queued && cur.Token == 0 && cur.Lease == nil &&
			!cur.ClaimableSince.After(m.Now.Add(-m.QueueTimeout)) {
			m.setStatus(cur, Failed)
			m.Last++ // the QUEUE_TIMEOUT error event
			m.settle()
			m.Passes["queue timeout"]++
		}
	}
	return len(expired)
}

// Sweep is the sweeper's pass at Now: a running session whose heartbeat is older than
// StaleAfter is marked stale, after its current run is failed (HEARTBEAT_LOST) when it was
// started; a run that holds a lease (alive or expired) keeps the session as it is (it is the
// worker's, or the expirer's), a queued run nobody holds stays queued (a backlog waits), and a
// stopping run ends stopped, not failed.
func (m *Model) Sweep() {
	if m.Record != SessionStatusRunning || !m.Heartbeat.Before(m.Now.Add(-m.StaleAfter)) {
		return
	}
	if cur := m.Current(); cur != nil {
		if cur.Lease != nil {
			return
		}
		if cur.Status != Queued {
			m.Passes["heartbeat lost"]++
		}
		switch cur.Status {
		case Queued:
		case Stopping:
			// A run a person stopped stays stopped: the sweeper confirms the stop
			// (HEARTBEAT_LOST recorded, not retryable), as the lease expirer does.
			m.setStatus(cur, Stopped)
			m.Last++
		default:
			m.setStatus(cur, Failed)
			m.Last++ // the HEARTBEAT_LOST error event
		}
		m.settle()
	}
	m.Record = SessionStatusStale
	m.Passes["stale"]++
}

// String is the model's state in one line, for divergence reports.
func (m *Model) String() string {
	s := fmt.Sprintf("record %s, last %d, runs", m.Record, m.Last)
	for _, r := range m.Runs {
		s += fmt.Sprintf(" %s:%s/a%d/t%d", r.ID, r.Status, r.Attempt, r.Token)
		if r.Lease != nil {
			s += "/held"
		}
	}
	return s
}
