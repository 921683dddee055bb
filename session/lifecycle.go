package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// Lifecycle defaults (docs/lifecycle.md).
const (
	// DefaultStaleAfter is how long a session may go without a heartbeat before the sweeper
	// marks it stale.
	DefaultStaleAfter = 10 * time.Minute
	// DefaultWindow is the length of the work window warm opens.
	DefaultWindow = 5 * time.Hour
	// ArchiveEvery is the age of the last archive (or of the session, when it was never
	// archived) past which status recommends archive_now.
	ArchiveEvery = 2 * time.Hour
	// WindowNearlyOver is the time left in the window under which status recommends
	// archive_now.
	WindowNearlyOver = 30 * time.Minute
	// MaxPhaseHours is the longest phase assess plans; each phase ends at an archive.
	MaxPhaseHours = 3.0
	// HighRiskHours is the pessimistic estimate over which assess says risk "high".
	HighRiskHours = 4.0
	// MinSamples is the fewest comparable past sessions assess estimates from.
	MinSamples = 5
	// HeartbeatLost is the code of the error event the sweeper appends for a run whose
	// session went silent.
	HeartbeatLost = "HEARTBEAT_LOST"
)

// live reports whether a session status is one the runtime works in (heartbeats expected).
func live(status string) bool { return status == "running" || status == "paused" || status == "stale" }

// NotLiveHint says what to do with a session whose status is not live (closed or archived):
// the way on that works in that status (docs/lifecycle.md). It is "" for a live status.
func NotLiveHint(status string) string {
	switch status {
	case "archived":
		return "restore it first (sessiond session restore ARCHIVE-NAME, or POST /v1/archives/restore): it comes back paused"
	case "closed":
		return "a closed session stays closed; create a new session to go on"
	}
	return ""
}

func (s *Service) stamp() string { return store.FormatTime(s.now()) }

// Heartbeat records a heartbeat from the session's runtime: last_heartbeat_at becomes now, and
// a stale session becomes running again (updated_by_gate "owner"). It refuses, with a
// *RejectError INVALID_SESSION_STATE, a session that is closed or archived, and returns
// store.ErrSessionNotFound for an unknown one.
func (s *Service) Heartbeat(ctx context.Context, id string) (*store.Session, error) {
	var rej *RejectError
	sess, err := s.st.UpdateSession(ctx, id, func(sess *store.Session) error {
		rec := &sess.Record
		if !live(rec.Status) {
			rej = &RejectError{Code: contract.CodeInvalidState, Message: fmt.Sprintf("session %q is %s; heartbeats are for running, paused or stale sessions: %s", id, rec.Status, NotLiveHint(rec.Status))}
			return rej
		}
		now := s.stamp()
		rec.LastHeartbeatAt = contract.Some(now)
		if rec.Status == "stale" {
			rec.Status = "running"
			rec.UpdatedAt = contract.Some(now)
			rec.UpdatedByGate = contract.Some("owner")
		}
		return nil
	})
	if rej != nil {
		return nil, rej
	}
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	return sess, nil
}

// SweepOptions configure [Service.Sweep].
type SweepOptions struct {
	// StaleAfter is the heartbeat TTL (default DefaultStaleAfter).
	StaleAfter time.Duration
	// Batch is how many expired sessions are fetched per store query (default 500).
	Batch int
	// Workers is how many sessions are handled at once (default 8).
	Workers int
}

var errAlive = errors.New("the session is alive again")

