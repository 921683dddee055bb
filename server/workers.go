package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/wire"
)

// workerRoutes is the workers part of the route table (see [Server.routes]): claims and
// leases (docs/api.md, "Workers and leases").
func (s *Server) workerRoutes() []route {
	return []route{
		{pattern: "POST /v1/runs/claim", access: appendRoute, handle: s.handleClaim, body: jsonBody},
		{pattern: "POST /v1/sessions/{id}/runs/{runId}/lease", access: appendRoute, handle: s.handleRenewLease, body: jsonBody},
		{pattern: "POST /v1/sessions/{id}/runs/{runId}/lease/release", access: appendRoute, handle: s.handleReleaseLease, body: jsonBody},
	}
}

// durationField parses an optional duration field of a request body ("10s") within [lo, hi];
// def when it is empty.
func durationField(name, v string, def, lo, hi time.Duration) (time.Duration, *api.Error) {
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < lo || d > hi {
		return 0, api.Errorf(api.CodeContractViolation, "request body: field %q is %s; it must be a duration from %s to %s, such as \"10s\"", name, quote(v), lo, hi)
	}
	return d, nil
}

// checkClaim checks a claim's filter: each field, when given, is an id the records could hold,
// and each capability one of the contract's.
func checkClaim(req *wire.ClaimRequest) *api.Error {
	for _, f := range []struct{ name, v string }{{"project", req.Project}, {"agent_id", req.AgentID}, {"role", req.Role}} {
		if f.v != "" && (strings.TrimSpace(f.v) != f.v || len(f.v) > 256) {
			return api.Errorf(api.CodeContractViolation, "request body: field %q is %s; it must be at most 256 bytes without leading or trailing spaces, or absent to match every run", f.name, quote(f.v))
		}
	}
	if c := store.UnknownCapability(req.Capabilities); c != "" {
		return api.Errorf(api.CodeContractViolation, "request body: field \"capabilities\" holds %s, which is not a capability; use the names of a snapshot's capabilities (%s)", quote(c), strings.Join(contract.CapabilityNames, ", "))
	}
	return nil
}

// handleClaim takes the oldest queued run matching the body's filter with a lease, waiting up
// to the body's wait for one: 200 with the run and its lease, or 204 when none came.
func (s *Server) handleClaim(w http.ResponseWriter, r *http.Request) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var req wire.ClaimRequest
	if len(body) > 0 {
		if aerr := decodeStrict(body, &req); aerr != nil {
			writeError(w, aerr)
			return
		}
	}
	if aerr := checkClaim(&req); aerr != nil {
		writeError(w, aerr)
		return
	}
	if req.Project, aerr = projectFilter(r, req.Project); aerr != nil {
		writeError(w, aerr)
		return
	}
	wait, aerr := durationField("wait", req.Wait, 0, 0, session.MaxClaimWait)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	ttl, aerr := durationField("leaseTtl", req.LeaseTTL, session.DefaultLeaseTTL, session.MinLeaseTTL, session.MaxLeaseTTL)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	// The wait ends with the request or the server's shutdown; the claim itself, once
	// decided, is not tied to the request (a claim is never half taken).
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.life, cancel)
	defer stop()
	c, err := s.svc.Claim(ctx, store.ClaimFilter{Project: req.Project, AgentID: req.AgentID, Role: req.Role, Capabilities: req.Capabilities}, wait, ttl)
	if err != nil {
		writeError(w, storeError(err, ""))
		return
	}
	if c == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, wire.Claim{Run: c.Run, Lease: leaseOf(c.Lease), Attempt: c.Attempt})
}

// leaseOf is the wire form of a lease.
func leaseOf(l store.Lease) wire.Lease {
	return wire.Lease{LeaseID: l.LeaseID, Token: l.Token, ExpiresAt: contract.FormatTime(l.ExpiresAt), Header: l.LeaseID + ":" + strconv.FormatInt(l.Token, 10)}
}

