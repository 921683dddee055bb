package session

import "github.com/sessiond/sessiond/wire"

// The shapes the domain answers are defined in package wire, so that the Go client decodes them
// without importing session; these aliases keep their names in the domain.
type (
	// Transcript is [wire.Transcript]: the folded state of a session's log.
	Transcript = wire.Transcript
	// Message is [wire.Message]: a message with its parts folded.
	Message = wire.Message
	// Reasoning is [wire.Reasoning]: a reasoning block with its text accumulated.
	Reasoning = wire.Reasoning
	// Terminal is [wire.Terminal]: one terminal's output.
	Terminal = wire.Terminal
	// Usage is [wire.Usage]: the folded usage events.
	Usage = wire.Usage
	// UsageTotals is [wire.UsageTotals]: summed token counts.
	UsageTotals = wire.UsageTotals
	// Lineage is [wire.Lineage]: a session's place in its tree of forks.
	Lineage = wire.Lineage
	// LineageNode is [wire.LineageNode]: one session in a lineage tree.
	LineageNode = wire.LineageNode
	// Window is [wire.Window]: a session's work window.
	Window = wire.Window
	// Advice is [wire.Advice]: the recommendation the session resource carries.
	Advice = wire.Advice
	// StatusReport is [wire.StatusReport]: the answer of the status mode.
	StatusReport = wire.StatusReport
	// SweepResult is [wire.SweepResult]: what one sweep did.
	SweepResult = wire.SweepResult
	// AssessRequest is [wire.AssessRequest]: the input of the assess mode.
	AssessRequest = wire.AssessRequest
	// Assessment is [wire.Assessment]: the answer of the assess mode.
	Assessment = wire.Assessment
	// Phase is [wire.Phase]: one phase of an assessed plan.
	Phase = wire.Phase
	// Note is [wire.Note]: what the runtime says about the work when it archives.
	Note = wire.Note
	// ArchiveInfo is [wire.ArchiveInfo]: an archive file.
	ArchiveInfo = wire.ArchiveInfo
	// Progress is [wire.Progress]: how far a long operation has come.
	Progress = wire.Progress
)
