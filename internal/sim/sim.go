// Package sim is the seeded simulation tester of the session semantics (issue #32): from a
// seed it draws a sequence of operations (appends valid and not, run statuses, claims,
// renewals, releases, stop and steer commands, multitask strategies, byte-for-byte retries of
// earlier requests, batches of racing requests, clock advances that run the service's own
// lease expirer and sweeper at simulated instants, on-demand passes, restarts of the store)
// and runs each against the real session.Service over a real store (one instance, or two on
// one PostgreSQL database), in process, with time from a simulated clock (Clock), and against
// the reference model (package model). A sequential step must agree with the model (the
// decision and its error code, the runs' statuses, attempts, fencing tokens and leases, the
// record status, the log's last sequence); a batch of racing requests must be linearizable:
// some serial order of them, run through the model, explains every answer and the state after
// them. Invariants of the real store are checked alone (a terminal run never changes, fencing
// tokens only grow, a retry answered as a duplicate changes nothing, every acknowledged event
// is readable where it was acknowledged, also after a restart). A divergence is shrunk to a
// short sequence and printed as a Go test case (Shrink).
package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
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

// Config is what varies between simulations besides the ops: the server's settings.
type Config struct {
	// QueueTimeout is the server's queue timeout (session.Options.QueueTimeout; 0: none).
	QueueTimeout time.Duration
}

// ConfigFor is the configuration a seed simulates: odd seeds run with a queue timeout of 25
// seconds, even ones without, so that both the default and the timeout are covered.
func ConfigFor(seed uint64) Config {
	if seed%2 == 1 {
		return Config{QueueTimeout: 25 * time.Second}
	}
	return Config{}
}

// t0 is when the simulated session starts.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Backend is the database a simulation runs on.
type Backend struct {
	// Open opens the database: empty at the first call, as it was left at the next ones (a
	// restart). With Instances above 1, the stores it opens while another is open are other
	// instances on the same database.
	Open func() (store.Store, error)
	// Instances is how many instances the simulation runs at once (1: SQLite; 2: PostgreSQL).
	Instances int
	// Close drops the database, once every store opened is closed.
	Close func()
	// HeartbeatResolution is the driver's resolution of an append's heartbeat (docs/storage.md:
	// one second on SQLite).
	HeartbeatResolution time.Duration
	// ClaimsSkipLocked says that a claim racing with other writes may answer that nothing is
	// claimable although a run was at every instant, because it skips the runs other
	// transactions hold locked (PostgreSQL's FOR UPDATE SKIP LOCKED; docs/runtime.md,
	// "Claiming"): a racing claim that found nothing is then linearizable as a claim that took
	// no effect.
	ClaimsSkipLocked bool
}

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

// instance is one server instance: a store and the session service over it.
type instance struct {
	st  store.Store
	svc *session.Service
}

// sim is one simulation: the real instances, the model, and what the ops sent.
type sim struct {
	ctx    context.Context
	b      *Backend
	cfg    Config
	inst   []*instance
	clock  *Clock
	m      *model.Model
	sent   map[int]*request
	mu     sync.Mutex                  // guards leases and acked while a batch runs
	leases map[string]map[int64]string // run id -> token -> lease id, from the claims
	acked  map[int64]string            // sequence -> id of every acknowledged event
	snap   *snapshot                   // the real state at the last comparison (nil: read it again)
	// invariants' memory
	ended  map[string]string // run id -> its terminal status
	tokens map[string]int64  // run id -> its last fencing token
	// decisions counts the decisions by op kind (nil: not counted)
	decisions map[string]int
}

// Run runs ops with the configuration cfg against a new session in the database of b (empty)
// and the model, and returns the first divergence (nil: none) or an error of the harness
// itself.
func Run(ctx context.Context, b *Backend, cfg Config, ops []Op) (*Divergence, error) {
	s, err := start(ctx, b, cfg)
	if err != nil {
		return nil, err
	}
	defer s.close()
	for i, op := range ops {
		if d, err := s.step(i, op); d != nil || err != nil {
			return d, err
		}
	}
	return nil, nil
}

