package session

import "github.com/sessiond/sessiond/wire"

// Phases of [wire.Progress].
const (
	// PhaseRead: archive reads the log and folds it (the summary), event by event.
	PhaseRead = "read"
	// PhaseWrite: archive encodes the file, writes and syncs it, reads it back and verifies
	// it, and marks the session archived (reported at its start and end).
	PhaseWrite = "write"
	// PhaseCompact: archive --compact deletes the archived events from the store (start and
	// end).
	PhaseCompact = "compact"
	// PhaseVerify: restore checks each event of the verified file against the contract.
	PhaseVerify = "verify"
	// PhaseImport: restore writes the session and its log to the store in one transaction
	// (start and end).
	PhaseImport = "import"
)

// ProgressFunc is told the progress of a long operation. It is called on the operation's
// goroutine, at most once per progressEvery events and at each phase's start and end, so it
// must return quickly; nil means nobody is listening.
type ProgressFunc func(wire.Progress)

// progressEvery is how many events a phase handles between two reports.
const progressEvery = 1024

// report calls f, if set.
func (f ProgressFunc) report(phase string, done, total int64) {
	if f != nil {
		f(wire.Progress{Phase: phase, Done: done, Total: total})
	}
}
