// Package sim is the seeded simulation tester of the session semantics (issue #32): from a
// seed it draws a sequence of operations (appends valid and not, run statuses, claims,
// renewals, releases, stop and steer commands, multitask strategies, byte-for-byte retries of
// earlier requests, clock advances past lease TTLs, lease expiry and sweeps) and runs each
// against the real session.Service over a real store, in process, with time from a simulated
// clock, and against the reference model (package model). After each step it compares the
// two (the decision and its error code, the runs' statuses, attempts, fencing tokens and
// leases, the record status, the log's last sequence) and checks invariants of the real
// store alone (a terminal run never changes, fencing tokens only grow, a retry answered as a
// duplicate changes nothing, every acknowledged event is readable where it was acknowledged).
// A divergence is shrunk to a short sequence and printed as a Go test case (Shrink).
package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/internal/sim/model"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
)

// Simulated settings of the server: every run gets two attempts, a session is stale after a
// minute without a heartbeat, the lease expirer runs every second and the sweeper every 20
// seconds of simulated time (the two intervals must differ: the model tells the passes apart
// by them).
const (
	MaxAttempts    = 2
	StaleAfter     = time.Minute
	ExpiryInterval = time.Second
	SweepInterval  = 20 * time.Second
	sessionID      = "S-sim"
)

// t0 is when the simulated session starts.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Divergence is a step where the real service and the model disagree, or an invariant broke.
type Divergence struct {
	Step int    // index of the op in the sequence
	Op   Op     // the op
	What string // what differs
}

func (d *Divergence) Error() string {
	return fmt.Sprintf("step %d %s: %s", d.Step, d.Op.GoString(), d.What)
}

// request is what an op sent the first time, kept for a byte-for-byte retry.
type request struct {
	kind   string
	events []*contract.EncodedEvent // an append's
	lease  *store.LeaseRef
	strat  string
	cmd    []byte // a command's JSON
	// the model's view of the same request
	key      string
	runID    string
	status   string
	mlease   *model.LeaseRef
	expected int64
}

// sim is one simulation: the real service, the model, and what the ops sent.
type sim struct {
	ctx    context.Context
	st     store.Store
	svc    *session.Service
	clock  *Clock
	m      *model.Model
	sent   map[int]*request
	leases map[string]map[int64]string // run id -> token -> lease id, from the claims
	// invariants' memory
	ended  map[string]string // run id -> its terminal status
	tokens map[string]int64  // run id -> its last fencing token
	// decisions counts the decisions by op kind (nil: not counted)
	decisions map[string]int
}

// Run runs ops against a new session in st (an empty store) and the model, and returns the
// first divergence (nil: none) or an error of the harness itself.
func Run(ctx context.Context, st store.Store, ops []Op) (*Divergence, error) {
	s, err := start(ctx, st)
	if err != nil {
		return nil, err
	}
	defer s.svc.Close()
	for i, op := range ops {
		if d, err := s.step(i, op); d != nil || err != nil {
			return d, err
		}
	}
	return nil, nil
}

// Simulate draws n ops from seed and runs them as Run does; it returns the ops it ran (up to
// and including a divergent one). When decisions is not nil, it counts there each op kind's
// decisions ("status LEASE_LOST"), to show what a run covered.
func Simulate(ctx context.Context, st store.Store, seed uint64, n int, decisions map[string]int) ([]Op, *Divergence, error) {
	s, err := start(ctx, st)
	if err != nil {
		return nil, nil, err
	}
	defer s.svc.Close()
	s.decisions = decisions
	g := newGenerator(seed)
	ops := make([]Op, 0, n)
	for i := range n {
		op := g.next(i+1, s.m)
		ops = append(ops, op)
		if d, err := s.step(i, op); d != nil || err != nil {
			return ops, d, err
		}
	}
	return ops, nil, nil
}

