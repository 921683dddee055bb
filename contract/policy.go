package contract

import "slices"

// Sequence rules of a command policy.
const (
	// SequenceMatchCurrent: the command's expectedSequence must equal the session's last
	// sequence, else the command is rejected with SEQUENCE_CONFLICT.
	SequenceMatchCurrent = "match-current"
	// SequenceTargetRun: the command targets a run, not the head of the log; events appended
	// since the sender looked do not make it conflict while the target run is still active.
	SequenceTargetRun = "target-run"
)

// CommandPolicy says when a command may be applied. It is one row of the policy table that
// every command is judged by before it changes anything.
type CommandPolicy struct {
	// Capability is the snapshot capability the command needs ("" when none is needed); a
	// session whose snapshot lacks it answers CAPABILITY_UNAVAILABLE.
	Capability string
	// AllowedStatuses are the run statuses the command is allowed in: the status of the
	// session's current run, or of the target run when NeedsActiveRun is set. Nil means any
	// status, including a session without runs.
	AllowedStatuses []string
	// NeedsRunID says that the command must carry runId, the run it is about.
	NeedsRunID bool
	// NeedsActiveRun says that the target run must still be active (not stopped, completed
	// or failed): RUN_ALREADY_FINISHED otherwise.
	NeedsActiveRun bool
	// Sequence is the sequence rule: [SequenceMatchCurrent] or [SequenceTargetRun].
	Sequence string
	// Effect says, in words (Markdown), what an accepted command does to the session it is
	// sent to.
	Effect string
}

var terminalStatuses = []string{RunStatusStopped, RunStatusCompleted, RunStatusFailed}

// commandPolicies is the policy table, one row per command type.
var commandPolicies = map[string]CommandPolicy{
	"stop": {AllowedStatuses: []string{RunStatusQueued, RunStatusRunning, RunStatusWaitingApproval}, NeedsRunID: true, NeedsActiveRun: true,
		Sequence: SequenceTargetRun, Effect: "the target run's status becomes `stopping`; the runtime then appends `stopped` (or `completed`, `failed`); a `queued` run that no worker holds alive is also made `stopped` by the server, since nobody is there to confirm"},
	"resume": {Capability: "resume", AllowedStatuses: terminalStatuses, NeedsRunID: true,
		Sequence: SequenceMatchCurrent, Effect: "a new run is `queued`, started by the same source message as the target run"},
	"retry": {AllowedStatuses: []string{RunStatusFailed}, NeedsRunID: true,
		Sequence: SequenceMatchCurrent, Effect: "a new run is `queued`, started by the same source message as the failed run"},
	"retry-summary": {Capability: "summary", AllowedStatuses: terminalStatuses, NeedsRunID: true,
		Sequence: SequenceMatchCurrent, Effect: "the failed summary is appended again as `generating`; run statuses are preserved"},
	"approval": {Capability: "approval", AllowedStatuses: []string{RunStatusWaitingApproval}, NeedsRunID: true, NeedsActiveRun: true,
		Sequence: SequenceMatchCurrent, Effect: "the approval is appended with the decision, and the run's status becomes `running`"},
	"fork": {Capability: "threadForking",
		Sequence: SequenceMatchCurrent, Effect: "none: a new thread (session) is created from the source message"},
	"edit-and-rerun": {Capability: "editAndRerun", AllowedStatuses: terminalStatuses,
		Sequence: SequenceMatchCurrent, Effect: "none: a new thread is created with the source message's parts replaced, and a run is queued in it"},
	"steer": {Capability: "steering", AllowedStatuses: []string{RunStatusQueued, RunStatusRunning}, NeedsRunID: true, NeedsActiveRun: true,
		Sequence: SequenceMatchCurrent, Effect: "a `steer` event is appended as `accepted`; the runtime applies it and appends it as `applied` or `failed`"},
}

// PolicyOf returns the policy of a command type (one of [CommandTypes]), and false for an
// unknown type.
func PolicyOf(commandType string) (CommandPolicy, bool) {
	p, ok := commandPolicies[commandType]
	p.AllowedStatuses = slices.Clone(p.AllowedStatuses)
	return p, ok
}
