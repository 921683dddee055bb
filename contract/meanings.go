package contract

// This file holds what the enumerated values of the contract mean, in words: the command error
// codes, the capabilities, the run statuses and the session record statuses. The reference page
// (docs/reference.md) is generated from these tables and the schema tables; tests hold the
// tables to the enumerations they explain.

// commandErrorMeanings says when each command error code ([ErrorCodes]) is used.
var commandErrorMeanings = map[ErrorCode]string{
	"SESSION_NOT_FOUND":          "the session does not exist",
	"RUN_NOT_FOUND":              "the command's runId names no run of the session",
	"ACTIVE_RUN_NOT_FOUND":       "the command needs an active run and the session has none",
	"RUN_ALREADY_FINISHED":       "the target run is already stopped, completed or failed",
	"STOP_TIMEOUT":               "a stop waited for the runtime to confirm it and the wait ran out; the stop stays requested (retryable: send the same command again to keep waiting)",
	"COMMAND_NOT_SUPPORTED":      "the command type is not supported (sessiond supports all 8; an unknown commandType is a contract violation instead)",
	"CAPABILITY_UNAVAILABLE":     "the session's snapshot lacks the capability the command needs",
	"SEQUENCE_CONFLICT":          "expectedSequence is not the session's last sequence (retryable: read the new events and send the command again)",
	"INVALID_SESSION_STATE":      "the run status does not allow the command",
	"TARGET_EVENT_NOT_FOUND":     "the event the command points at (sourceEventId, resumeEventId) is not in the session",
	"TARGET_EVENT_NOT_RETRYABLE": "the event the command points at cannot be retried: not a retryable error or the run's failed status (retry), not a failed summary of the run (retry-summary)",
	"APPROVAL_NOT_FOUND":         "no approval with that approvalId was requested in the session",
	"APPROVAL_ALREADY_RESOLVED":  "the approval was already approved, rejected or expired",
	"SOURCE_THREAD_NOT_FOUND":    "the source thread (session) of a fork does not exist",
	"SOURCE_MESSAGE_NOT_FOUND":   "the source message of a fork is not in the source thread",
	"SOURCE_RUN_NOT_FOUND":       "the source run of a fork is not in the source thread",
	"SOURCE_LINEAGE_INVALID":     "the source message, run and thread do not belong together: the message neither started the run nor belongs to it",
	"ACTIVE_BRANCH_NOT_FOUND":    "the active branch a command names does not exist (no sessiond command names one, so sessiond never answers it)",
	"COMMAND_EXECUTION_FAILED":   "the command was allowed but could not be applied: the log kept moving while it was applied (retryable: send it again)",
}

// CommandErrorMeaning says when a command error code (one of [ErrorCodes]) is used; "" for an
// unknown code.
func CommandErrorMeaning(code ErrorCode) string { return commandErrorMeanings[code] }

// CapabilityPresets are the capability sets of the two snapshot modes, as the CLI's create
// turns them on: chat, and work (chat's set and more).
var CapabilityPresets = map[string][]string{
	"chat": {"text", "tools", "mcp", "skills", "approval", "usage", "editAndRerun", "summary"},
	"work": {"text", "tools", "mcp", "skills", "approval", "usage", "editAndRerun", "summary", "shell", "fileChange", "artifacts", "resume", "steering"},
}

// CapabilityEvidence lists, for each capability ([CapabilityNames]), the event types and
// command types that show it in use: a snapshot that claims a capability is honest only if
// the session can show the events or commands behind it.
var CapabilityEvidence = map[string]struct{ Events, Commands []string }{
	"text":           {Events: []string{"message"}},
	"reasoning":      {Events: []string{"reasoning"}},
	"plan":           {Events: []string{"plan"}},
	"tasks":          {Events: []string{"task"}},
	"tools":          {Events: []string{"tool"}},
	"mcp":            {Events: []string{"tool"}},
	"shell":          {Events: []string{"tool", "terminal"}},
	"fileChange":     {Events: []string{"tool", "diff", "workspace-file"}},
	"skills":         {Events: []string{"tool"}},
	"approval":       {Events: []string{"approval"}, Commands: []string{"approval"}},
	"artifacts":      {Events: []string{"artifact"}},
	"usage":          {Events: []string{"usage"}},
	"resume":         {Events: []string{"resume"}, Commands: []string{"resume"}},
	"diff":           {Events: []string{"diff"}},
	"workspaceFiles": {Events: []string{"workspace-file"}},
	"terminal":       {Events: []string{"terminal"}},
	"testResults":    {Events: []string{"test-result"}},
	"threadForking":  {Commands: []string{"fork"}},
	"editAndRerun":   {Commands: []string{"edit-and-rerun"}},
	"steering":       {Events: []string{"steer"}, Commands: []string{"steer"}},
	"summary":        {Events: []string{"summary"}, Commands: []string{"retry-summary"}},
}