func start(ctx context.Context, st store.Store) (*sim, error) {
	yes := true
	sess := &store.Session{
		Record: contract.SessionRecord{SchemaVersion: 1, SessionID: sessionID, AgentID: "agent", Role: "implementer",
			Status: contract.SessionStatusRunning, StartedAt: contract.FormatTime(t0)},
		Snapshot: contract.Snapshot{Mode: "work", ModelID: "model", Capabilities: contract.Capabilities{Steering: &yes}},
	}
	if err := st.CreateSession(ctx, sess); err != nil {
		return nil, fmt.Errorf("create the simulated session: %w", err)
	}
	s := &sim{ctx: ctx, st: st, clock: NewClock(t0), m: model.New(t0, MaxAttempts, StaleAfter), sent: map[int]*request{},
		leases: map[string]map[int64]string{}, ended: map[string]string{}, tokens: map[string]int64{}}
	s.svc = session.New(st, session.Options{Clock: s.clock, MaxAttempts: MaxAttempts, StaleAfter: StaleAfter,
		LeaseExpiryInterval: ExpiryInterval, SweepInterval: SweepInterval})
	if err := s.svc.Start(ctx); err != nil {
		return nil, err
	}
	s.clock.WaitArmed(2) // the lease expirer's and the sweeper's timers
	return s, nil
}

// tick is the model's side of a pass of the service's background work, called by the clock
// just before the timer of that pass fires at at.
func (s *sim) tick(interval time.Duration, at time.Time) {
	s.m.Now = at
	switch interval {
	case ExpiryInterval:
		s.m.ExpireLeases(func(r *model.Run) string { return "attempt-of-" + r.ID })
	case SweepInterval:
		s.m.Sweep()
	}
}

// step runs one op on both sides and compares them.
func (s *sim) step(i int, op Op) (*Divergence, error) {
	diverge := func(format string, args ...any) (*Divergence, error) {
		return &Divergence{Step: i, Op: op, What: fmt.Sprintf(format, args...) + "; model: " + s.m.String()}, nil
	}
	last, err := s.svc.LastSequence(s.ctx, sessionID)
	if err != nil {
		return nil, err
	}
	var want, got string
	duplicateOK := false
	switch op.Kind {
	case OpAdvance:
		// The background passes due meanwhile run at their instants, on both sides.
		s.clock.Advance(time.Duration(op.Ms)*time.Millisecond, s.tick)
		s.m.Now = s.clock.Now()
	case OpExpire:
		if _, err := s.svc.ExpireLeases(s.ctx, session.LeaseExpiryOptions{MaxAttempts: MaxAttempts}); err != nil {
			return nil, err
		}
		s.m.ExpireLeases(func(r *model.Run) string { return "attempt-of-" + r.ID })
	case OpSweep:
		if _, err := s.svc.Sweep(s.ctx, session.SweepOptions{StaleAfter: StaleAfter}); err != nil {
			return nil, err
		}
		s.m.Sweep()
	case OpClaim:
		want, got, err = s.claim(op)
	case OpRenew, OpRelease:
		want, got, err = s.lease(op)
	case OpQueue, OpStatus, OpStop, OpSteer:
		req := s.request(op)
		if req == nil {
			return nil, nil // about a run that does not exist yet: nothing to send
		}
		s.sent[op.ID] = req
		want, got, err = s.send(req)
	case OpRetry:
		req := s.sent[op.Of]
		if req == nil {
			return nil, nil // the op it resends was shrunk away, or sent nothing
		}
		want, got, err = s.send(req)
		duplicateOK = true
	default:
		return nil, fmt.Errorf("unknown op kind %q", op.Kind)
	}
	if err != nil {
		return nil, err
	}
	if want != got {
		return diverge("decision %s, model %s", got, want)
	}
	if s.decisions != nil {
		key := []string{op.Kind}
		for _, w := range strings.Fields(got) {
			if w != "of" && !strings.HasPrefix(w, "run-") && !strings.HasPrefix(w, "lc-") {
				key = append(key, w) // the decision without the ids of runs
			}
		}
		s.decisions[strings.Join(key, " ")]++
	}
	if duplicateOK && strings.HasPrefix(got, model.Duplicate) {
		if now, err := s.svc.LastSequence(s.ctx, sessionID); err != nil || now != last {
			return diverge("a retry answered as a duplicate moved the log from %d to %d (%v)", last, now, err)
		}
	}
	return s.compare(diverge)
}