// Simulate draws n ops from seed and runs them as Run does, with the seed's configuration
// (ConfigFor); it returns the ops it ran (up to and including a divergent one). When
// decisions is not nil, it counts there each op kind's decisions ("status LEASE_LOST") and
// what the background passes did ("pass queue timeout"), to show what a run covered.
func Simulate(ctx context.Context, b *Backend, seed uint64, n int, decisions map[string]int) ([]Op, *Divergence, error) {
	s, err := start(ctx, b, ConfigFor(seed))
	if err != nil {
		return nil, nil, err
	}
	defer s.close()
	s.decisions = decisions
	defer func() {
		if decisions != nil {
			for k, v := range s.m.Passes {
				decisions["pass "+k] += v
			}
		}
	}()
	g := newGenerator(seed)
	ops := make([]Op, 0, n)
	for i := range n {
		op := g.next(s.m)
		ops = append(ops, op)
		if d, err := s.step(i, op); d != nil || err != nil {
			return ops, d, err
		}
	}
	return ops, nil, nil
}

func start(ctx context.Context, b *Backend, cfg Config) (*sim, error) {
	s := &sim{ctx: ctx, b: b, cfg: cfg, clock: NewClock(t0), m: model.New(t0, MaxAttempts, StaleAfter), sent: map[int]*request{},
		leases: map[string]map[int64]string{}, acked: map[int64]string{}, ended: map[string]string{}, tokens: map[string]int64{}}
	s.m.QueueTimeout, s.m.HeartbeatResolution = cfg.QueueTimeout, b.HeartbeatResolution
	if err := s.open(); err != nil {
		return nil, err
	}
	yes := true
	sess := &store.Session{
		Record: contract.SessionRecord{SchemaVersion: 1, SessionID: sessionID, AgentID: "agent", Role: "implementer",
			Status: contract.SessionStatusRunning, StartedAt: contract.FormatTime(t0)},
		Snapshot: contract.Snapshot{Mode: "work", ModelID: "model", Capabilities: contract.Capabilities{Steering: &yes}},
	}
	if err := s.inst[0].st.CreateSession(ctx, sess); err != nil {
		s.close()
		return nil, fmt.Errorf("create the simulated session: %w", err)
	}
	return s, nil
}

// open opens the backend's instances, each with its service and background work started on
// the simulated clock.
func (s *sim) open() error {
	for range max(s.b.Instances, 1) {
		st, err := s.b.Open()
		if err != nil {
			s.close()
			return fmt.Errorf("open the store: %w", err)
		}
		svc := session.New(st, session.Options{Clock: s.clock, MaxAttempts: MaxAttempts, StaleAfter: StaleAfter,
			LeaseExpiryInterval: ExpiryInterval, SweepInterval: SweepInterval, QueueTimeout: s.cfg.QueueTimeout})
		s.inst = append(s.inst, &instance{st: st, svc: svc})
		if err := svc.Start(s.ctx); err != nil {
			s.close()
			return err
		}
	}
	s.clock.WaitArmed(2 * len(s.inst)) // each instance's lease expirer and sweeper
	return nil
}

// close stops every instance's service and closes its store.
func (s *sim) close() {
	for _, in := range s.inst {
		in.svc.Close()
		in.st.Close()
	}
	s.inst = nil
}

// svc is the service of instance i (of the op), modulo the instances there are.
func (s *sim) svc(i int) *session.Service { return s.inst[i%len(s.inst)].svc }

// tick is the model's side of a pass of the service's background work, called by the clock
// just before the timer of that pass fires at at (each instance's: the second pass of an
// instant finds nothing left to do, on both sides).
func (s *sim) tick(interval time.Duration, at time.Time) {
	s.m.Now = at
	switch interval {
	case ExpiryInterval:
		s.m.ExpireLeases(attemptID)
	case SweepInterval:
		s.m.Sweep()
	}
}

// attemptID is the model's id of a new attempt of r; the comparison takes the server's.
func attemptID(r *model.Run) string { return "attempt-of-" + r.ID }