// runStatusMeanings says what each run status ([RunStatuses]) means and who appends it.
var runStatusMeanings = map[string]string{
	"queued":           "the run is waiting to start; appended by the runtime when it accepts work, or by the server for resume and retry",
	"running":          "the agent is working; appended by the runtime, and by the server after an approval decision",
	"waiting_approval": "the run waits for a person's approval decision; appended by the runtime when it requested an approval",
	"stopping":         "a stop was requested and the runtime has not confirmed it yet; appended by the server when a stop command is accepted",
	"stopped":          "the run was stopped (terminal); appended by the runtime",
	"completed":        "the run finished its work (terminal); appended by the runtime",
	"failed":           "the run failed (terminal); appended by the runtime, or by the server's stale sweeper when the runtime went silent",
}

// RunStatusMeaning says what a run status (one of [RunStatuses]) or [StatusIdle] means; "" for
// an unknown status.
func RunStatusMeaning(status string) string {
	if status == StatusIdle {
		return "the session has no run yet (a value sessiond adds for a view or command result of a session without runs)"
	}
	return runStatusMeanings[status]
}

// RunStatusTimestamp returns the payload field a run status event of that status must carry
// (running: startedAt, stopping: stoppingRequestedAt, stopped: stoppedAt, completed:
// completedAt, failed: failedAt), or "" when it needs none.
func RunStatusTimestamp(status string) string { return runStatusTimestamp[status] }

// RunTransitions returns the statuses a run of the given status may change to, besides
// re-applying its own status; none for a terminal status.
func RunTransitions(from string) []string { return append([]string(nil), runTransitions[from]...) }

// sessionStatusMeanings says what each session record status ([SessionStatuses]) means.
var sessionStatusMeanings = map[string]string{
	"running":  "the session is open for work: its runtime may append and run (whether a run is active right now is the run status)",
	"paused":   "the session is set aside by its owner; it can be made running again",
	"closed":   "the work is over; the session can still be read and archived",
	"stale":    "the runtime went silent: no heartbeat within the time to live; a heartbeat or an append makes it running again",
	"archived": "the session is kept in an archive for replay and is no longer active; restore brings it back",
}

// SessionStatusMeaning says what a session record status (one of [SessionStatuses]) means; ""
// for an unknown status.
func SessionStatusMeaning(status string) string { return sessionStatusMeanings[status] }

// Rule is a cross-field rule of the contract: one the schemas cannot say, checked once the
// document's shape is right. Its Name is the rule of the [Problem] that reports it.
type Rule struct {
	Name string
	// Kind is the document kind it applies to ([KindEvent], [KindCommand], ...).
	Kind string
	// AppliesTo says which documents of that kind: an event or command type, or all.
	AppliesTo string
	// Requires says what the rule requires.
	Requires string
}

// Rules lists every cross-field rule the validator checks, by document kind.
var Rules = []Rule{
	{"steer-run-id", KindEvent, "steer", "`runId` equals `payload.targetRunId`"},
	{"steer-error-status", KindEvent, "steer", "`payload.error` is present if and only if `payload.status` is `failed`"},
	{"summary-run-id", KindEvent, "summary", "`runId` equals `payload.runId`"},
	{"run-status-source-message", KindEvent, "status with `runId`", "a `status` event with `runId` is a run status event: it also carries `sourceMessageId`, the message that started the run"},
	{"run-status-timestamp", KindEvent, "status with `runId`", "the payload has the timestamp of its status: `running`→`startedAt`, `stopping`→`stoppingRequestedAt`, `stopped`→`stoppedAt`, `completed`→`completedAt`, `failed`→`failedAt`"},
	{"run-status-duration", KindEvent, "status with `runId`", "a terminal status (`stopped`, `completed`, `failed`) has `payload.durationMs`"},
	{"command-needs-run-id", KindCommand, "stop, resume, retry, retry-summary, approval, steer", "the command has `runId`, the run it is about"},
	{"retry-summary-run-id", KindCommand, "retry-summary", "`payload.sourceRunId` equals `runId`"},
	{"steer-run-id", KindCommand, "steer", "`payload.targetRunId` equals `runId`"},
	{"result-error-outcome", KindCommandResult, "all", "`error` is present exactly when `outcome` is `rejected` or `failed`"},
	{"result-termination", KindCommandResult, "all", "`termination: requested` only with `sessionStatus: stopping`; `confirmed` only with a terminal status"},
	{"result-operation-lineage", KindCommandResult, "with `operation`", "`operation.activeBranch.lineage` equals `operation.lineage`"},
	{"result-operation-run-id", KindCommandResult, "with `operation`", "`operation.activeBranch.runId` equals the result's `runId`"},
	{"run-invariant", KindRun, "all", "at most one terminal timestamp; a terminal status has its timestamp and `durationMs`; a non-terminal status has neither; `stopping` and `stopped` have `stoppingRequestedAt`"},
	{"view-session-id", KindView, "all", "every event has the view's `sessionId`"},
	{"view-sequence-order", KindView, "all", "event sequences strictly increase"},
	{"view-unique-event-id", KindView, "all", "no `eventId` appears twice"},
	{"view-unique-idempotency-key", KindView, "all", "no `idempotencyKey` appears twice"},
	{"view-last-sequence", KindView, "all", "`lastSequence` is the last event's sequence, or -1 with no events"},
	{"session-id-prefix", KindSession, "all", "`session_id` starts with `S-`"},
}
