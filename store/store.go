package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sessiond/sessiond/contract"
)

// Limits every driver enforces on appends. Both are documented in docs/storage.md.
const (
	// MaxBatchEvents is the most events one Append may carry.
	MaxBatchEvents = 1000
	// MaxEventBytes is the largest canonical event accepted.
	MaxEventBytes = contract.DefaultMaxBytes
)

// Store is the storage behind sessiond: session records and their snapshots, each session's
// append-only event log, and the run projection kept from the log in the same transaction.
// Every method is safe for concurrent use. Implementations live in subpackages (sqlite,
// postgres) and must pass storetest.Exercise.
type Store interface {
	// CreateSession stores a new session with an empty log (LastSequence -1). It returns
	// ErrSessionExists when the id is taken.
	CreateSession(ctx context.Context, s *Session) error
	// GetSession returns the session, or ErrSessionNotFound.
	GetSession(ctx context.Context, id string) (*Session, error)
	// ListSessions returns sessions matching f ordered by id, at most f.Limit (default 100,
	// capped at 1000), and the cursor for the next page ("" when there is none).
	ListSessions(ctx context.Context, f ListFilter) ([]*Session, string, error)
	// UpdateSession applies fn to the current session and stores the result atomically; fn
	// may return an error to abort. Only Record, Snapshot, Lineage and ActiveBranch may be
	// changed; it returns ErrSessionNotFound for an unknown id.
	UpdateSession(ctx context.Context, id string, fn func(*Session) error) (*Session, error)

	// Append adds a batch of validated events to a session's log atomically and durably
	// (committed with fsync before it returns). Each new event gets the next sequence;
	// an event whose idempotency key is already in the log with the same content is
	// answered as a duplicate with its stored sequence and is not written again. Errors:
	// ErrSessionNotFound; *SequenceConflictError when opts.ExpectedSequence is set and the log
	// has moved (unless every event of the batch is a duplicate); *ConflictError for a key
	// reused with other content or an eventId reused under another key; *LimitError for a
	// batch or event over the limits; *SessionMismatchError when an event names another
	// session; *RunError wrapping *contract.TransitionError for an illegal run status change,
	// or wrapping *contract.ActiveRunError for a run status event that would create a new run
	// while another run of the session is active (contract.CheckNewRun: one active run per
	// session, checked against the runs as they stand inside the same transaction).
	// On any error nothing of the batch is written. Drivers take every one of these decisions
	// with CheckBatch and PlanAppend (appendplan.go) and only look up and write.
	Append(ctx context.Context, sessionID string, events []*contract.EncodedEvent, opts AppendOptions) ([]AppendResult, error)
	// ReadEvents returns the events with sequence > after, in order, at most limit (default
	// and cap 10000). It returns ErrSessionNotFound for an unknown session.
	ReadEvents(ctx context.Context, sessionID string, after int64, limit int) ([]StoredEvent, error)
	// LastSequence returns the session's last sequence (-1 when its log is empty).
	LastSequence(ctx context.Context, sessionID string) (int64, error)
	// EventByID returns the event with that eventId, or ErrEventNotFound.
	EventByID(ctx context.Context, sessionID, eventID string) (StoredEvent, error)
	// EventByIdempotencyKey returns the event with that key, or ErrEventNotFound.
	EventByIdempotencyKey(ctx context.Context, sessionID, key string) (StoredEvent, error)

	// Runs returns the session's runs in the order they were created.
	Runs(ctx context.Context, sessionID string) ([]contract.Run, error)
	// Run returns one run, or ErrRunNotFound.
	Run(ctx context.Context, sessionID, runID string) (contract.Run, error)

	// PutCommandResult stores the result of a command under the session and the command's
	// idempotency key, unless a result is already stored there. It returns the stored result
	// (result itself when it was new) and whether one already existed, or ErrSessionNotFound.
	// Results survive restarts: they are what makes a repeated command answer "duplicate".
	PutCommandResult(ctx context.Context, sessionID, key string, result []byte) (stored []byte, existed bool, err error)
	// CommandResult returns the stored result for the key, or ErrCommandNotFound.
	CommandResult(ctx context.Context, sessionID, key string) ([]byte, error)

	// Subscribe registers fn to be called after every commit that added events, in commit
	// order per session. fn must not block. The returned func unregisters it.
	Subscribe(fn func(Commit)) (cancel func())
	// SubscribeReleases registers fn to be called after a lease release commits
	// (ReleaseLease), with the session's id: a queued run may be claimable again. A release
	// adds no event, so Subscribe does not report it. On a store shared by several processes
	// (PostgreSQL) fn is also called for the releases of the others, as their commits are
	// reported (the id may then be "" when it was too long to travel). fn must not block. The
	// returned func unregisters it.
	SubscribeReleases(fn func(sessionID string)) (cancel func())

	// ExpiredSessions returns, oldest heartbeat first, at most limit (default 100, capped at
	// 10000) sessions whose status is running or paused and whose heartbeat is before cutoff.
	// A session's heartbeat is its record's last_heartbeat_at, or started_at when it never had
	// one; drivers keep it in an indexed column derived from the record in the same
	// transaction as every write of the record, so the query costs in proportion to the
	// sessions it returns, not to the sessions in the store. The answer is a hint: a heartbeat
	// may land right after it, so callers re-check under UpdateSession before acting.
	ExpiredSessions(ctx context.Context, cutoff time.Time, limit int) ([]ExpiredSession, error)
	// Lifecycle returns the session's lifecycle state (time window, archives, compaction,
	// restore); the zero Lifecycle when nothing was ever set. It returns ErrSessionNotFound
	// for an unknown id.
	Lifecycle(ctx context.Context, id string) (Lifecycle, error)
	// UpdateLifecycle applies fn to the current session and its lifecycle state and stores
	// both atomically, as UpdateSession does for the session (the same fields may change).
	// fn may return an error to abort: nothing is stored and that error is returned. fn must
	// be quick and must not call the store. It returns ErrSessionNotFound for an unknown id.
	UpdateLifecycle(ctx context.Context, id string, fn func(*Session, *Lifecycle) error) (*Session, Lifecycle, error)
	// CompactEvents deletes the session's events with sequence <= through from the log and
	// records Lifecycle.CompactedThrough, in one transaction; the session, its runs, its
	// command results and LastSequence stay, so later appends continue after LastSequence and
	// never reuse a sequence. It returns how many events it deleted, ErrSessionNotFound for an
	// unknown id, or an error when through is after LastSequence. Callers compact only a log
	// that is safely kept elsewhere (a verified archive).
	CompactEvents(ctx context.Context, id string, through int64) (int64, error)
	// ImportSession writes a whole session (row, lifecycle state, log and runs) in one
	// transaction, storing every event's bytes, sequence, eventId and idempotency key
	// verbatim. The events must be the full log: sequences 0, 1, ..., n-1 with
	// imp.Session.LastSequence = n-1. When no session has the id it is created. When one
	// exists it is replaced only if it is archived and its whole log was compacted away
	// (Lifecycle.CompactedThrough = its LastSequence = imp.Session.LastSequence, no event
	// left); otherwise ErrSessionExists and nothing changes. Its stored command results
	// stay. Subscribers are not notified.
	ImportSession(ctx context.Context, imp *Import) error

	// ClaimRun gives the oldest claimable run matching f a lease (leases.go): a claimable run is
	// queued and has no lease; the oldest is the one queued first, across sessions. The lease
	// gets leaseID, the run's fencing token plus one and expiresAt. A claim is not a heartbeat
	// of the session (one commit per claim): the holder's appends and renewals are, and the
	// sweeper spares a run whose lease is alive. Exactly one caller gets a run, whatever the
	// number of callers and instances; the cost is an index lookup, not a scan (a Role or
	// Capabilities filter checks the claimable runs in queue order). It returns
	// ErrNothingToClaim when no claimable run matches.
	ClaimRun(ctx context.Context, f ClaimFilter, leaseID string, expiresAt time.Time) (Claim, error)
	// RenewLease moves the expiry of the lease ref holds on the run to expiresAt and records a
	// heartbeat at now on its session. The lease must be the run's current one and not have
	// expired by now (CheckLease), else *LeaseError "lost". Errors: ErrSessionNotFound,
	// ErrRunNotFound, *LeaseError.
	RenewLease(ctx context.Context, sessionID, runID string, ref LeaseRef, now, expiresAt time.Time) (Lease, error)
	// ReleaseLease drops the lease ref holds on the run: a queued run becomes claimable again.
	// The lease must be the run's current one and not have expired by now (CheckLease), else
	// *LeaseError "lost": an expired lease is the expirer's to handle (released, a started run
	// would stay running with no lease, which the expirer never looks at). Errors:
	// ErrSessionNotFound, ErrRunNotFound, *LeaseError.
	ReleaseLease(ctx context.Context, sessionID, runID string, ref LeaseRef, now time.Time) error
	// RunLeases returns the lease state of each of the session's runs, in creation order, or
	// ErrSessionNotFound.
	RunLeases(ctx context.Context, sessionID string) ([]RunLease, error)
	// ExpiredLeases returns, earliest expiry first, at most limit (default 100, capped at 10000)
	// leases that expired by cutoff, from an index of the held leases: the cost is in
	// proportion to the leases returned. The answer is a hint, as for ExpiredSessions: callers
	// act through a fenced append (Fence.ExpiredBy), which a renewal since refuses.
	ExpiredLeases(ctx context.Context, cutoff time.Time, limit int) ([]ExpiredLease, error)

	// ChangeFeed reads and follows the change feed across sessions (changes.go).
	ChangeFeed
	// Keys keeps the API keys (keys.go).
	Keys
	// UsageStore keeps the usage rollup and answers usage queries (usage.go).
	UsageStore

	// Capabilities says what this driver can do.
	Capabilities() Capabilities
	// Ready returns nil when the store can take writes now, else why it cannot: ErrClosed
	// after Close, the failure that made it refuse every write until sessiond restarts (a
	// failed sync of the SQLite WAL), or the error of a round trip to the database server.
	// Readiness checks (GET /readyz) call it, so it must be cheap and honour ctx.
	Ready(ctx context.Context) error
	// Close waits for in-flight appends and releases the store.
	Close() error
}

