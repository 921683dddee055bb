package session

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Clock is where the service and its maintainer read the time and wait: the sweeper, the lease
// expirer and retention, leases, heartbeats and every timestamp the server
// writes. The real clock ([SystemClock]) is the default; the simulation tester (internal/sim)
// injects one it steps, so that background work runs at simulated instants, without sleeps.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that sends the time on its channel once d has passed.
	NewTimer(d time.Duration) Timer
}

// Timer is a [Clock]'s one-shot timer, as time.Timer.
type Timer interface {
	// C is the channel the time is sent on when the timer fires.
	C() <-chan time.Time
	// Stop stops the timer; it reports whether the timer was still armed.
	Stop() bool
	// Reset arms the timer again to fire d from now; it reports whether it was still armed.
	Reset(d time.Duration) bool
}

// SystemClock returns the real clock: time.Now and time.NewTimer.
func SystemClock() Clock { return ClockFunc(time.Now) }

// ClockFunc is a Clock whose Now is the function and whose timers are real ones: for a caller
// that shifts or fixes the time the service writes but lets background work wait in real time.
type ClockFunc func() time.Time

// Now returns f().
func (f ClockFunc) Now() time.Time { return f() }

// NewTimer returns a real timer (time.NewTimer).
func (f ClockFunc) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// Defaults of [Options].
const (
	// DefaultLeaseExpiryInterval is how often the maintainer looks for expired leases.
	DefaultLeaseExpiryInterval = 500 * time.Millisecond
	// DefaultRetentionInterval is how often the maintainer applies the retention policy.
	DefaultRetentionInterval = time.Hour
)

