package contract

// The statuses of a run ([RunStatuses]) and of a session record ([SessionStatuses]), named so
// that code compares and sets them by constant. Plan, task, message, approval and summary
// statuses are other enumerations (same words, other meanings) and are not these.
const (
	RunStatusQueued          = "queued"
	RunStatusRunning         = "running"
	RunStatusWaitingApproval = "waiting_approval"
	RunStatusStopping        = "stopping"
	RunStatusStopped         = "stopped"
	RunStatusCompleted       = "completed"
	RunStatusFailed          = "failed"
)

// Statuses of a session record (cortex-session.schema.json's status).
const (
	SessionStatusRunning  = "running"
	SessionStatusPaused   = "paused"
	SessionStatusClosed   = "closed"
	SessionStatusStale    = "stale"
	SessionStatusArchived = "archived"
)