// Capabilities describes what a driver offers, so callers never rely on a silent no-op.
type Capabilities struct {
	// Driver is the driver's name ("sqlite", "postgres").
	Driver string
	// SharedAcrossProcesses is true when several sessiond processes may use the store at once
	// and Subscribe reports commits made by any of them.
	SharedAcrossProcesses bool
	// CommitCarriesEvents is true when Commit.Events holds the committed events, so that live
	// readers need not read them back.
	CommitCarriesEvents bool
}

// Session is a stored session.
type Session struct {
	Record       contract.SessionRecord
	Snapshot     contract.Snapshot
	Lineage      *contract.Lineage
	ActiveBranch *contract.ActiveBranch
	// LastSequence is the sequence of the last event in the log, -1 when empty. Set by the store.
	LastSequence int64
}

// ListFilter selects sessions for ListSessions. Empty fields match everything.
type ListFilter struct {
	Status  string
	AgentID string
	Project string
	// ForkedFrom selects the sessions whose lineage says they were forked from this session
	// (its direct descendants).
	ForkedFrom string
	// After is the cursor returned by the previous page.
	After string
	Limit int
}

// AppendOptions are the preconditions of an append.
type AppendOptions struct {
	// ExpectedSequence, when set, is the last sequence the writer saw; the append happens only
	// if the log still ends there (-1 for an empty log).
	ExpectedSequence *int64
	// Heartbeat, when not zero, records a heartbeat at that time in the same transaction, if
	// the append adds at least one event: the record's last_heartbeat_at becomes
	// contract.FormatTime(Heartbeat), and a stale session becomes running again (status "running",
	// updated_at the heartbeat time, updated_by_gate "owner"). The server sets it for appends
	// from the runtime; events the server appends itself leave it zero.
	Heartbeat time.Time
	// CommandResult, when set, is stored as the result of the command under its idempotency
	// key in the same transaction, if the append adds at least one event and no result is
	// stored under that key yet: a command's effect and its result commit together, with one
	// sync. The caller builds the result before the append; with ExpectedSequence set it
	// knows the sequences the events will get.
	CommandResult *CommandResultWrite
	// Fence, when set, checks the lease of every run the new events name (rule 3d of
	// PlanAppend): the server sets it for appends from a runtime, with the lease the request
	// carries; events the server appends itself leave it nil.
	Fence *Fence
	// Attempts gives the attempt number of runs the append creates, by run id (default 1):
	// the lease expirer queues a new attempt of a run whose lease expired.
	Attempts map[string]int
	// Enqueue lets a run the batch creates queued wait behind the session's active run instead
	// of being refused (contract.CheckNewRun; the multitask strategies enqueue and interrupt):
	// it becomes claimable once every run created before it has ended.
	Enqueue bool
	// Interrupt, when set, stops the session's current run before the batch (the multitask
	// strategy interrupt), decided inside the appending transaction (rule 3 of PlanAppend):
	// when the batch is not answered from the log alone (some event of it is not stored with
	// the same content under its idempotency key), PlanAppend calls it with the session's
	// current run as stored (the earliest created run that is not terminal; nil when none) and
	// the lease held on that run (nil when none), and adds the events it returns before the
	// batch's, unfenced. It returns none when there is nothing to stop. Append then answers
	// those events first and the batch's after them: the caller tells them apart by the count
	// (len(results) - len(events)); an error names a position in the batch. It must be quick
	// and must not call the store: it runs while the session's log is locked.
	Interrupt func(current *contract.Run, held *Lease) ([]*contract.EncodedEvent, error)
}

