package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/sessiond/sessiond/contract"
)

// Workers and leases (docs/runtime.md, "Workers and leases").
//
// A queued run is claimable while nobody holds a lease on it. ClaimRun gives the oldest
// claimable run matching a filter (oldest by the time it was queued, across sessions) a lease:
// a leaseId, a fencing token one higher than the run's previous one, and an expiry. The holder
// renews it (RenewLease) before it expires and may release it (ReleaseLease). Appends from a
// runtime carry AppendOptions.Fence: a new event of a leased run is written only when the
// append names the run's current lease (rule 3d of PlanAppend). A run that becomes terminal
// loses its lease; ExpiredLeases finds the leases that were not renewed in time, by index.
//
// Leases are operational state beside the run projection, like a session's heartbeat beside
// its record: what they cause (a failed run, a new attempt) is appended to the log as events.

// ClaimFilter selects the runs a worker may claim. Empty fields match every run.
type ClaimFilter struct {
	// Project and AgentID match the run's session record (project, agent_id).
	Project string
	AgentID string
	// Role matches the session record's role.
	Role string
	// Capabilities are capability names ([contract.CapabilityNames]) the run's session snapshot
	// must all have.
	Capabilities []string
}

// LeaseRef names a lease as its holder knows it: the leaseId and the fencing token.
type LeaseRef struct {
	LeaseID string
	Token   int64
}

// Lease is a lease held on a run.
type Lease struct {
	LeaseID   string
	Token     int64
	ExpiresAt time.Time
}

// Ref returns the lease's LeaseRef.
func (l Lease) Ref() LeaseRef { return LeaseRef{LeaseID: l.LeaseID, Token: l.Token} }

// Claim is a run ClaimRun gave a lease on.
type Claim struct {
	SessionID string
	Run       contract.Run
	Lease     Lease
	// Attempt is the run's attempt number (1 for a run that is not a retry of an expired one).
	Attempt int
}

// RunLease is the lease state of one run, as the run resource shows it.
type RunLease struct {
	RunID string
	// Held is the lease held on the run now; nil when none is.
	Held *Lease
	// Token is the run's last fencing token (0 before its first claim).
	Token int64
	// Attempt is the run's attempt number (1 unless it was queued again after an expired lease).
	Attempt int
}

// ExpiredLease is a lease ExpiredLeases found past its expiry.
type ExpiredLease struct {
	SessionID string
	RunID     string
	Lease     Lease
	Attempt   int
}

// QueuedRun is a run QueuedRuns found waiting for its first claim.
type QueuedRun struct {
	SessionID string
	RunID     string
	// QueuedAt is when the run became claimable.
	QueuedAt time.Time
}

// Fence is the lease check of an append (AppendOptions.Fence).
type Fence struct {
	// Lease is the lease the append carries; nil when it carries none.
	Lease *LeaseRef
	// ExpiredBy, when not zero, also requires the lease named to have expired by then: the
	// expirer appends under the lease it found expired, and a renewal since makes it refuse.
	ExpiredBy time.Time
}

// ErrNothingToClaim is returned by ClaimRun when no claimable run matches the filter.
var ErrNothingToClaim = errors.New("no queued run matches the filter")

// Lease refusals (LeaseError.Reason).
const (
	// LeaseRequired: the run is leased and the append carries no lease.
	LeaseRequired = "required"
	// LeaseLost: the lease given is not the run's current one (stale, forged, another run's,
	// released or expired).
	LeaseLost = "lost"
)

// LeaseError reports an append, renewal or release refused because of a run's lease.
type LeaseError struct {
	Reason string // LeaseRequired or LeaseLost
	// Index is the event's position in the batch for an append, -1 otherwise.
	Index int
	RunID string
	Given *LeaseRef // the lease given, nil when none
	// Why says what is wrong with the lease given (for LeaseLost).
	Why string
}

func (e *LeaseError) Error() string {
	at := ""
	if e.Index >= 0 {
		at = fmt.Sprintf("event %d: ", e.Index)
	}
	if e.Reason == LeaseRequired {
		return fmt.Sprintf("%srun %q is leased by a worker, and the append carries no lease", at, e.RunID)
	}
	return fmt.Sprintf("%slease %s:%d is not the lease of run %q: %s", at, e.Given.LeaseID, e.Given.Token, e.RunID, e.Why)
}

// CheckLease decides whether a holder presenting given (nil: none) may act on a run whose
// held lease is held (nil: none), at time now (zero: expiry is not checked), as PlanAppend,
// RenewLease and ReleaseLease do. It returns nil or a *LeaseError with Index -1.
func CheckLease(runID string, held *Lease, given *LeaseRef, now time.Time) error {
	switch {
	case given == nil && held == nil:
		return nil
	case given == nil:
		return &LeaseError{Reason: LeaseRequired, Index: -1, RunID: runID}
	case held == nil:
		return &LeaseError{Reason: LeaseLost, Index: -1, RunID: runID, Given: given, Why: "the run has no lease now (it was released, expired, ended, or never claimed)"}
	case held.LeaseID != given.LeaseID:
		return &LeaseError{Reason: LeaseLost, Index: -1, RunID: runID, Given: given, Why: "another lease holds the run"}
	case held.Token != given.Token:
		return &LeaseError{Reason: LeaseLost, Index: -1, RunID: runID, Given: given, Why: fmt.Sprintf("the run's fencing token is %d", held.Token)}
	case !now.IsZero() && !held.ExpiresAt.After(now):
		return &LeaseError{Reason: LeaseLost, Index: -1, RunID: runID, Given: given, Why: "the lease expired at " + contract.FormatTime(held.ExpiresAt)}
	}
	return nil
}

// checkFence applies rule 3d of PlanAppend to the new event at index i, of run runID.
func checkFence(f *Fence, i int, runID string, held *Lease) error {
	if err := CheckLease(runID, held, f.Lease, time.Time{}); err != nil {
		le := err.(*LeaseError)
		le.Index = i
		return le
	}
	if held != nil && !f.ExpiredBy.IsZero() && held.ExpiresAt.After(f.ExpiredBy) {
		return &LeaseError{Reason: LeaseLost, Index: i, RunID: runID, Given: f.Lease, Why: "the lease was renewed until " + contract.FormatTime(held.ExpiresAt)}
	}
	return nil
}

// UnknownCapability returns the first name in names that is not a capability of the contract
// ([contract.CapabilityNames]), or "" when all are.
func UnknownCapability(names []string) string {
	for _, n := range names {
		known := false
		for _, c := range contract.CapabilityNames {
			if c == n {
				known = true
				break
			}
		}
		if !known {
			return n
		}
	}
	return ""
}
