package wire

// Lifecycle is the lifecycle state of a session that the session record has no field for.
// Timestamps use contract.TimeFormat; empty strings mean "never". The store keeps it as JSON beside the
// session, and it travels in archives.
type Lifecycle struct {
	// WindowStartedAt and WindowClosesAt bound the session's work window, set by warm.
	WindowStartedAt string `json:"windowStartedAt,omitempty"`
	WindowClosesAt  string `json:"windowClosesAt,omitempty"`
	// LastArchivedAt, LastArchiveName and LastArchiveChecksum describe the session's latest
	// archive (the record's archive_path is its full path).
	LastArchivedAt      string `json:"lastArchivedAt,omitempty"`
	LastArchiveName     string `json:"lastArchiveName,omitempty"`
	LastArchiveChecksum string `json:"lastArchiveChecksum,omitempty"`
	// CompactedThrough, set by CompactEvents, is the last sequence removed from the hot
	// store's log; nil when the log was never compacted.
	CompactedThrough *int64 `json:"compactedThrough,omitempty"`
	// RestoredFrom and RestoredAt say which archive (by checksum) the session was last
	// restored from, and when.
	RestoredFrom string `json:"restoredFrom,omitempty"`
	RestoredAt   string `json:"restoredAt,omitempty"`
	// Multitask is the session's default multitask strategy (reject, enqueue or interrupt)
	// for an append that queues a run while another run is active; empty: reject.
	Multitask string `json:"multitask,omitempty"`
}

// Window is a session's work window as warm and status report it.
type Window struct {
	SessionID string `json:"sessionId"`
	// StartedAt and ClosesAt bound the window (RFC 3339); empty when it was never started.
	StartedAt string `json:"startedAt,omitempty"`
	ClosesAt  string `json:"closesAt,omitempty"`
	// HoursLeft is the time left until ClosesAt, in hours (negative once closed); null
	// without a window.
	HoursLeft *float64 `json:"hoursLeft"`
	// Started is true when this call opened the window (false: it was already open).
	Started bool `json:"started"`
}

// StatusReport is the answer of the status mode.
type StatusReport struct {
	SessionID string `json:"sessionId"`
	Status    string `json:"status"`
	// Stale is true when the session is stale, or its last heartbeat is older than the TTL
	// and the sweeper has not marked it yet.
	Stale             bool    `json:"stale"`
	LastHeartbeatAt   string  `json:"lastHeartbeatAt,omitempty"`
	StaleAfterSeconds float64 `json:"staleAfterSeconds"`
	// HoursSinceStart is the age of the session (since started_at).
	HoursSinceStart float64 `json:"hoursSinceStart"`
	// LastArchivedAt and HoursSinceLastArchive describe the latest archive; null when the
	// session was never archived.
	LastArchivedAt        string   `json:"lastArchivedAt,omitempty"`
	HoursSinceLastArchive *float64 `json:"hoursSinceLastArchive"`
	// Window is the work window (warm).
	Window *Window `json:"window"`
	// Recommendation is "ok" or "archive_now"; Reasons say why.
	Recommendation string   `json:"recommendation"`
	Reasons        []string `json:"reasons"`
}

// Advice is where a session stands at a glance, as the session resource carries it: the
// recommendation and reasons of the status mode (StatusReport) and whether it is stale.
type Advice struct {
	// Recommendation is "ok" or "archive_now"; Reasons say why.
	Recommendation string `json:"recommendation"`
	// Stale is true when the session is stale, or its last heartbeat is older than the TTL
	// and the sweeper has not marked it yet.
	Stale   bool     `json:"stale"`
	Reasons []string `json:"reasons"`
}

// SweepResult counts what one sweep did.
type SweepResult struct {
	// Expired is how many sessions the store reported expired.
	Expired int `json:"expired"`
	// Stale is how many of them were marked stale.
	Stale int `json:"stale"`
	// RunsFailed is how many active runs were marked failed with a HEARTBEAT_LOST error.
	RunsFailed int `json:"runsFailed"`
	// Skipped is how many turned out alive (a heartbeat or an append landed meanwhile).
	Skipped int `json:"skipped"`
}

// AssessRequest is the input of the assess mode.
type AssessRequest struct {
	// Task describes the work; lines starting with "-", "*" or "N." are taken as its steps.
	Task string `json:"task"`
}

// Assessment is the answer of the assess mode.
type Assessment struct {
	SessionID string `json:"sessionId"`
	Task      string `json:"task"`
	AgentID   string `json:"agentId"`
	Role      string `json:"role"`
	Mode      string `json:"mode,omitempty"`
	// Basis says which past sessions the estimate comes from; Samples how many.
	Basis   string `json:"basis"`
	Samples int    `json:"samples"`
	// Sufficient is false when there were fewer than MinSamples comparable sessions: then
	// there are no numbers (OptimisticHours, PessimisticHours null, risk "unknown").
	Sufficient       bool     `json:"sufficient"`
	OptimisticHours  *float64 `json:"optimisticHours"`
	PessimisticHours *float64 `json:"pessimisticHours"`
	// Risk is "low" (pessimistic up to 2 h), "medium" (up to HighRiskHours), "high", or
	// "unknown" without an estimate.
	Risk    string  `json:"risk"`
	Message string  `json:"message"`
	Phases  []Phase `json:"phases"`
}

// Phase is one phase of an assessed plan: at most session.MaxPhaseHours, ending with an archive.
type Phase struct {
	N int `json:"n"`
	// Hours is the phase's share of the pessimistic estimate; null without an estimate.
	Hours      *float64 `json:"hours"`
	MaxHours   float64  `json:"maxHours"`
	Steps      []string `json:"steps"`
	Checkpoint string   `json:"checkpoint"`
}
