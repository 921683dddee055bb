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
// retry (OpRetry) names the op whose request it resends by its ID, which shrinking keeps.
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
	}{{"TTL", o.TTL}, {"Ms", o.Ms}, {"Of", o.Of}} {
		if f.v != 0 {
			fmt.Fprintf(&b, ", %s: %d", f.name, f.v)
		}
	}
	if o.StaleSeq {
		b.WriteString(", StaleSeq: true")
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
	{OpSteer, 4}, {OpAdvance, 12}, {OpExpire, 6}, {OpSweep, 3}, {OpRetry, 10},
}

var (
	strategies = []string{"", model.Reject, model.Enqueue, model.Interrupt}
	statuses   = []string{model.Running, model.Running, model.WaitingApproval, model.Completed, model.Failed, model.Stopped, model.Stopping, model.Queued}
	ttls       = []int{1, 5, 30, 30}
)

// next returns the op with id id for a session in the state m.
func (g *generator) next(id int, m *model.Model) Op {
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	n := g.rng.IntN(total)
	kind := ""
	for _, k := range kinds {
		if n < k.weight {
			kind = k.kind
			break
		}
		n -= k.weight
	}
	op := Op{ID: id, Kind: kind}
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
