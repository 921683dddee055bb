package sim

import (
	"context"
	"fmt"
	"time"
)

// Opener gives a new, empty database for one simulation.
type Opener func() (*Backend, error)

// replay runs ops with cfg on a new database and reports the divergence (nil: none).
func replay(ctx context.Context, open Opener, cfg Config, ops []Op) (*Divergence, error) {
	b, err := open()
	if err != nil {
		return nil, err
	}
	defer b.Close()
	return Run(ctx, b, cfg, ops)
}

// ShrinkBudget bounds the time Shrink takes: past it, Shrink returns the shortest sequence it
// has found so far.
var ShrinkBudget = 3 * time.Minute

// Shrink reduces ops, which diverge, to a shorter sequence that still diverges (delta
// debugging: it drops chunks of halving size, down to single ops, keeping every removal after
// which a divergence remains), and returns it with its divergence. Ops are named by stable
// IDs, so a retry whose original was dropped is skipped, not misdirected. A divergence of
// racing requests may not come back on every replay: such a one is shrunk as far as the
// replays show it, and one that never comes back is an error.
func Shrink(ctx context.Context, open Opener, cfg Config, ops []Op) ([]Op, *Divergence, error) {
	deadline := time.Now().Add(ShrinkBudget)
	d, err := replay(ctx, open, cfg, ops)
	if err != nil {
		return nil, nil, err
	}
	if d == nil {
		return nil, nil, fmt.Errorf("shrink: the %d ops do not diverge when replayed", len(ops))
	}
	ops = ops[:d.Step+1] // nothing after the divergence matters
	for chunk := len(ops) / 2; chunk >= 1; chunk /= 2 {
		for start := 0; start < len(ops) && time.Now().Before(deadline); {
			end := min(start+chunk, len(ops))
			try := append(append([]Op(nil), ops[:start]...), ops[end:]...)
			nd, err := replay(ctx, open, cfg, try)
			if err != nil {
				return nil, nil, err
			}
			if nd != nil {
				ops, d = try[:nd.Step+1], nd
				continue // the same start now holds the next chunk
			}
			start = end
		}
	}
	return ops, d, nil
}

// Report is what a shrunk divergence prints: the seed and a ready-to-paste Go test case.
func Report(seed uint64, ops []Op, d *Divergence) string {
	return fmt.Sprintf("divergence (seed %d, %+v, %d ops after shrinking): %v\nregression case for internal/sim/testdata (or a Go test):\n\tops := %s\n\td, err := sim.Run(ctx, st, sim.ConfigFor(%d), ops)",
		seed, ConfigFor(seed), len(ops), d, GoLiteral(ops), seed)
}
