package contract

// RecordTransition is one allowed change of a session record's status: who may make it and
// how.
type RecordTransition struct {
	From, To string
	// Patch is true when a client may make the change with PATCH /v1/sessions/{id}.
	Patch bool
	// Server, when not empty, is the mechanism of the server that makes the change: one of
	// BySweeper, ByHeartbeat, ByArchive, ByRestore.
	Server string
}

// The mechanisms of the server that change a session record's status.
const (
	// BySweeper marks running and paused sessions stale when their heartbeats stop.
	BySweeper = "sweeper"
	// ByHeartbeat is a heartbeat, or an append from the runtime, bringing a stale session back.
	ByHeartbeat = "heartbeat"
	// ByArchive is archiving a session.
	ByArchive = "archive"
	// ByRestore is restoring a session from its latest archive.
	ByRestore = "restore"
)

// recordTransitions is the session record status table of docs/lifecycle.md ("Statuses and
// allowed changes"), one row per allowed change, in the order the PATCH refusal lists a
// status's targets. stale is set by the server when heartbeats stop, archived by archive;
// closed is final except for archiving; an archived session comes back only through restore.
// A change that is not in the table is refused, by PATCH and by the server alike. A status
// may always be re-applied to itself (PATCH with the current status changes nothing).
var recordTransitions = []RecordTransition{
	{From: SessionStatusRunning, To: SessionStatusPaused, Patch: true},
	{From: SessionStatusRunning, To: SessionStatusClosed, Patch: true},
	{From: SessionStatusRunning, To: SessionStatusStale, Server: BySweeper},
	{From: SessionStatusRunning, To: SessionStatusArchived, Server: ByArchive},
	{From: SessionStatusPaused, To: SessionStatusRunning, Patch: true},
	{From: SessionStatusPaused, To: SessionStatusClosed, Patch: true},
	{From: SessionStatusPaused, To: SessionStatusStale, Server: BySweeper},
	{From: SessionStatusPaused, To: SessionStatusArchived, Server: ByArchive},
	{From: SessionStatusStale, To: SessionStatusRunning, Patch: true, Server: ByHeartbeat},
	{From: SessionStatusStale, To: SessionStatusClosed, Patch: true},
	{From: SessionStatusStale, To: SessionStatusArchived, Server: ByArchive},
	{From: SessionStatusClosed, To: SessionStatusArchived, Server: ByArchive},
	{From: SessionStatusArchived, To: SessionStatusPaused, Server: ByRestore},
}

// RecordTransitions returns the whole session record status table, one row per allowed
// change (a copy: the caller may keep or change it).
func RecordTransitions() []RecordTransition {
	return append([]RecordTransition(nil), recordTransitions...)
}

// recordTransition returns the table's row for a change, if the table has one.
func recordTransition(from, to string) (RecordTransition, bool) {
	for _, t := range recordTransitions {
		if t.From == from && t.To == to {
			return t, true
		}
	}
	return RecordTransition{}, false
}

// CanPatchStatus reports whether PATCH may change a session record's status from one value
// to another; re-applying the current status is always allowed.
func CanPatchStatus(from, to string) bool {
	if from == to {
		return true
	}
	t, ok := recordTransition(from, to)
	return ok && t.Patch
}

// PatchTargets returns the statuses PATCH may change a session record's status to from the
// given one, in table order; none (nil) for closed, archived or an unknown status.
func PatchTargets(from string) []string {
	var out []string
	for _, t := range recordTransitions {
		if t.From == from && t.Patch {
			out = append(out, t.To)
		}
	}
	return out
}

// ServerTransition returns the mechanism of the server (BySweeper, …) that changes a session
// record's status from one value to another, and false when the server never makes that
// change.
func ServerTransition(from, to string) (string, bool) {
	t, ok := recordTransition(from, to)
	if !ok || t.Server == "" {
		return "", false
	}
	return t.Server, true
}
