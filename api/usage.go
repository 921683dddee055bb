package api

// UsageCounts are the counts of a usage group, as GET /v1/usage reports them: sums over the
// usage events (tokens as the events carry them: a usage event has no cost and no cached-token
// count in the contract, so neither is reported), the runs that ended (by their terminal run
// status event) and the tool calls that ended (by their terminal tool event). The rates and
// the mean are derived from the counts.
type UsageCounts struct {
	// UsageEvents is the number of usage events.
	UsageEvents int64 `json:"usageEvents"`
	// InputTokens, OutputTokens and TotalTokens are the sums of the usage events' counts, each
	// as sent (an event without totalTokens adds nothing to it).
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
	TotalTokens  int64 `json:"totalTokens"`
	// Runs is the number of runs that ended: RunsCompleted + RunsFailed + RunsStopped.
	Runs          int64 `json:"runs"`
	RunsCompleted int64 `json:"runsCompleted"`
	RunsFailed    int64 `json:"runsFailed"`
	RunsStopped   int64 `json:"runsStopped"`
	// RunFailureRate is RunsFailed / Runs (0 when no run ended).
	RunFailureRate float64 `json:"runFailureRate"`
	// RunDurationMs is the sum of the ended runs' durationMs; MeanRunDurationMs their mean (0
	// when no run ended).
	RunDurationMs     int64   `json:"runDurationMs"`
	MeanRunDurationMs float64 `json:"meanRunDurationMs"`
	// ToolCalls is the number of tool calls that ended (completed, failed or denied), of which
	// ToolFailures failed and ToolDenied were denied.
	ToolCalls    int64 `json:"toolCalls"`
	ToolFailures int64 `json:"toolFailures"`
	ToolDenied   int64 `json:"toolDenied"`
}

// UsageGroup is one group of GET /v1/usage: the values of the dimensions grouped by (each
// present exactly when the query groups by it; project "" is a session without one) and the
// group's counts.
type UsageGroup struct {
	Project   *string `json:"project,omitempty"`
	Agent     *string `json:"agent,omitempty"`
	Model     *string `json:"model,omitempty"`
	SessionID *string `json:"sessionId,omitempty"`
	// Day is the UTC day, YYYY-MM-DD.
	Day *string `json:"day,omitempty"`
	UsageCounts
}

// ToolUsage is one tool's calls over the whole answer.
type ToolUsage struct {
	Tool     string `json:"tool"`
	Calls    int64  `json:"calls"`
	Failures int64  `json:"failures"`
	Denied   int64  `json:"denied"`
	// FailureRate is Failures / Calls.
	FailureRate float64 `json:"failureRate"`
}

// UsageResponse is the body of GET /v1/usage.
type UsageResponse struct {
	// From and To are the first and the last UTC day counted (YYYY-MM-DD), inclusive.
	From string `json:"from"`
	To   string `json:"to"`
	// By are the dimensions grouped by, in the order the groups are sorted.
	By []string `json:"by"`
	// Groups, sorted by the dimensions in order (byte order of each, days in order); at most
	// the limit asked for.
	Groups []UsageGroup `json:"groups"`
	// Truncated is true when more groups matched than the limit.
	Truncated bool `json:"truncated"`
	// Total sums every group that matched, returned or not.
	Total UsageCounts `json:"total"`
	// Tools are the tools called, by name, over everything that matched.
	Tools []ToolUsage `json:"tools"`
}

// Rates fills the derived fields (Runs, RunFailureRate, MeanRunDurationMs) from the counts.
func (c *UsageCounts) Rates() {
	c.Runs = c.RunsCompleted + c.RunsFailed + c.RunsStopped
	if c.Runs < 0 { // saturated counts
		c.Runs = c.RunsCompleted
	}
	c.RunFailureRate, c.MeanRunDurationMs = 0, 0
	if c.Runs > 0 {
		c.RunFailureRate = float64(c.RunsFailed) / float64(c.Runs)
		c.MeanRunDurationMs = float64(c.RunDurationMs) / float64(c.Runs)
	}
}
