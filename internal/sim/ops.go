package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/sessiond/sessiond/internal/sim/model"
)

// Op kinds.
const (
	OpQueue   = "queue"   // a person's message and a new queued run, one append (Strategy)
	OpStatus  = "status"  // a runtime's append of run Run's status Status under Lease
	OpClaim   = "claim"   // a worker's claim with a lease of TTL seconds
	OpRenew   = "renew"   // a renewal of run Run's lease (Lease) for TTL seconds
	OpRelease = "release" // a release of run Run's lease (Lease)
	OpStop    = "stop"    // a stop command about run Run
	OpSteer   = "steer"   // a steer command about run Run (StaleSeq: an old expectedSequence)
	OpAdvance = "advance" // the clock moves Ms milliseconds
	OpExpire  = "expire"  // the lease expirer's pass
	OpSweep   = "sweep"   // the sweeper's pass
	OpRetry   = "retry"   // the request of op Of again, byte for byte
	OpBatch   = "batch"   // the requests of Sub at once, racing (linearizability)
	OpRestart = "restart" // every instance and its store closed and opened again
)

// Lease choices of an op: the lease the model says the run holds (or last held), none, or a
// stale one (the run's first lease when it had several, else a forged one).
const (
	LeaseHeld  = "held"
	LeaseNone  = "none"
	LeaseStale = "stale"
)

// Op is one step of a simulation. Runs are named by their position in creation order (-1: a
// run that does not exist); the request an op sends is fixed the first time it runs, and a
// retry (OpRetry) names the op whose request it resends by its ID, which shrinking keeps. Inst
// is the instance the op goes through (modulo the instances there are); a batch's ops are in
// Sub.
type Op struct {
	ID       int
	Kind     string
	Run      int
	Status   string
	Lease    string
	Strategy string
	TTL      int // seconds
	Ms       int
	Of       int
	StaleSeq bool
	Inst     int  `json:",omitempty"`
	Sub      []Op `json:",omitempty"`
}

