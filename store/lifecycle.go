package store

import (
	"fmt"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/wire"
)

// HeartbeatOf returns the heartbeat the store indexes for a record: last_heartbeat_at, or
// started_at when the session never had a heartbeat. ok is false when neither parses.
func HeartbeatOf(r *contract.SessionRecord) (t time.Time, ok bool) {
	s := r.StartedAt
	if v := r.LastHeartbeatAt.Get(); v != "" {
		s = v
	}
	t, err := contract.ParseTime(s)
	return t, err == nil
}

// ExpiredSession is one answer of Store.ExpiredSessions.
type ExpiredSession struct {
	SessionID string
	// Heartbeat is the session's last heartbeat (started_at when it never had one).
	Heartbeat time.Time
}

// Lifecycle is [wire.Lifecycle]: the lifecycle state of a session that the session record has
// no field for, kept as JSON beside the session. It is defined in package wire so that the Go
// client reads it without importing the store.
type Lifecycle = wire.Lifecycle

// Import is a whole session for Store.ImportSession.
type Import struct {
	// Session holds the record, snapshot, lineage and active branch; LastSequence is the
	// sequence of the last event (-1 for an empty log).
	Session   *Session
	Lifecycle Lifecycle
	// Events are the whole log in order, stored verbatim (Data, Sequence, EventID,
	// IdempotencyKey, EventType, RunID).
	Events []StoredEvent
	// Runs are the run projection in creation order, consistent with Events.
	Runs []contract.Run
}

// Check verifies the shape ImportSession requires: a session with an id, and events with
// sequences 0..n-1 ending at Session.LastSequence.
func (imp *Import) Check() error {
	if imp == nil || imp.Session == nil || imp.Session.Record.SessionID == "" {
		return fmt.Errorf("import: the session has no session_id")
	}
	// Everything the tables hold unique is checked here, so that a bad import is refused as
	// a whole before it reaches a driver (where a constraint failure could fail other writes
	// committed with it).
	ids, keys := make(map[string]int, len(imp.Events)), make(map[string]int, len(imp.Events))
	for i, e := range imp.Events {
		if e.Sequence != int64(i) {
			return fmt.Errorf("import session %q: event %d has sequence %d; the log must be sequences 0, 1, 2, ... without gaps", imp.Session.Record.SessionID, i, e.Sequence)
		}
		if j, ok := ids[e.EventID]; ok {
			return fmt.Errorf("import session %q: events %d and %d have the same eventId %q", imp.Session.Record.SessionID, j, i, e.EventID)
		}
		if j, ok := keys[e.IdempotencyKey]; ok {
			return fmt.Errorf("import session %q: events %d and %d have the same idempotencyKey %q", imp.Session.Record.SessionID, j, i, e.IdempotencyKey)
		}
		ids[e.EventID], keys[e.IdempotencyKey] = i, i
	}
	if imp.Session.LastSequence != int64(len(imp.Events))-1 {
		return fmt.Errorf("import session %q: LastSequence is %d but the log has %d events", imp.Session.Record.SessionID, imp.Session.LastSequence, len(imp.Events))
	}
	runs := make(map[string]int, len(imp.Runs))
	for i, r := range imp.Runs {
		if r.SessionID != imp.Session.Record.SessionID {
			return fmt.Errorf("import session %q: run %d (%q) belongs to session %q", imp.Session.Record.SessionID, i, r.RunID, r.SessionID)
		}
		if j, ok := runs[r.RunID]; ok {
			return fmt.Errorf("import session %q: runs %d and %d have the same runId %q", imp.Session.Record.SessionID, j, i, r.RunID)
		}
		runs[r.RunID] = i
	}
	return nil
}