// decodeLease reads the body of a renewal or release.
func (s *Server) decodeLease(w http.ResponseWriter, r *http.Request) (wire.LeaseRequest, *api.Error) {
	var req wire.LeaseRequest
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		return req, aerr
	}
	if aerr := decodeStrict(body, &req); aerr != nil {
		return req, aerr
	}
	if req.LeaseID == "" {
		return req, api.Errorf(api.CodeContractViolation, "request body: field \"leaseId\" is missing; send the leaseId and token the claim answered")
	}
	return req, nil
}

// handleRenewLease extends a lease: 200 with the lease and its new expiry, or 409 LEASE_LOST.
func (s *Server) handleRenewLease(w http.ResponseWriter, r *http.Request) {
	id, runID := r.PathValue("id"), r.PathValue("runId")
	req, aerr := s.decodeLease(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	ttl, aerr := durationField("leaseTtl", req.LeaseTTL, session.DefaultLeaseTTL, session.MinLeaseTTL, session.MaxLeaseTTL)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	l, err := s.svc.RenewLease(r.Context(), id, runID, store.LeaseRef{LeaseID: req.LeaseID, Token: req.Token}, ttl)
	if err != nil {
		writeError(w, storeError(err, id))
		return
	}
	writeJSON(w, http.StatusOK, leaseOf(l))
}

// handleReleaseLease drops a lease: 204, or 409 LEASE_LOST.
func (s *Server) handleReleaseLease(w http.ResponseWriter, r *http.Request) {
	id, runID := r.PathValue("id"), r.PathValue("runId")
	req, aerr := s.decodeLease(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if req.LeaseTTL != "" {
		writeError(w, api.Errorf(api.CodeContractViolation, "request body: field \"leaseTtl\" is for a renewal; a release takes only leaseId and token"))
		return
	}
	if err := s.svc.ReleaseLease(r.Context(), id, runID, store.LeaseRef{LeaseID: req.LeaseID, Token: req.Token}); err != nil {
		writeError(w, storeError(err, id))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// leaseHeader parses the Sessiond-Lease header of an append: nil when absent.
func leaseHeader(r *http.Request) (*store.LeaseRef, *api.Error) {
	vs := r.Header.Values(wire.LeaseHeader)
	if len(vs) == 0 {
		return nil, nil
	}
	bad := func(why string) *api.Error {
		return api.Errorf(api.CodeLeaseLost, "header %s %s is not a lease: %s; send \"<leaseId>:<token>\" as the claim answered it (lease.header)", wire.LeaseHeader, quote(strings.Join(vs, ", ")), why)
	}
	if len(vs) > 1 {
		return nil, bad("it is given more than once")
	}
	id, tok, ok := strings.Cut(vs[0], ":")
	if !ok || id == "" {
		return nil, bad("no leaseId before a colon")
	}
	n, err := strconv.ParseInt(tok, 10, 64)
	if err != nil || n < 1 {
		return nil, bad("the token is not a positive integer")
	}
	return &store.LeaseRef{LeaseID: id, Token: n}, nil
}

// leaseError is the API error of a refusal for a run's lease.
func leaseError(le *store.LeaseError) *api.Error {
	if le.Reason == store.LeaseRequired {
		return api.Errorf(api.CodeLeaseRequired, "%v; send the %s header with the lease the claim answered (lease.header), or claim the run first", le, wire.LeaseHeader)
	}
	return api.Errorf(api.CodeLeaseLost, "%v; stop working on the run and claim again (POST /v1/runs/claim)", le)
}

// runResource is a run as the API shows it, with its lease state (nil: none known).
func runResource(run contract.Run, rl *store.RunLease) api.RunResource {
	out := api.RunResource{Run: run, RunLease: wire.RunLease{Attempt: 1}}
	if rl != nil {
		out.Attempt, out.FencingToken = rl.Attempt, rl.Token
		if rl.Held != nil {
			l := leaseOf(*rl.Held)
			out.Lease = &l
		}
	}
	return out
}