// CommandResultWrite is a command result to store with an append.
type CommandResultWrite struct {
	Key    string
	Result []byte
}

// AppendResult is the outcome of one event of a batch, in batch order.
type AppendResult struct {
	EventID   string
	Sequence  int64
	Duplicate bool
}

// StoredEvent is one event of a log as stored: Data is the canonical event JSON with its
// assigned sequence, exactly what readers receive.
type StoredEvent struct {
	Sequence       int64
	EventID        string
	IdempotencyKey string
	EventType      string
	RunID          string
	Data           []byte
	// Hash is the event's link of the session's hash chain (chain.go) as stored, set only by
	// an Inspector (nil everywhere else: readers and commits do not carry it).
	Hash []byte
}

// Commit describes one committed append to a session.
type Commit struct {
	SessionID    string
	LastSequence int64
	// Events are the events the append added, in order, when the driver's capabilities say
	// CommitCarriesEvents; otherwise nil, and readers read from LastSequence backwards.
	Events []StoredEvent
	// Claimable is true when the append made a run claimable (AppendPlan.Claimable). A driver
	// whose commits do not carry their events leaves it false: a subscriber must then assume
	// that any commit may have.
	Claimable bool
}

// Errors returned by drivers; compare with errors.Is / errors.As.
var (
	ErrSessionNotFound = errors.New("session not found")
	ErrSessionExists   = errors.New("session already exists")
	ErrEventNotFound   = errors.New("event not found")
	ErrRunNotFound     = errors.New("run not found")
	ErrCommandNotFound = errors.New("command result not found")
	ErrClosed          = errors.New("store is closed")
)

