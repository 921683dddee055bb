package wire

import "github.com/sessiond/sessiond/contract"

// LeaseHeader is the request header that carries a lease on an append: "<leaseId>:<token>".
const LeaseHeader = "Sessiond-Lease"

// ClaimRequest is the body of POST /v1/runs/claim: the filter of the runs the worker takes, how
// long to wait for one, and how long its lease lasts. Empty filter fields match every run.
type ClaimRequest struct {
	// Project matches the session record's project.
	Project string `json:"project,omitempty"`
	// AgentID matches the session record's agent_id.
	AgentID string `json:"agent_id,omitempty"`
	// Role matches the session record's role.
	Role string `json:"role,omitempty"`
	// Capabilities are capability names the session's snapshot must all have.
	Capabilities []string `json:"capabilities,omitempty"`
	// Wait is how long to wait for a run when none is queued, as a duration ("10s"; at most
	// 30s; default 0: answer at once).
	Wait string `json:"wait,omitempty"`
	// LeaseTTL is how long the lease lasts without a renewal ("30s" by default; 1s to 10m).
	LeaseTTL string `json:"leaseTtl,omitempty"`
}

// Lease is a lease held on a run.
type Lease struct {
	LeaseID string `json:"leaseId"`
	// Token is the fencing token: one more every time the run changes hands.
	Token int64 `json:"token"`
	// ExpiresAt is when the lease expires unless renewed (RFC 3339, UTC).
	ExpiresAt string `json:"expiresAt"`
	// Header is the value of the Sessiond-Lease header that appends under this lease carry.
	Header string `json:"header"`
}

// Claim is the answer of a claim that got a run: the run, its lease and its attempt number.
type Claim struct {
	Run     contract.Run `json:"run"`
	Lease   Lease        `json:"lease"`
	Attempt int          `json:"attempt"`
}

// LeaseRequest is the body of a renewal (POST /v1/sessions/{id}/runs/{runId}/lease) and of a
// release (POST …/lease/release): the lease held, and for a renewal its new length.
type LeaseRequest struct {
	LeaseID string `json:"leaseId"`
	Token   int64  `json:"token"`
	// LeaseTTL is how long the renewed lease lasts (default 30s; 1s to 10m). Not for a release.
	LeaseTTL string `json:"leaseTtl,omitempty"`
}

// RunLease is the lease state the run resource shows beside the run.
type RunLease struct {
	// Attempt is the run's attempt number (1 unless it was queued again after an expired
	// lease).
	Attempt int `json:"attempt"`
	// FencingToken is the run's last fencing token (0 before its first claim).
	FencingToken int64 `json:"fencingToken"`
	// Lease is the lease held on the run now, null when none is.
	Lease *Lease `json:"lease"`
}