// action is one request of an op, on both sides: model applies it to a model and returns the
// model's decision; real sends it to the service and returns the service's.
type action struct {
	model func(m *model.Model) string
	real  func() (string, error)
}

// prepare builds the action of an op that sends a request (nil: the op sends nothing now: it
// is about a run that does not exist yet, or resends an op that sent nothing).
func (s *sim) prepare(op Op) (*action, error) {
	svc := s.svc(op.Inst)
	switch op.Kind {
	case OpClaim:
		ttl := time.Duration(op.TTL) * time.Second
		return &action{
			model: func(m *model.Model) string {
				if r := m.Claim(ttl); r != nil {
					return fmt.Sprintf("claimed token %d of %s", r.Token, r.ID)
				}
				return model.NothingToClaim
			},
			real: func() (string, error) {
				c, err := svc.Claim(s.ctx, store.ClaimFilter{}, 0, ttl)
				if err != nil || c == nil {
					return model.NothingToClaim, err
				}
				s.mu.Lock()
				if s.leases[c.Run.RunID] == nil {
					s.leases[c.Run.RunID] = map[int64]string{}
				}
				s.leases[c.Run.RunID][c.Lease.Token] = c.Lease.LeaseID
				s.mu.Unlock()
				return fmt.Sprintf("claimed token %d of %s", c.Lease.Token, c.Run.RunID), nil
			},
		}, nil
	case OpRenew, OpRelease:
		real, mr, err := s.runAt(op.Run)
		if err != nil || real == nil {
			return nil, err
		}
		ref, mref := s.leaseRef(op.Lease, mr)
		if ref == nil {
			ref, mref = &store.LeaseRef{LeaseID: "L-forged", Token: 99}, &model.LeaseRef{Forged: true}
		}
		ttl, idx, runID := time.Duration(op.TTL)*time.Second, op.Run, real.RunID
		if op.Kind == OpRenew {
			return &action{
				model: func(m *model.Model) string { return m.Renew(m.Runs[idx], *mref, ttl) },
				real: func() (string, error) {
					_, err := svc.RenewLease(s.ctx, sessionID, runID, *ref, ttl)
					return decision(err), nil
				},
			}, nil
		}
		return &action{
			model: func(m *model.Model) string { return m.Release(m.Runs[idx], *mref) },
			real:  func() (string, error) { return decision(svc.ReleaseLease(s.ctx, sessionID, runID, *ref)), nil },
		}, nil
	case OpQueue, OpStatus, OpStop, OpSteer:
		req := s.request(op)
		if req == nil {
			return nil, nil
		}
		s.sent[op.ID] = req
		return s.send(svc, req), nil
	case OpRetry:
		req := s.sent[op.Of]
		if req == nil {
			return nil, nil // the op it resends was shrunk away, or sent nothing
		}
		return s.send(svc, req), nil
	}
	return nil, fmt.Errorf("op kind %q sends no request", op.Kind)
}

// decision is the decision of a renewal or release that returned err.
func decision(err error) string {
	if err != nil {
		return refusal(err)
	}
	return model.Accepted
}