// SequenceConflictError reports that the log moved past the writer's expected sequence.
type SequenceConflictError struct {
	SessionID string
	Expected  int64
	Actual    int64
}

func (e *SequenceConflictError) Error() string {
	return fmt.Sprintf("session %q: expected last sequence %d, but the log ends at %d; read the new events and retry with expectedSequence %d",
		e.SessionID, e.Expected, e.Actual, e.Actual)
}

// Conflict reasons.
const (
	ConflictIdempotencyKey = "idempotency-key" // same key, different content
	ConflictEventID        = "event-id"        // eventId already used under another key
)

// ConflictError reports an event that clashes with one already in the log.
type ConflictError struct {
	Index          int // position in the batch
	Reason         string
	EventID        string
	IdempotencyKey string
	// Existing is the sequence of the stored event it clashes with.
	Existing int64
}

func (e *ConflictError) Error() string {
	if e.Reason == ConflictEventID {
		return fmt.Sprintf("event %d: eventId %q is already used by the event at sequence %d under another idempotencyKey; give a new event an eventId of its own", e.Index, e.EventID, e.Existing)
	}
	return fmt.Sprintf("event %d: idempotencyKey %q was already used for different content (sequence %d); use a new key for a new event", e.Index, e.IdempotencyKey, e.Existing)
}

// LimitError reports a batch or event over the store's limits.
type LimitError struct {
	What  string // "batch" or "event"
	Index int    // for an event, its position in the batch
	Limit int
	Got   int
}

func (e *LimitError) Error() string {
	if e.What == "batch" {
		return fmt.Sprintf("batch has %d events; at most %d are allowed per append", e.Got, e.Limit)
	}
	return fmt.Sprintf("event %d is %d bytes; at most %d are allowed", e.Index, e.Got, e.Limit)
}

// SessionMismatchError reports an event whose sessionId is not the session appended to.
type SessionMismatchError struct {
	Index     int
	SessionID string
	EventSID  string
}

func (e *SessionMismatchError) Error() string {
	return fmt.Sprintf("event %d has sessionId %q but is appended to session %q", e.Index, e.EventSID, e.SessionID)
}

// RunError reports a run status event the run projection refuses (wrapping
// *contract.TransitionError or a lineage mismatch).
type RunError struct {
	Index int
	Err   error
}

func (e *RunError) Error() string { return fmt.Sprintf("event %d: %v", e.Index, e.Err) }
func (e *RunError) Unwrap() error { return e.Err }
