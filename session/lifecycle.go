package session

import (
	"context"
	"fmt"
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
	HeartbeatLost = "HEARTBEAT_LOST" // contract.CodeHeartbeatLost (TestRunErrorCodes)
)

// live reports whether a session status is one the runtime works in (heartbeats expected).
func live(status string) bool {
	return status == contract.SessionStatusRunning || status == contract.SessionStatusPaused || status == contract.SessionStatusStale
}

func (s *Service) stamp() string { return contract.FormatTime(s.now()) }

// Heartbeat records a heartbeat from the session's runtime: last_heartbeat_at becomes now, and
// a stale session becomes running again (updated_by_gate "owner"). It refuses, with a
// *RejectError INVALID_SESSION_STATE, a session that is closed or archived, and returns
// store.ErrSessionNotFound for an unknown one.
func (s *Service) Heartbeat(ctx context.Context, id string) (*store.Session, error) {
	var rej *RejectError
	sess, err := s.st.UpdateSession(ctx, id, func(sess *store.Session) error {
		rec := &sess.Record
		if !live(rec.Status) {
			rej = &RejectError{Code: contract.CodeInvalidState, Message: fmt.Sprintf("session %q is %s; heartbeats are for running, paused or stale sessions", id, rec.Status), Remedy: notLive(rec.Status)}
			return rej
		}
		now := s.stamp()
		rec.LastHeartbeatAt = contract.Some(now)
		if rec.Status == contract.SessionStatusStale {
			rec.Status = contract.SessionStatusRunning
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