// step runs one op on both sides and compares them.
func (s *sim) step(i int, op Op) (*Divergence, error) {
	diverge := func(format string, args ...any) (*Divergence, error) {
		return &Divergence{Step: i, Op: op, What: fmt.Sprintf(format, args...) + "; model: " + s.m.String()}, nil
	}
	switch op.Kind {
	case OpAdvance:
		// The background passes due meanwhile run at their instants, on both sides.
		s.clock.Advance(time.Duration(op.Ms)*time.Millisecond, s.tick)
		s.m.Now = s.clock.Now()
		return s.compare(diverge)
	case OpExpire:
		if _, err := s.svc(op.Inst).ExpireLeases(s.ctx, session.LeaseExpiryOptions{}); err != nil {
			return nil, err
		}
		s.m.ExpireLeases(attemptID)
		return s.compare(diverge)
	case OpSweep:
		if _, err := s.svc(op.Inst).Sweep(s.ctx, session.SweepOptions{}); err != nil {
			return nil, err
		}
		s.m.Sweep()
		return s.compare(diverge)
	case OpRestart:
		return s.restart(diverge)
	case OpBatch:
		return s.batch(op, diverge)
	}
	last, err := s.svc(0).LastSequence(s.ctx, sessionID)
	if err != nil {
		return nil, err
	}
	a, err := s.prepare(op)
	if a == nil || err != nil {
		return nil, err
	}
	want := a.model(s.m)
	got, err := a.real()
	if err != nil {
		return nil, err
	}
	if want != got {
		return diverge("decision %s, model %s", got, want)
	}
	s.count(op.Kind, got)
	if op.Kind == OpRetry && strings.HasPrefix(got, model.Duplicate) {
		if now, err := s.svc(0).LastSequence(s.ctx, sessionID); err != nil || now != last {
			return diverge("invariant: a retry answered as a duplicate moved the log from %d to %d (%v)", last, now, err)
		}
	}
	return s.compare(diverge)
}

// count counts a decision of an op kind, without the ids of runs.
func (s *sim) count(kind, got string) {
	if s.decisions == nil {
		return
	}
	key := []string{kind}
	for _, w := range strings.Fields(got) {
		if w != "of" && !strings.HasPrefix(w, "run-") && !strings.HasPrefix(w, "lc-") {
			key = append(key, w)
		}
	}
	s.decisions[strings.Join(key, " ")]++
}