// Options are the domain's settings, given once to [New] (sessiond serve's flags): the
// service's calls read them from here instead of taking them as parameters. Zero fields take
// the defaults documented on each field.
type Options struct {
	// Clock is the time (default SystemClock()).
	Clock Clock
	// StaleAfter is the heartbeat TTL: running and paused sessions silent for longer are
	// marked stale by the sweeper, and status reports them stale (default DefaultStaleAfter).
	StaleAfter time.Duration
	// SweepInterval is how often the maintainer sweeps (0: no background sweeper; Sweep still
	// sweeps on demand).
	SweepInterval time.Duration
	// MaxAttempts is how many attempts a run gets when its lease expires (default 1: the run
	// is failed; above 1 a new attempt is queued until the count is reached).
	MaxAttempts int
	// LeaseExpiryInterval is how often the maintainer looks for expired leases (default DefaultLeaseExpiryInterval; negative: never, for tests that
	// call ExpireLeases themselves).
	LeaseExpiryInterval time.Duration
	// Window is the default length of the work window Warm opens (default DefaultWindow).
	Window time.Duration
	// ArchiveDir is where archives are written and read; empty: archives are not configured.
	ArchiveDir string
	// Retention is the retention policy the maintainer applies (the zero policy applies
	// nothing); it needs ArchiveDir.
	Retention RetentionPolicy
	// RetentionInterval is how often the maintainer applies Retention (default
	// DefaultRetentionInterval; the first pass runs one interval after Start).
	RetentionInterval time.Duration
	// Logger receives what background work cannot return to a caller: failed passes, and a
	// line per pass that did something (default: discard).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = SystemClock()
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = DefaultStaleAfter
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 1
	}
	if o.LeaseExpiryInterval == 0 {
		o.LeaseExpiryInterval = DefaultLeaseExpiryInterval
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.RetentionInterval <= 0 {
		o.RetentionInterval = DefaultRetentionInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Options returns the service's settings, defaults filled in.
func (s *Service) Options() Options { return s.opt }

// Now returns the service's current time (its Clock's).
func (s *Service) Now() time.Time { return s.opt.Clock.Now() }

// Pass is what one pass of background work did, as told to the function set with OnPass.
type Pass struct {
	// Kind is PassSweep, PassLeaseExpiry or PassRetention.
	Kind string
	// Sweep is the sweep's result (PassSweep).
	Sweep SweepResult
	// Leases is the lease expirer's result (PassLeaseExpiry).
	Leases LeaseExpiryResult
	// Retention is the retention plan applied (PassRetention; nil when the pass failed early).
	Retention *RetentionPlan
	// Err is the pass's error (nil: it succeeded).
	Err error
	// Took is how long the pass took, by the service's clock.
	Took time.Duration
}

// Kinds of [Pass].
const (
	PassSweep       = "sweep"
	PassLeaseExpiry = "lease_expiry"
	PassRetention   = "retention"
)

// OnPass sets the function told of every pass of the maintainer and of Sweep and ExpireLeases
// called on demand (for metrics). Set it before Start.
func (s *Service) OnPass(fn func(Pass)) { s.onPass = fn }

// report tells OnPass's function of a pass.
func (s *Service) report(p Pass) {
	if s.onPass != nil {
		s.onPass(p)
	}
}

// maintainer is the service's background work: the sweeper, the lease expirer and retention, each a loop on the service's clock, all on one context that Stop
// ends. The service is its one owner.
type maintainer struct {
	mu     sync.Mutex
	cancel context.CancelFunc // nil: not started
	wg     sync.WaitGroup
}

// ErrStarted is returned by Start when the maintainer runs already.
var ErrStarted = errors.New("session: the maintainer is started already")

// Start starts the service's background work, each on its interval of the service's clock
// until Stop or ctx ends: the sweeper (Options.SweepInterval), the lease expirer
// (Options.LeaseExpiryInterval), retention (Options.Retention, when it has a rule and
// Options.ArchiveDir is set). A pass runs on the maintainer's context: Stop cancels a pass in
// progress, which leaves nothing half done (each change is one conditional append or one
// atomic file operation). Passes of one kind never overlap; a pass that outlasts its
// interval delays the next one.
func (s *Service) Start(ctx context.Context) error {
	m := &s.maint
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cancel != nil {
		return ErrStarted
	}
	ctx, m.cancel = context.WithCancel(ctx)
	o := s.opt
	if o.SweepInterval > 0 {
		s.every(ctx, o.SweepInterval, o.SweepInterval+time.Minute, func(ctx context.Context) {
			res, err := s.Sweep(ctx, SweepOptions{})
			switch {
			case err != nil && ctx.Err() == nil:
				o.Logger.Error("sweep failed; retrying at the next interval", "err", err)
			case res.Expired > 0:
				o.Logger.Info("sweep", "expired", res.Expired, "stale", res.Stale, "runsFailed", res.RunsFailed, "skipped", res.Skipped)
			}
		})
	}
	if o.LeaseExpiryInterval > 0 {
		s.every(ctx, o.LeaseExpiryInterval, time.Minute, func(ctx context.Context) {
			res, err := s.ExpireLeases(ctx, LeaseExpiryOptions{})
			switch {
			case err != nil && ctx.Err() == nil:
				o.Logger.Error("lease expiry failed; retrying at the next interval", "err", err)
			case res.Expired > 0:
				o.Logger.Info("leases expired", "expired", res.Expired, "failed", res.Failed, "requeued", res.Requeued, "skipped", res.Skipped)
			}
		})
	}
	if o.Retention.Enabled() && o.ArchiveDir != "" {
		s.every(ctx, o.RetentionInterval, 0, s.retain)
	}
	return nil
}

// Stop ends the background work Start started and waits for it: a pass in progress is
// cancelled. Stopping a maintainer that is not started does nothing; it may be started again.
func (s *Service) Stop() {
	m := &s.maint
	m.mu.Lock()
	cancel := m.cancel
	m.cancel = nil
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	m.wg.Wait()
}

// every runs tick every interval of the service's clock, on a goroutine of the maintainer,
// until ctx ends; a tick's context ends after timeout (0: only with ctx), so that a store that
// hangs holds up no more than one pass. The timer is armed again after each tick, so ticks
// never overlap.
func (s *Service) every(ctx context.Context, interval, timeout time.Duration, tick func(context.Context)) {
	s.maint.wg.Add(1)
	go func() {
		defer s.maint.wg.Done()
		t := s.opt.Clock.NewTimer(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			}
			pass, cancel := ctx, context.CancelFunc(func() {})
			if timeout > 0 {
				pass, cancel = context.WithTimeout(ctx, timeout)
			}
			tick(pass)
			cancel()
			if ctx.Err() != nil {
				return
			}
			t.Reset(interval)
		}
	}()
}

// retain runs one retention pass and logs it.
func (s *Service) retain(ctx context.Context) {
	start := s.now()
	plan, err := s.ApplyRetention(ctx, s.opt.ArchiveDir, s.opt.Retention)
	if err == nil || ctx.Err() == nil {
		s.report(Pass{Kind: PassRetention, Retention: plan, Err: err, Took: s.now().Sub(start)})
	}
	log := s.opt.Logger
	switch {
	case err != nil && ctx.Err() == nil:
		log.Error("retention pass failed; retrying at the next interval", "err", err)
		return
	case err != nil:
		return
	case len(plan.Errors) > 0:
		log.Error("retention pass: some actions failed", "errors", plan.Errors)
	}
	if len(plan.Archive)+len(plan.Delete)+len(plan.Errors) > 0 {
		log.Info("retention", "archived", len(plan.Archive), "deleted", len(plan.Delete), "keptLastCopy", len(plan.Kept),
			"failed", len(plan.Errors), "archiveBytes", plan.ArchiveBytesAfter)
	}
	for _, a := range plan.Kept {
		log.Debug("retention kept a last copy", "archive", a.Name, "session", a.SessionID, "why", a.Detail)
	}
}
