package session

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// WarmOptions configure [Service.Warm].
type WarmOptions struct {
	// Window is the window's length (default the service's Options.Window).
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
		opt.Window = s.opt.Window
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
		lc.WindowStartedAt = contract.FormatTime(now)
		lc.WindowClosesAt = contract.FormatTime(now.Add(opt.Window))
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