// batch sends the requests of op.Sub at once, each through its instance, and checks that the
// answers are linearizable: some serial order of the requests, run through the model from the
// state before the batch, gives every answer and ends in the state the store is in. The model
// takes the state of the first such order.
func (s *sim) batch(op Op, diverge func(string, ...any) (*Divergence, error)) (*Divergence, error) {
	var acts []*action
	var kinds []string
	for _, sub := range op.Sub {
		if sub.Kind == OpAdvance {
			continue // a retry drawn before anything could be resent
		}
		a, err := s.prepare(sub)
		if err != nil {
			return nil, err
		}
		if a != nil {
			acts, kinds = append(acts, a), append(kinds, sub.Kind)
		}
	}
	got := make([]string, len(acts))
	errs := make([]error, len(acts))
	var wg sync.WaitGroup
	for i, a := range acts {
		wg.Go(func() { got[i], errs[i] = a.real() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if s.b.ClaimsSkipLocked {
		for i, a := range acts {
			if kinds[i] == OpClaim && got[i] == model.NothingToClaim {
				acts[i] = &action{model: func(*model.Model) string { return model.NothingToClaim }, real: a.real}
			}
		}
	}
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	order := make([]int, len(acts))
	for i := range order {
		order[i] = i
	}
	tried := 0
	for {
		tried++
		m := s.m.Clone()
		ok := true
		for _, i := range order {
			if a := acts[i]; a.model(m) != got[i] {
				ok = false
				break
			}
		}
		if ok && s.check(m, snap) == "" {
			s.m, s.snap = m, snap
			for i := range acts {
				s.count("racing "+kinds[i], got[i])
			}
			if what := s.invariants(snap); what != "" {
				return diverge("%s", what)
			}
			return nil, nil
		}
		if !nextPermutation(order) {
			break
		}
	}
	return diverge("not linearizable: answers %q, and none of the %d serial orders of the requests gives them and the state after them (%s)", got, tried, snap)
}

// nextPermutation moves p to its next permutation in lexical order; false after the last.
func nextPermutation(p []int) bool {
	i := len(p) - 2
	for i >= 0 && p[i] >= p[i+1] {
		i--
	}
	if i < 0 {
		return false
	}
	j := len(p) - 1
	for p[j] <= p[i] {
		j--
	}
	p[i], p[j] = p[j], p[i]
	slices.Reverse(p[i+1:])
	return true
}

// restart closes every instance and its store (between operations: every acknowledged append
// has returned) and opens them again on the same database, with new services whose background
// work runs on; then every event acknowledged so far must be readable at its sequence.
func (s *sim) restart(diverge func(string, ...any) (*Divergence, error)) (*Divergence, error) {
	s.close()
	s.snap = nil
	if err := s.open(); err != nil {
		return nil, err
	}
	read := map[int64]string{}
	for after := int64(-1); ; {
		page, err := s.svc(0).Events(s.ctx, sessionID, after, 10000)
		if err != nil {
			return nil, err
		}
		for _, e := range page {
			read[e.Sequence] = e.EventID
			after = e.Sequence
		}
		if len(page) < 10000 {
			break
		}
	}
	for seq, id := range s.acked {
		if read[seq] != id {
			return diverge("invariant: event %q acknowledged at sequence %d is not there after a restart (%q is)", id, seq, read[seq])
		}
	}
	s.count(OpRestart, "")
	return s.compare(diverge)
}

// runAt returns the real and the model's run at index i (nil, nil when there is none), as of
// the last comparison (nothing changed since: requests are built before they are sent).
func (s *sim) runAt(i int) (*contract.Run, *model.Run, error) {
	if s.snap == nil {
		sn, err := s.snapshot()
		if err != nil {
			return nil, nil, err
		}
		s.snap = sn
	}
	runs := s.snap.runs
	if i < 0 || i >= len(runs) || i >= len(s.m.Runs) {
		return nil, nil, nil
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
		if op.StaleSeq && expected > -1 {
			expected-- // an empty log has no older sequence to send
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

// send is the action of sending req through svc.
func (s *sim) send(svc *session.Service, req *request) *action {
	a := &action{}
	switch req.kind {
	case OpQueue, OpStatus:
		a.model = func(m *model.Model) string {
			var want, interrupted string
			if req.kind == OpQueue {
				want, interrupted = m.Queue(req.key, req.runID, req.strat)
			} else {
				want = m.Status(req.key, m.Find(req.runID), req.status, req.mlease)
			}
			if interrupted != "" {
				want += " interrupting " + interrupted
			}
			return want
		}
		a.real = func() (string, error) {
			res, err := svc.AppendWith(s.ctx, sessionID, req.events, session.AppendParams{Lease: req.lease, Multitask: req.strat})
			if err != nil {
				return refusal(err), nil
			}
			got := model.Duplicate
			if res.Added {
				got = model.Accepted
			}
			if err := s.readable(svc, req.events, res); err != nil {
				return "", err
			}
			if res.Interrupted != nil {
				got += " interrupting " + res.Interrupted.RunID
			}
			return got, nil
		}
	default:
		a.model = func(m *model.Model) string {
			if req.kind == OpStop {
				return m.Stop(req.key, m.Find(req.runID))
			}
			return m.Steer(req.key, m.Find(req.runID), req.expected)
		}
		a.real = func() (string, error) {
			c, err := contract.DecodeCommand(req.cmd, contract.Limits{})
			if err != nil {
				return "", fmt.Errorf("the simulator built an invalid command %s: %w", req.cmd, err)
			}
			res, err := svc.Execute(s.ctx, sessionID, c, session.ExecOptions{})
			if err != nil {
				return "", fmt.Errorf("command %s: %w", req.cmd, err)
			}
			if res.Error != nil {
				return string(res.Error.Code), nil
			}
			return res.Outcome, nil
		}
	}
	return a
}

// readable checks that the events an append acknowledged are in the store where it said, and
// remembers them for the check after a restart.
func (s *sim) readable(svc *session.Service, events []*contract.EncodedEvent, res *session.Appended) error {
	for i, r := range res.Results {
		evs, err := svc.Events(s.ctx, sessionID, r.Sequence-1, 1)
		if err != nil {
			return err
		}
		if len(evs) != 1 || evs[0].Sequence != r.Sequence || evs[0].EventID != events[i].EventID {
			return fmt.Errorf("invariant: event %q acknowledged at sequence %d is not readable there (read %+v)", events[i].EventID, r.Sequence, evs)
		}
		s.mu.Lock()
		s.acked[r.Sequence] = events[i].EventID
		s.mu.Unlock()
	}
	return nil
}

// snapshot is the real state the model is compared with.
type snapshot struct {
	runs   []contract.Run
	leases []store.RunLease
	record string
	last   int64
}

func (sn *snapshot) String() string {
	out := fmt.Sprintf("record %s, last %d, runs", sn.record, sn.last)
	for i, r := range sn.runs {
		out += fmt.Sprintf(" %s:%s", r.RunID, r.Status)
		if i < len(sn.leases) {
			out += fmt.Sprintf("/a%d/t%d", sn.leases[i].Attempt, sn.leases[i].Token)
			if sn.leases[i].Held != nil {
				out += "/held"
			}
		}
	}
	return out
}

// snapshot reads the real state.
func (s *sim) snapshot() (*snapshot, error) {
	svc := s.svc(0)
	runs, err := svc.Runs(s.ctx, sessionID)
	if err != nil {
		return nil, err
	}
	leases, err := svc.RunLeases(s.ctx, sessionID)
	if err != nil {
		return nil, err
	}
	sess, err := s.inst[0].st.GetSession(s.ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return &snapshot{runs: runs, leases: leases, record: sess.Record.Status, last: sess.LastSequence}, nil
}

// check compares the real state with m's ("" when they agree). The model takes the ids the
// server gave new attempts.
func (s *sim) check(m *model.Model, sn *snapshot) string {
	if len(sn.runs) != len(m.Runs) || len(sn.leases) != len(sn.runs) {
		return fmt.Sprintf("%d runs (%d leases), model %d", len(sn.runs), len(sn.leases), len(m.Runs))
	}
	for i, r := range sn.runs {
		mr, rl := m.Runs[i], sn.leases[i]
		if strings.HasPrefix(mr.ID, "attempt-of-") {
			mr.ID = r.RunID // the server derives a new attempt's id; the model takes it
		}
		if mr.ID != r.RunID || mr.Status != r.Status || mr.Attempt != rl.Attempt || mr.Token != rl.Token || (mr.Lease == nil) != (rl.Held == nil) {
			return fmt.Sprintf("run %d is %s %s attempt %d token %d held %v", i, r.RunID, r.Status, rl.Attempt, rl.Token, rl.Held != nil)
		}
		if mr.Lease != nil && (!mr.Lease.Expires.Equal(rl.Held.ExpiresAt) || mr.Lease.Token != rl.Held.Token) {
			return fmt.Sprintf("run %d's lease is token %d until %s, model token %d until %s", i, rl.Held.Token, rl.Held.ExpiresAt, mr.Lease.Token, mr.Lease.Expires)
		}
	}
	if sn.record != m.Record {
		return "record status " + sn.record
	}
	if sn.last != m.Last {
		return fmt.Sprintf("last sequence %d", sn.last)
	}
	return ""
}

// invariants checks the real state against what it was before (a run that ended never
// changes, fencing tokens only grow) and remembers it.
func (s *sim) invariants(sn *snapshot) string {
	for i, r := range sn.runs {
		if prev, ok := s.ended[r.RunID]; ok && prev != r.Status {
			return fmt.Sprintf("invariant: run %s ended %s and is now %s", r.RunID, prev, r.Status)
		}
		if model.Terminal(r.Status) {
			s.ended[r.RunID] = r.Status
		}
		if t := sn.leases[i].Token; t < s.tokens[r.RunID] {
			return fmt.Sprintf("invariant: run %s's fencing token went from %d to %d", r.RunID, s.tokens[r.RunID], t)
		} else {
			s.tokens[r.RunID] = t
		}
	}
	return ""
}

// compare checks the real state against the model's, and the invariants.
func (s *sim) compare(diverge func(string, ...any) (*Divergence, error)) (*Divergence, error) {
	sn, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	if what := s.check(s.m, sn); what != "" {
		return diverge("%s", what)
	}
	if what := s.invariants(sn); what != "" {
		return diverge("%s", what)
	}
	s.snap = sn
	return nil, nil
}