// GoString prints the op as a Go composite literal, without its zero fields.
func (o Op) GoString() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{ID: %d, Kind: %q", o.ID, o.Kind)
	if o.Run != 0 {
		fmt.Fprintf(&b, ", Run: %d", o.Run)
	}
	for _, f := range []struct{ name, v string }{{"Status", o.Status}, {"Lease", o.Lease}, {"Strategy", o.Strategy}} {
		if f.v != "" {
			fmt.Fprintf(&b, ", %s: %q", f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"TTL", o.TTL}, {"Ms", o.Ms}, {"Of", o.Of}, {"Inst", o.Inst}} {
		if f.v != 0 {
			fmt.Fprintf(&b, ", %s: %d", f.name, f.v)
		}
	}
	if o.StaleSeq {
		b.WriteString(", StaleSeq: true")
	}
	if len(o.Sub) > 0 {
		b.WriteString(", Sub: []sim.Op{")
		for i, s := range o.Sub {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(s.GoString())
		}
		b.WriteString("}")
	}
	b.WriteString("}")
	return b.String()
}

// GoLiteral prints ops as a ready-to-paste Go slice literal.
func GoLiteral(ops []Op) string {
	var b strings.Builder
	b.WriteString("[]sim.Op{\n")
	for _, o := range ops {
		b.WriteString("\t" + o.GoString() + ",\n")
	}
	b.WriteString("}")
	return b.String()
}

// generator draws the next op from a seeded source, looking at the model's state so that most
// ops are about the runs that matter (the current one, the latest).
type generator struct {
	rng  *rand.Rand
	id   int   // the last op id given
	sent []int // ids of the ops whose request can be resent (appends and commands)
}

func newGenerator(seed uint64) *generator {
	return &generator{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// weighted op kinds: appends of run statuses and queues dominate, as in a real session.
var kinds = []struct {
	kind   string
	weight int
}{
	{OpQueue, 12}, {OpStatus, 22}, {OpClaim, 14}, {OpRenew, 8}, {OpRelease, 3}, {OpStop, 6},
	{OpSteer, 4}, {OpAdvance, 12}, {OpExpire, 4}, {OpSweep, 2}, {OpRetry, 10}, {OpBatch, 6}, {OpRestart, 1},
}

// racing are the op kinds a batch draws its requests from, weighted.
var racing = []struct {
	kind   string
	weight int
}{
	{OpQueue, 10}, {OpStatus, 10}, {OpClaim, 6}, {OpRenew, 3}, {OpRelease, 2}, {OpStop, 5}, {OpSteer, 3}, {OpRetry, 6},
}

// pick draws a kind from a weighted list.
func (g *generator) pick(list []struct {
	kind   string
	weight int
}) string {
	total := 0
	for _, k := range list {
		total += k.weight
	}
	n := g.rng.IntN(total)
	for _, k := range list {
		if n < k.weight {
			return k.kind
		}
		n -= k.weight
	}
	return list[0].kind
}

var (
	strategies = []string{"", model.Reject, model.Enqueue, model.Interrupt}
	statuses   = []string{model.Running, model.Running, model.WaitingApproval, model.Completed, model.Failed, model.Stopped, model.Stopping, model.Queued}
	ttls       = []int{1, 5, 30, 30}
)

// next returns the next op for a session in the state m.
func (g *generator) next(m *model.Model) Op {
	kind := g.pick(kinds)
	if kind == OpBatch {
		g.id++
		op := Op{ID: g.id, Kind: OpBatch}
		for range 2 + g.rng.IntN(3) {
			op.Sub = append(op.Sub, g.op(g.pick(racing), m))
		}
		return op
	}
	return g.op(kind, m)
}

// op returns a new op of kind for a session in the state m.
func (g *generator) op(kind string, m *model.Model) Op {
	g.id++
	id := g.id
	op := Op{ID: id, Kind: kind, Inst: g.rng.IntN(2)}
	switch kind {
	case OpQueue:
		op.Strategy = strategies[g.rng.IntN(len(strategies))]
	case OpStatus:
		op.Run, op.Status, op.Lease = g.run(m), statuses[g.rng.IntN(len(statuses))], g.lease()
	case OpClaim:
		op.TTL = ttls[g.rng.IntN(len(ttls))]
	case OpRenew:
		op.Run, op.Lease, op.TTL = g.run(m), g.lease(), ttls[g.rng.IntN(len(ttls))]
	case OpRelease:
		op.Run, op.Lease = g.run(m), g.lease()
	case OpStop, OpSteer:
		op.Run = g.run(m)
		if g.rng.IntN(10) == 0 {
			op.Run = -1
		}
		op.StaleSeq = kind == OpSteer && g.rng.IntN(5) == 0
	case OpAdvance:
		// k seconds and 1 ms: a lease's expiry (whole seconds after a claim or renewal) and
		// the sweeper's cutoff never fall on the clock exactly.
		k := g.rng.IntN(8)
		if g.rng.IntN(10) == 0 {
			k = 30 + g.rng.IntN(60)
		}
		op.Ms = k*1000 + 1
	case OpRetry:
		if len(g.sent) == 0 {
			op.Kind, op.Ms = OpAdvance, 1
			break
		}
		op.Of = g.sent[g.rng.IntN(len(g.sent))]
	}
	switch op.Kind {
	case OpQueue, OpStatus, OpStop, OpSteer:
		g.sent = append(g.sent, id)
	}
	return op
}

// run picks a run: mostly the current one or the latest, sometimes any.
func (g *generator) run(m *model.Model) int {
	if len(m.Runs) == 0 {
		return 0
	}
	switch g.rng.IntN(4) {
	case 0, 1:
		for i, r := range m.Runs {
			if !model.Terminal(r.Status) {
				return i
			}
		}
		return len(m.Runs) - 1
	case 2:
		return len(m.Runs) - 1
	}
	return g.rng.IntN(len(m.Runs))
}

func (g *generator) lease() string {
	switch g.rng.IntN(10) {
	case 0:
		return LeaseNone
	case 1:
		return LeaseStale
	}
	return LeaseHeld
}