// Sweep marks stale every running or paused session whose last heartbeat (started_at when it
// never had one) is older than opt.StaleAfter. When such a session has an active run, Sweep
// first appends, through the store, the run's "failed" status (failedAt now, durationMs since
// the run started) and an "error" event (code HEARTBEAT_LOST, retryable, sourceEventId the
// failed status), with ids derived from the session and the run: several sweepers (other
// instances) racing on one session append them once. The append is conditional on the log the
// sweeper read, and the stale mark on the heartbeat still being old, so a session that speaks
// up meanwhile is left alone. Only expired sessions are read: the cost is in proportion to
// them, not to the sessions in the store.
func (s *Service) Sweep(ctx context.Context, opt SweepOptions) (SweepResult, error) {
	if opt.StaleAfter <= 0 {
		opt.StaleAfter = DefaultStaleAfter
	}
	if opt.Batch <= 0 {
		opt.Batch = 500
	}
	if opt.Workers <= 0 {
		opt.Workers = 8
	}
	var res SweepResult
	cutoff := s.now().Add(-opt.StaleAfter)
	for {
		batch, err := s.st.ExpiredSessions(ctx, cutoff, opt.Batch)
		if err != nil {
			return res, fmt.Errorf("sweep: %w", err)
		}
		// Sessions are handled by several workers: the store commits their changes together
		// (group commit in SQLite, one connection each in PostgreSQL).
		var (
			mu       sync.Mutex
			wg       sync.WaitGroup
			firstErr error
			progress int
		)
		next := make(chan store.ExpiredSession)
		for range min(opt.Workers, len(batch)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for e := range next {
					failed, err := s.expire(ctx, e.SessionID, cutoff, opt.StaleAfter)
					mu.Lock()
					res.Expired++
					switch {
					case errors.Is(err, errAlive):
						res.Skipped++
						progress++
						if failed {
							res.RunsFailed++ // failed before a heartbeat kept the session alive
						}
					case errors.Is(err, store.ErrSessionNotFound):
						res.Skipped++
					case err != nil:
						if firstErr == nil {
							firstErr = fmt.Errorf("sweep: session %q: %w", e.SessionID, err)
						}
					default:
						res.Stale++
						progress++
						if failed {
							res.RunsFailed++
						}
					}
					mu.Unlock()
				}
			}()
		}
		for _, e := range batch {
			next <- e
		}
		close(next)
		wg.Wait()
		if firstErr != nil {
			return res, firstErr
		}
		if len(batch) < opt.Batch || progress == 0 {
			return res, nil
		}
	}
}

// expired reports whether a record's heartbeat is before cutoff and its status can go stale.
func expired(r *contract.SessionRecord, cutoff time.Time) bool {
	hb, ok := store.HeartbeatOf(r)
	return ok && (r.Status == "running" || r.Status == "paused") && hb.Before(cutoff)
}

// expire handles one expired session; failed says whether it failed an active run (also when
// the session then turned out alive: errAlive).
//
// It fails the active run first and marks the session stale second, so that a crash in
// between leaves a failed run on a session the next sweep still finds (never a stale session
// whose dead run shows as running). The append is conditional on the log, so a runtime that
// appended since keeps its run; a bare heartbeat in between does not stop it. Like an expired
// lease, the session was silent past the TTL when the sweeper decided: the heartbeat then keeps
// the session running (the stale mark is skipped) while the run stays failed, and the runtime
// sees the retryable HEARTBEAT_LOST error on its stream and retries.
func (s *Service) expire(ctx context.Context, id string, cutoff time.Time, ttl time.Duration) (failed bool, err error) {
	l := s.lock(id)
	defer s.unlock(id, l)
	sess, err := s.st.GetSession(ctx, id)
	if err != nil {
		return false, err
	}
	if !expired(&sess.Record, cutoff) {
		return false, errAlive
	}
	runs, err := s.st.Runs(ctx, id)
	if err != nil {
		return false, err
	}
	var active *contract.Run
	for i := range runs {
		if !contract.IsTerminal(runs[i].Status) {
			active = &runs[i]
		}
	}
	if active != nil {
		events, err := s.heartbeatLost(id, active, &sess.Record, ttl)
		if err != nil {
			return false, err
		}
		last := sess.LastSequence
		_, err = s.st.Append(ctx, id, events, store.AppendOptions{ExpectedSequence: &last})
		var seqErr *store.SequenceConflictError
		var runErr *store.RunError
		switch {
		case errors.As(err, &seqErr), errors.As(err, &runErr):
			return false, errAlive // the log moved: the runtime spoke, or the run changed; look again next sweep
		case err != nil:
			return false, fmt.Errorf("append the failed run: %w", err)
		}
		failed = true
	}
	_, err = s.st.UpdateSession(ctx, id, func(sess *store.Session) error {
		if !expired(&sess.Record, cutoff) {
			return errAlive
		}
		sess.Record.Status = "stale"
		sess.Record.UpdatedAt = contract.Some(s.stamp())
		sess.Record.UpdatedByGate = contract.Null[string]()
		return nil
	})
	if err != nil {
		return failed, err
	}
	return failed, nil
}

// lifecycleKey is the deterministic eventId and idempotencyKey of the n-th event the server
// appends for a lifecycle reason about subject (e.g. the run whose heartbeat was lost).
func lifecycleKey(sessionID, reason, subject string, n int) string {
	h := sha256.Sum256([]byte(sessionID + "\x00" + reason + "\x00" + subject))
	return fmt.Sprintf("lc-%s-%s-%d", reason, hex.EncodeToString(h[:12]), n)
}

