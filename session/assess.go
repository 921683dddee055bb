package session

import (
	"context"
	"fmt"
	"github.com/sessiond/sessiond/wire"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// maxAssessScan bounds how many of the agent's sessions assess reads.
const maxAssessScan = 5000

// Assess estimates the work of a task for the session's agent, role and mode from history: the
// work time of every finished comparable session in the store (the sum of its runs'
// durationMs, or closed_at - started_at for a closed session without finished runs).
// Comparable means the same agent, role and mode; when fewer than MinSamples exist, the same
// agent with any role or mode. The optimistic estimate is the 25th percentile of those times,
// the pessimistic the 90th (nearest rank); risk is high over HighRiskHours. With fewer than
// MinSamples samples there is no estimate ("insufficient history"). The task's steps are cut
// into phases of at most MaxPhaseHours (as many as the pessimistic estimate needs, one without
// an estimate), each ending at an archive checkpoint. The description itself does not change
// the numbers: sessiond has no model of how big a task is, only of what comparable sessions took.
func (s *Service) Assess(ctx context.Context, id string, req wire.AssessRequest) (*wire.Assessment, error) {
	sess, err := s.st.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	rec := sess.Record
	a := &wire.Assessment{SessionID: id, Task: req.Task, AgentID: rec.AgentID, Role: rec.Role, Mode: rec.Mode.Get(), Risk: "unknown"}
	var same, agent []float64
	after := ""
	scanned := 0
	for scanned < maxAssessScan {
		list, next, err := s.st.ListSessions(ctx, store.ListFilter{AgentID: rec.AgentID, After: after, Limit: 1000})
		if err != nil {
			return nil, fmt.Errorf("assess: %w", err)
		}
		for _, o := range list {
			scanned++
			if o.Record.SessionID == id {
				continue
			}
			h, ok, err := s.workHours(ctx, o)
			if err != nil {
				return nil, fmt.Errorf("assess: %w", err)
			}
			if !ok {
				continue
			}
			agent = append(agent, h)
			if o.Record.Role == rec.Role && o.Record.Mode.Get() == rec.Mode.Get() {
				same = append(same, h)
			}
		}
		if next == "" {
			break
		}
		after = next
	}
	samples := same
	a.Basis = fmt.Sprintf("finished sessions of agent %q with role %q and mode %q", rec.AgentID, rec.Role, orNone(rec.Mode.Get()))
	if len(same) < MinSamples && len(agent) > len(same) {
		samples = agent
		a.Basis = fmt.Sprintf("finished sessions of agent %q, any role or mode (only %d with role %q and mode %q)", rec.AgentID, len(same), rec.Role, orNone(rec.Mode.Get()))
	}
	a.Samples = len(samples)
	steps := taskSteps(req.Task)
	if len(samples) < MinSamples {
		a.Message = fmt.Sprintf("insufficient history: %d comparable finished session(s), at least %d are needed for an estimate; plan for one phase of at most %.0f h, archive, and assess again", len(samples), MinSamples, MaxPhaseHours)
		a.Phases = []wire.Phase{{N: 1, MaxHours: MaxPhaseHours, Steps: steps, Checkpoint: "archive"}}
		return a, nil
	}
	sort.Float64s(samples)
	opt, pess := round2(percentile(samples, 25)), round2(percentile(samples, 90))
	a.Sufficient, a.OptimisticHours, a.PessimisticHours = true, &opt, &pess
	switch {
	case pess > HighRiskHours:
		a.Risk = "high"
	case pess > 2:
		a.Risk = "medium"
	default:
		a.Risk = "low"
	}
	a.Message = fmt.Sprintf("from %d past sessions: 25th percentile %.2f h, 90th percentile %.2f h", len(samples), opt, pess)
	n := max(1, int(math.Ceil(pess/MaxPhaseHours)))
	for i := range n {
		h := round2(math.Min(MaxPhaseHours, pess-float64(i)*MaxPhaseHours))
		lo, hi := i*len(steps)/n, (i+1)*len(steps)/n
		a.Phases = append(a.Phases, wire.Phase{N: i + 1, Hours: &h, MaxHours: MaxPhaseHours, Steps: slices.Clone(steps[lo:hi]), Checkpoint: "archive"})
	}
	return a, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

// percentile is the nearest-rank percentile p of sorted xs.
func percentile(xs []float64, p float64) float64 {
	k := int(math.Ceil(p / 100 * float64(len(xs))))
	return xs[min(max(k, 1), len(xs))-1]
}

// workHours is the work time of a finished session, in hours: the sum of its terminal runs'
// durationMs, or closed_at - started_at for a closed session with none. ok is false for a
// session that has neither.
func (s *Service) workHours(ctx context.Context, sess *store.Session) (float64, bool, error) {
	runs, err := s.st.Runs(ctx, sess.Record.SessionID)
	if err != nil {
		return 0, false, err
	}
	var ms float64
	n := 0
	for _, r := range runs {
		if !contract.IsTerminal(r.Status) || r.DurationMs == nil {
			continue
		}
		v, err := r.DurationMs.Float64()
		if err != nil || v < 0 {
			continue
		}
		ms += v
		n++
	}
	if n > 0 {
		return ms / 3.6e6, true, nil
	}
	if closed := sess.Record.ClosedAt.Get(); closed != "" {
		c, err1 := contract.ParseTime(closed)
		st, err2 := contract.ParseTime(sess.Record.StartedAt)
		if err1 == nil && err2 == nil && c.After(st) {
			return c.Sub(st).Hours(), true, nil
		}
	}
	return 0, false, nil
}

// taskSteps returns the steps of a task description: its list items, or the whole text.
func taskSteps(task string) []string {
	var steps []string
	for _, line := range strings.Split(task, "\n") {
		l := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(l, "- "), strings.HasPrefix(l, "* "):
			steps = append(steps, strings.TrimSpace(l[2:]))
		default:
			if i := strings.IndexAny(l, ".)"); i > 0 && i <= 3 && strings.Trim(l[:i], "0123456789") == "" && len(l) > i+1 {
				steps = append(steps, strings.TrimSpace(l[i+1:]))
			}
		}
	}
	if len(steps) == 0 && strings.TrimSpace(task) != "" {
		steps = []string{strings.TrimSpace(task)}
	}
	if steps == nil {
		steps = []string{}
	}
	return steps
}
