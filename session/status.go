package session

import (
	"context"
	"fmt"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// Recommendations of status.
const (
	RecommendOK         = "ok"
	RecommendArchiveNow = "archive_now"
)

// Status reports where the session stands: staleness, hours since the last archive, time left
// in the window, and the recommendation archive_now when a live session's last archive (or its
// start, when it was never archived) is over ArchiveEvery old, or its window has less than
// WindowNearlyOver left (or is over); ok otherwise. Staleness is judged with the service's
// Options.StaleAfter.
func (s *Service) Status(ctx context.Context, id string) (*StatusReport, error) {
	sess, err := s.st.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	lc, err := s.st.Lifecycle(ctx, id)
	if err != nil {
		return nil, err
	}
	return statusOf(&sess.Record, lc, s.now(), s.opt.StaleAfter), nil
}

// Advise is the part of Status a list of sessions shows: the recommendation, its reasons and
// staleness, from a detail already read (no I/O), judged as Status does.
func (s *Service) Advise(d *Detail) Advice {
	r := statusOf(&d.Record, d.Lifecycle, s.now(), s.opt.StaleAfter)
	return Advice{Recommendation: r.Recommendation, Stale: r.Stale, Reasons: r.Reasons}
}

// statusOf is the rule of Status, once: the report of a session with record rec and lifecycle
// state lc at time now.
func statusOf(rec *contract.SessionRecord, lc store.Lifecycle, now time.Time, staleAfter time.Duration) *StatusReport {
	if staleAfter <= 0 {
		staleAfter = DefaultStaleAfter
	}
	r := &StatusReport{SessionID: rec.SessionID, Status: rec.Status, LastHeartbeatAt: rec.LastHeartbeatAt.Get(),
		StaleAfterSeconds: staleAfter.Seconds(), LastArchivedAt: lc.LastArchivedAt,
		Window: windowOf(rec.SessionID, lc, now), Recommendation: RecommendOK, Reasons: []string{}}
	started, _ := store.ParseTime(rec.StartedAt)
	r.HoursSinceStart = hoursBetween(started, now)
	r.Stale = rec.Status == contract.SessionStatusStale || expired(rec, now.Add(-staleAfter))
	if t, err := store.ParseTime(lc.LastArchivedAt); err == nil {
		h := hoursBetween(t, now)
		r.HoursSinceLastArchive = &h
	}
	if !live(rec.Status) {
		r.Reasons = append(r.Reasons, fmt.Sprintf("the session is %s: nothing to archive", rec.Status))
		return r
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
	return r
}