// heartbeatLost builds the failed status and HEARTBEAT_LOST error events of an active run.
func (s *Service) heartbeatLost(id string, run *contract.Run, rec *contract.SessionRecord, ttl time.Duration) ([]*contract.EncodedEvent, error) {
	now := s.now()
	ts := store.FormatTime(now)
	var dur int64
	if started, err := store.ParseTime(run.StartedAt); err == nil && now.After(started) {
		dur = now.Sub(started).Milliseconds()
	}
	d := json.Number(fmt.Sprint(dur))
	statusID := lifecycleKey(id, "hb", run.RunID, 0)
	errID := lifecycleKey(id, "hb", run.RunID, 1)
	last := rec.LastHeartbeatAt.Get()
	if last == "" {
		last = "its start (" + rec.StartedAt + ")"
	}
	detail := fmt.Sprintf("no heartbeat from the session for over %s", ttl)
	events := []contract.Event{
		{Contract: "AgentSessionEvent", EventID: statusID, SessionID: id, RunID: run.RunID, SourceMessageID: run.SourceMessageID,
			IdempotencyKey: statusID, OccurredAt: ts, EventType: "status",
			Payload: &contract.StatusPayload{Status: "failed", Detail: &detail, FailedAt: ts, DurationMs: &d}},
		{Contract: "AgentSessionEvent", EventID: errID, SessionID: id, RunID: run.RunID, SourceMessageID: run.SourceMessageID,
			IdempotencyKey: errID, OccurredAt: ts, EventType: "error",
			Payload: &contract.ErrorPayload{Code: HeartbeatLost, Retryable: true, SourceEventID: statusID,
				Message: fmt.Sprintf("the session sent no heartbeat since %s (TTL %s), so run %q was marked failed; retry it with a retry command once the runtime is back", last, ttl, run.RunID)}},
	}
	out := make([]*contract.EncodedEvent, len(events))
	for i := range events {
		var err error
		if out[i], err = contract.EncodeEvent(&events[i]); err != nil {
			return nil, fmt.Errorf("heartbeat-lost event %d is invalid: %w", i, err)
		}
	}
	return out, nil
}

// WarmOptions configure [Service.Warm].
type WarmOptions struct {
	// Window is the window's length (default DefaultWindow).
	Window time.Duration
	// Restart opens a new window even when one is still open.
	Restart bool
}

func hoursBetween(from, to time.Time) float64 {
	return math.Round(to.Sub(from).Hours()*100) / 100
}

// Warm starts the session's work window: now until now + opt.Window, stored in the session's
// lifecycle state, so that status and the session resource say when it closes. While a window
// is open, Warm answers it unchanged (Started false) unless opt.Restart. It refuses a closed or
// archived session (*RejectError INVALID_SESSION_STATE).
func (s *Service) Warm(ctx context.Context, id string, opt WarmOptions) (*Window, error) {
	if opt.Window <= 0 {
		opt.Window = DefaultWindow
	}
	now := s.now()
	var rej *RejectError
	started := false
	_, lc, err := s.st.UpdateLifecycle(ctx, id, func(sess *store.Session, lc *store.Lifecycle) error {
		if !live(sess.Record.Status) {
			rej = &RejectError{Code: contract.CodeInvalidState, Message: fmt.Sprintf("session %q is %s; only a running, paused or stale session can start a window: %s", id, sess.Record.Status, NotLiveHint(sess.Record.Status))}
			return rej
		}
		if closes, err := store.ParseTime(lc.WindowClosesAt); err == nil && closes.After(now) && !opt.Restart {
			return nil
		}
		lc.WindowStartedAt = store.FormatTime(now)
		lc.WindowClosesAt = store.FormatTime(now.Add(opt.Window))
		started = true
		return nil
	})
	if rej != nil {
		return nil, rej
	}
	if err != nil {
		return nil, fmt.Errorf("warm: %w", err)
	}
	w := windowOf(id, lc, now)
	w.Started = started
	return w, nil
}

func windowOf(id string, lc store.Lifecycle, now time.Time) *Window {
	w := &Window{SessionID: id, StartedAt: lc.WindowStartedAt, ClosesAt: lc.WindowClosesAt}
	if closes, err := store.ParseTime(lc.WindowClosesAt); err == nil {
		h := hoursBetween(now, closes)
		w.HoursLeft = &h
	}
	return w
}