// runAt returns the real and the model's run at index i (nil, nil when there is none).
func (s *sim) runAt(i int) (*contract.Run, *model.Run, error) {
	runs, err := s.svc.Runs(s.ctx, sessionID)
	if err != nil || i < 0 || i >= len(runs) || i >= len(s.m.Runs) {
		return nil, nil, err
	}
	return &runs[i], s.m.Runs[i], nil
}

// leaseRef resolves an op's lease choice for run r, on both sides.
func (s *sim) leaseRef(choice string, r *model.Run) (*store.LeaseRef, *model.LeaseRef) {
	forged := func() (*store.LeaseRef, *model.LeaseRef) {
		return &store.LeaseRef{LeaseID: "L-forged", Token: 99}, &model.LeaseRef{Forged: true}
	}
	var token int64
	switch choice {
	case LeaseNone:
		return nil, nil
	case LeaseStale:
		if r.Token < 2 {
			return forged()
		}
		token = 1
	default:
		if r.Token == 0 {
			return nil, nil // never claimed: a runtime without workers sends no lease
		}
		token = r.Token
	}
	return &store.LeaseRef{LeaseID: s.leases[r.ID][token], Token: token}, &model.LeaseRef{Token: token}
}

// request builds the request of an append or command op, or returns nil when the run it is
// about does not exist.
func (s *sim) request(op Op) *request {
	ts := contract.FormatTime(s.clock.Now())
	key := fmt.Sprintf("op%d", op.ID)
	event := func(n int, header, eventType, payload string) *contract.EncodedEvent {
		raw := fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"%s-%d","sessionId":%q,"sequence":0,"idempotencyKey":"%s-%d","occurredAt":%q%s,"eventType":%q,"payload":%s}`,
			key, n, sessionID, key, n, ts, header, eventType, payload)
		ev, err := contract.CheckEvent([]byte(raw), contract.Limits{})
		if err != nil {
			panic(fmt.Sprintf("sim: the simulator built an invalid event %s: %v", raw, err))
		}
		return ev
	}
	switch op.Kind {
	case OpQueue:
		run, msg := "run-"+key, "m-"+key
		return &request{kind: op.Kind, key: key, runID: run, strat: op.Strategy, events: []*contract.EncodedEvent{
			event(0, "", "message", fmt.Sprintf(`{"messageId":%q,"role":"user","operation":"append","parts":[{"type":"text","text":"go on"}]}`, msg)),
			event(1, fmt.Sprintf(`,"runId":%q,"sourceMessageId":%q`, run, msg), "status", `{"status":"queued"}`),
		}}
	case OpStatus:
		real, mr, err := s.runAt(op.Run)
		if err != nil || real == nil {
			return nil
		}
		lease, mlease := s.leaseRef(op.Lease, mr)
		payload := map[string]string{
			model.Queued: `{"status":"queued"}`, model.WaitingApproval: `{"status":"waiting_approval"}`,
			model.Running:   fmt.Sprintf(`{"status":"running","startedAt":%q}`, ts),
			model.Stopping:  fmt.Sprintf(`{"status":"stopping","stoppingRequestedAt":%q}`, ts),
			model.Completed: fmt.Sprintf(`{"status":"completed","completedAt":%q,"durationMs":0}`, ts),
			model.Failed:    fmt.Sprintf(`{"status":"failed","failedAt":%q,"durationMs":0}`, ts),
			model.Stopped:   fmt.Sprintf(`{"status":"stopped","stoppedAt":%q,"durationMs":0}`, ts),
		}[op.Status]
		return &request{kind: op.Kind, key: key, runID: real.RunID, status: op.Status, lease: lease, mlease: mlease,
			events: []*contract.EncodedEvent{event(0, fmt.Sprintf(`,"runId":%q,"sourceMessageId":%q`, real.RunID, real.SourceMessageID), "status", payload)}}
	case OpStop, OpSteer:
		runID := "run-none"
		if real, _, err := s.runAt(op.Run); err == nil && real != nil {
			runID = real.RunID
		} else if op.Run >= 0 {
			return nil
		}
		expected := s.m.Last
		if op.StaleSeq {
			expected--
		}
		payload := `{"reason":"a person asked"}`
		if op.Kind == OpSteer {
			payload = fmt.Sprintf(`{"targetRunId":%q,"text":"use the other parser"}`, runID)
		}
		cmd := fmt.Sprintf(`{"contract":"AgentSessionCommand","commandId":"c-%s","sessionId":%q,"runId":%q,"idempotencyKey":%q,"expectedSequence":%d,"issuedAt":%q,"commandType":%q,"payload":%s}`,
			key, sessionID, runID, key, expected, ts, op.Kind, payload)
		return &request{kind: op.Kind, key: key, runID: runID, expected: expected, cmd: []byte(cmd)}
	}
	return nil
}

// send sends req to both sides and returns their decisions.
func (s *sim) send(req *request) (want, got string, err error) {
	switch req.kind {
	case OpQueue, OpStatus:
		var interrupted string
		if req.kind == OpQueue {
			want, interrupted = s.m.Queue(req.key, req.runID, req.strat)
		} else {
			want = s.m.Status(req.key, s.m.Find(req.runID), req.status, req.mlease)
		}
		if interrupted != "" {
			want += " interrupting " + interrupted
		}
		res, err := s.svc.AppendWith(s.ctx, sessionID, req.events, session.AppendParams{Lease: req.lease, Multitask: req.strat})
		if err != nil {
			return want, refusal(err), nil
		}
		got = model.Duplicate
		if res.Added {
			got = model.Accepted
			if err := s.readable(req.events, res); err != nil {
				return want, "", err
			}
		}
		if res.Interrupted != nil {
			got += " interrupting " + res.Interrupted.RunID
		}
		return want, got, nil
	default:
		if req.kind == OpStop {
			want = s.m.Stop(req.key, s.m.Find(req.runID))
		} else {
			want = s.m.Steer(req.key, s.m.Find(req.runID), req.expected)
		}
		c, err := contract.DecodeCommand(req.cmd, contract.Limits{})
		if err != nil {
			return "", "", fmt.Errorf("the simulator built an invalid command %s: %w", req.cmd, err)
		}
		res, err := s.svc.Execute(s.ctx, sessionID, c, session.ExecOptions{})
		if err != nil {
			return "", "", fmt.Errorf("command %s: %w", req.cmd, err)
		}
		got = res.Outcome
		if res.Error != nil {
			got = string(res.Error.Code)
		}
		return want, got, nil
	}
}

// readable checks that the events an append acknowledged are in the store where it said.
func (s *sim) readable(events []*contract.EncodedEvent, res *session.Appended) error {
	for i, r := range res.Results {
		evs, err := s.svc.Events(s.ctx, sessionID, r.Sequence-1, 1)
		if err != nil {
			return err
		}
		if len(evs) != 1 || evs[0].Sequence != r.Sequence || evs[0].EventID != events[i].EventID {
			return fmt.Errorf("invariant: event %q acknowledged at sequence %d is not readable there (read %+v)", events[i].EventID, r.Sequence, evs)
		}
	}
	return nil
}

// refusal is the error code of a refused append, as the API answers it.
func refusal(err error) string {
	var (
		le     *store.LeaseError
		active *contract.ActiveRunError
		run    *store.RunError
	)
	switch {
	case errors.As(err, &le) && le.Reason == store.LeaseRequired:
		return model.LeaseRequired
	case errors.As(err, &le):
		return model.LeaseLost
	case errors.As(err, &active):
		return model.InvalidSessionState
	case errors.As(err, &run):
		return model.InvalidTransition
	}
	return "error: " + err.Error()
}

// claim claims on both sides.
func (s *sim) claim(op Op) (want, got string, err error) {
	ttl := time.Duration(op.TTL) * time.Second
	want = model.NothingToClaim
	if r := s.m.Claim(ttl); r != nil {
		want = fmt.Sprintf("claimed token %d of %s", r.Token, r.ID)
	}
	c, err := s.svc.Claim(s.ctx, store.ClaimFilter{}, 0, ttl)
	if err != nil {
		return "", "", fmt.Errorf("claim: %w", err)
	}
	if c == nil {
		return want, model.NothingToClaim, nil
	}
	if s.leases[c.Run.RunID] == nil {
		s.leases[c.Run.RunID] = map[int64]string{}
	}
	s.leases[c.Run.RunID][c.Lease.Token] = c.Lease.LeaseID
	return want, fmt.Sprintf("claimed token %d of %s", c.Lease.Token, c.Run.RunID), nil
}

// lease renews or releases on both sides.
func (s *sim) lease(op Op) (want, got string, err error) {
	real, mr, err := s.runAt(op.Run)
	if err != nil || real == nil {
		return "", "", err
	}
	ref, mref := s.leaseRef(op.Lease, mr)
	if ref == nil {
		ref, mref = &store.LeaseRef{LeaseID: "L-forged", Token: 99}, &model.LeaseRef{Forged: true}
	}
	ttl := time.Duration(op.TTL) * time.Second
	if op.Kind == OpRenew {
		want = s.m.Renew(mr, *mref, ttl)
		_, err = s.svc.RenewLease(s.ctx, sessionID, real.RunID, *ref, ttl)
	} else {
		want = s.m.Release(mr, *mref)
		err = s.svc.ReleaseLease(s.ctx, sessionID, real.RunID, *ref)
	}
	if err != nil {
		return want, refusal(err), nil
	}
	return want, model.Accepted, nil
}

// compare checks the real state against the model's, and the invariants.
func (s *sim) compare(diverge func(string, ...any) (*Divergence, error)) (*Divergence, error) {
	runs, err := s.svc.Runs(s.ctx, sessionID)
	if err != nil {
		return nil, err
	}
	leases, err := s.svc.RunLeases(s.ctx, sessionID)
	if err != nil {
		return nil, err
	}
	sess, err := s.st.GetSession(s.ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if len(runs) != len(s.m.Runs) || len(leases) != len(runs) {
		return diverge("%d runs (%d leases), model %d", len(runs), len(leases), len(s.m.Runs))
	}
	for i, r := range runs {
		mr, rl := s.m.Runs[i], leases[i]
		if strings.HasPrefix(mr.ID, "attempt-of-") {
			mr.ID = r.RunID // the server derives a new attempt's id; the model takes it
		}
		if mr.ID != r.RunID || mr.Status != r.Status || mr.Attempt != rl.Attempt || mr.Token != rl.Token || (mr.Lease == nil) != (rl.Held == nil) {
			return diverge("run %d is %s %s attempt %d token %d held %v", i, r.RunID, r.Status, rl.Attempt, rl.Token, rl.Held != nil)
		}
		if mr.Lease != nil && (!mr.Lease.Expires.Equal(rl.Held.ExpiresAt) || mr.Lease.Token != rl.Held.Token) {
			return diverge("run %d's lease is token %d until %s, model token %d until %s", i, rl.Held.Token, rl.Held.ExpiresAt, mr.Lease.Token, mr.Lease.Expires)
		}
		if prev, ok := s.ended[r.RunID]; ok && prev != r.Status {
			return diverge("invariant: run %s ended %s and is now %s", r.RunID, prev, r.Status)
		}
		if model.Terminal(r.Status) {
			s.ended[r.RunID] = r.Status
		}
		if rl.Token < s.tokens[r.RunID] {
			return diverge("invariant: run %s's fencing token went from %d to %d", r.RunID, s.tokens[r.RunID], rl.Token)
		}
		s.tokens[r.RunID] = rl.Token
	}
	if sess.Record.Status != s.m.Record {
		return diverge("record status %s", sess.Record.Status)
	}
	if sess.LastSequence != s.m.Last {
		return diverge("last sequence %d", sess.LastSequence)
	}
	return nil, nil
}