// WindowOf returns the session's work window (no window: empty times, HoursLeft null).
func (s *Service) WindowOf(ctx context.Context, id string) (*Window, error) {
	lc, err := s.st.Lifecycle(ctx, id)
	if err != nil {
		return nil, err
	}
	return windowOf(id, lc, s.now()), nil
}

// Recommendations of status.
const (
	RecommendOK         = "ok"
	RecommendArchiveNow = "archive_now"
)

// Status reports where the session stands: staleness, hours since the last archive, time left
// in the window, and the recommendation archive_now when a live session's last archive (or its
// start, when it was never archived) is over ArchiveEvery old, or its window has less than
// WindowNearlyOver left (or is over); ok otherwise. staleAfter is the heartbeat TTL (default
// DefaultStaleAfter).
func (s *Service) Status(ctx context.Context, id string, staleAfter time.Duration) (*StatusReport, error) {
	if staleAfter <= 0 {
		staleAfter = DefaultStaleAfter
	}
	sess, err := s.st.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	lc, err := s.st.Lifecycle(ctx, id)
	if err != nil {
		return nil, err
	}
	now := s.now()
	rec := &sess.Record
	r := &StatusReport{SessionID: id, Status: rec.Status, LastHeartbeatAt: rec.LastHeartbeatAt.Get(),
		StaleAfterSeconds: staleAfter.Seconds(), LastArchivedAt: lc.LastArchivedAt,
		Window: windowOf(id, lc, now), Recommendation: RecommendOK, Reasons: []string{}}
	started, _ := store.ParseTime(rec.StartedAt)
	r.HoursSinceStart = hoursBetween(started, now)
	r.Stale = rec.Status == "stale" || expired(rec, now.Add(-staleAfter))
	if t, err := store.ParseTime(lc.LastArchivedAt); err == nil {
		h := hoursBetween(t, now)
		r.HoursSinceLastArchive = &h
	}
	if !live(rec.Status) {
		r.Reasons = append(r.Reasons, fmt.Sprintf("the session is %s: nothing to archive", rec.Status))
		return r, nil
	}
	switch {
	case r.HoursSinceLastArchive != nil && *r.HoursSinceLastArchive > ArchiveEvery.Hours():
		r.Recommendation = RecommendArchiveNow
		r.Reasons = append(r.Reasons, fmt.Sprintf("the last archive is %.2f h old (over %.0f h)", *r.HoursSinceLastArchive, ArchiveEvery.Hours()))
	case r.HoursSinceLastArchive == nil && r.HoursSinceStart > ArchiveEvery.Hours():
		r.Recommendation = RecommendArchiveNow
		r.Reasons = append(r.Reasons, fmt.Sprintf("never archived, and started %.2f h ago (over %.0f h)", r.HoursSinceStart, ArchiveEvery.Hours()))
	}
	if h := r.Window.HoursLeft; h != nil {
		switch {
		case *h <= 0:
			r.Recommendation = RecommendArchiveNow
			r.Reasons = append(r.Reasons, "the window closed at "+lc.WindowClosesAt)
		case *h < WindowNearlyOver.Hours():
			r.Recommendation = RecommendArchiveNow
			r.Reasons = append(r.Reasons, fmt.Sprintf("the window closes in %.2f h (at %s)", *h, lc.WindowClosesAt))
		}
	}
	if r.Stale {
		r.Reasons = append(r.Reasons, "the session is stale: no heartbeat within "+staleAfter.String())
	}
	return r, nil
}

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
func (s *Service) Assess(ctx context.Context, id string, req AssessRequest) (*Assessment, error) {
	sess, err := s.st.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	rec := sess.Record
	a := &Assessment{SessionID: id, Task: req.Task, AgentID: rec.AgentID, Role: rec.Role, Mode: rec.Mode.Get(), Risk: "unknown"}
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
		a.Phases = []Phase{{N: 1, MaxHours: MaxPhaseHours, Steps: steps, Checkpoint: "archive"}}
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
		a.Phases = append(a.Phases, Phase{N: i + 1, Hours: &h, MaxHours: MaxPhaseHours, Steps: slices.Clone(steps[lo:hi]), Checkpoint: "archive"})
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
		c, err1 := store.ParseTime(closed)
		st, err2 := store.ParseTime(sess.Record.StartedAt)
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
