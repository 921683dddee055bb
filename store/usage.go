package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Usage analytics: every driver keeps a rollup of each session's log per UTC day, written in
// the commit that appends the events (so it is never behind the log), from which GET /v1/usage
// answers in time proportional to the rows of the days asked for, not to the events.
//
// What is counted, by the day of the event's occurredAt in UTC (UsageDayOf):
//   - a "usage" event: one usage event, and its inputTokens, outputTokens and totalTokens as
//     sent (each absent count adds nothing; totals are sums, as the transcript's usage fold);
//   - a run status event (a "status" event with runId) whose status is terminal: one run
//     completed, failed or stopped, and its durationMs;
//   - a "tool" event whose status is terminal (completed, failed, denied): one tool call of
//     its toolName (U+0000 in it stored as U+FFFD), a failure when failed, a denial when
//     denied.
//
// A runtime sends one terminal event per run and per tool call; one that repeats a terminal
// status (the contract allows re-applying a status) is counted once per event. Counts saturate
// at math.MaxInt64 instead of wrapping. The rollup is a pure function of the log (UsageRollup):
// a driver can rebuild it, and fsck compares it with a rebuild. Compaction deletes events but
// keeps their rollup rows: what was used stays counted after the log is archived away.

// UsageTotals are the counts of one session's usage on one day, or of a group of them.
type UsageTotals struct {
	UsageEvents   int64 `json:"usageEvents"`
	InputTokens   int64 `json:"inputTokens"`
	OutputTokens  int64 `json:"outputTokens"`
	TotalTokens   int64 `json:"totalTokens"`
	RunsCompleted int64 `json:"runsCompleted"`
	RunsFailed    int64 `json:"runsFailed"`
	RunsStopped   int64 `json:"runsStopped"`
	// RunDurationMs is the sum of the durationMs of the runs counted.
	RunDurationMs int64 `json:"runDurationMs"`
	ToolCalls     int64 `json:"toolCalls"`
	ToolFailures  int64 `json:"toolFailures"`
	ToolDenied    int64 `json:"toolDenied"`
}

// ToolTotals are one tool's calls.
type ToolTotals struct {
	Calls    int64 `json:"calls"`
	Failures int64 `json:"failures"`
	Denied   int64 `json:"denied"`
}

// UsageDay is one rollup row: a session's totals on one day (days since 1970-01-01, UTC).
type UsageDay struct {
	Day int64
	UsageTotals
}

// ToolDay is one rollup row of a tool: a session's calls of one tool on one day.
type ToolDay struct {
	Day  int64
	Tool string
	ToolTotals
}

// SatAdd returns a+b for counts (both ≥ 0), saturating at math.MaxInt64.
func SatAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Add adds o to t, saturating.
func (t *UsageTotals) Add(o UsageTotals) {
	t.UsageEvents = SatAdd(t.UsageEvents, o.UsageEvents)
	t.InputTokens = SatAdd(t.InputTokens, o.InputTokens)
	t.OutputTokens = SatAdd(t.OutputTokens, o.OutputTokens)
	t.TotalTokens = SatAdd(t.TotalTokens, o.TotalTokens)
	t.RunsCompleted = SatAdd(t.RunsCompleted, o.RunsCompleted)
	t.RunsFailed = SatAdd(t.RunsFailed, o.RunsFailed)
	t.RunsStopped = SatAdd(t.RunsStopped, o.RunsStopped)
	t.RunDurationMs = SatAdd(t.RunDurationMs, o.RunDurationMs)
	t.ToolCalls = SatAdd(t.ToolCalls, o.ToolCalls)
	t.ToolFailures = SatAdd(t.ToolFailures, o.ToolFailures)
	t.ToolDenied = SatAdd(t.ToolDenied, o.ToolDenied)
}

// Add adds o to t, saturating.
func (t *ToolTotals) Add(o ToolTotals) {
	t.Calls = SatAdd(t.Calls, o.Calls)
	t.Failures = SatAdd(t.Failures, o.Failures)
	t.Denied = SatAdd(t.Denied, o.Denied)
}

// UsageRollup accumulates the rollup rows of events (one session's). The zero value is ready.
type UsageRollup struct {
	days  map[int64]*UsageTotals
	tools map[toolKey]*ToolTotals
}

type toolKey struct {
	day  int64
	tool string
}

// usageFields are the members of an event the rollup reads.
type usageFields struct {
	OccurredAt string `json:"occurredAt"`
	RunID      string `json:"runId"`
	Payload    struct {
		InputTokens  json.Number `json:"inputTokens"`
		OutputTokens json.Number `json:"outputTokens"`
		TotalTokens  json.Number `json:"totalTokens"`
		Status       string      `json:"status"`
		DurationMs   json.Number `json:"durationMs"`
		ToolName     string      `json:"toolName"`
	} `json:"payload"`
}

// UsageCounts reports whether an event of this type can change the rollup: usage, status and tool
// events. Drivers decode nothing else.
func UsageCounts(eventType string) bool {
	return eventType == "usage" || eventType == "status" || eventType == "tool"
}

// Add adds one stored event (of a valid log) to the rollup. It returns an error only for an
// event whose JSON it cannot read, which a validated log never holds.
func (r *UsageRollup) Add(e *StoredEvent) error {
	if !UsageCounts(e.EventType) {
		return nil
	}
	if e.EventType == "status" && e.RunID == "" {
		return nil
	}
	var f usageFields
	if err := decodeUsage(e.Data, &f); err != nil {
		return fmt.Errorf("usage rollup: event %d (%s): %w", e.Sequence, e.EventType, err)
	}
	day, err := UsageDayOf(f.OccurredAt)
	if err != nil {
		return fmt.Errorf("usage rollup: event %d: %w", e.Sequence, err)
	}
	var d UsageTotals
	switch e.EventType {
	case "usage":
		d.UsageEvents = 1
		d.InputTokens, d.OutputTokens, d.TotalTokens = count(f.Payload.InputTokens), count(f.Payload.OutputTokens), count(f.Payload.TotalTokens)
	case "status":
		switch f.Payload.Status {
		case "completed":
			d.RunsCompleted = 1
		case "failed":
			d.RunsFailed = 1
		case "stopped":
			d.RunsStopped = 1
		default:
			return nil
		}
		d.RunDurationMs = count(f.Payload.DurationMs)
	case "tool":
		var t ToolTotals
		switch f.Payload.Status {
		case "completed":
			t.Calls = 1
		case "failed":
			t.Calls, t.Failures = 1, 1
		case "denied":
			t.Calls, t.Denied = 1, 1
		default:
			return nil
		}
		d.ToolCalls, d.ToolFailures, d.ToolDenied = t.Calls, t.Failures, t.Denied
		if r.tools == nil {
			r.tools = map[toolKey]*ToolTotals{}
		}
		// PostgreSQL's text cannot hold U+0000: both drivers store it as U+FFFD.
		k := toolKey{day, strings.ReplaceAll(f.Payload.ToolName, "\x00", "\uFFFD")}
		if r.tools[k] == nil {
			r.tools[k] = &ToolTotals{}
		}
		r.tools[k].Add(t)
	}
	if r.days == nil {
		r.days = map[int64]*UsageTotals{}
	}
	if r.days[day] == nil {
		r.days[day] = &UsageTotals{}
	}
	r.days[day].Add(d)
	return nil
}

// Empty reports whether no event added anything.
func (r *UsageRollup) Empty() bool { return len(r.days) == 0 }

// Days returns the day rows, by day.
func (r *UsageRollup) Days() []UsageDay {
	out := make([]UsageDay, 0, len(r.days))
	for d, t := range r.days {
		out = append(out, UsageDay{Day: d, UsageTotals: *t})
	}
	slices.SortFunc(out, func(a, b UsageDay) int { return int(a.Day - b.Day) })
	return out
}

// Tools returns the tool rows, by day and tool.
func (r *UsageRollup) Tools() []ToolDay {
	out := make([]ToolDay, 0, len(r.tools))
	for k, t := range r.tools {
		out = append(out, ToolDay{Day: k.day, Tool: k.tool, ToolTotals: *t})
	}
	slices.SortFunc(out, func(a, b ToolDay) int {
		if a.Day != b.Day {
			return int(a.Day - b.Day)
		}
		return strings.Compare(a.Tool, b.Tool)
	})
	return out
}

// Reset empties the rollup for reuse.
func (r *UsageRollup) Reset() {
	clear(r.days)
	clear(r.tools)
}

// count reads a contract count (a whole JSON number from 0 to 2^53-1, possibly written 1.0 or
// 1e2); absent or unreadable is 0.
func count(n json.Number) int64 {
	if n == "" {
		return 0
	}
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return max(i, 0)
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f < 0 || f > math.MaxInt64 {
		return 0
	}
	return int64(f)
}

// UsageDayOf returns the UTC day (days since 1970-01-01) of a contract timestamp
// (contract.IsTimestamp: date, hours and minutes, optional seconds and fraction, Z or ±hh:mm).
// Only the date, the hour, the minute and the zone decide it, with integer arithmetic valid
// for every year 0000 to 9999: the PostgreSQL driver computes the same in SQL (usage_day).
func UsageDayOf(ts string) (int64, error) {
	bad := fmt.Errorf("occurredAt %q is not a contract timestamp", ts)
	if len(ts) < 17 || ts[4] != '-' || ts[7] != '-' || ts[10] != 'T' || ts[13] != ':' {
		return 0, bad
	}
	num := func(s string) (int64, bool) {
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil && len(s) > 0 && s[0] >= '0' && s[0] <= '9'
	}
	y, ok1 := num(ts[0:4])
	m, ok2 := num(ts[5:7])
	d, ok3 := num(ts[8:10])
	hh, ok4 := num(ts[11:13])
	mi, ok5 := num(ts[14:16])
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return 0, bad
	}
	var off int64
	switch {
	case strings.HasSuffix(ts, "Z"):
	case len(ts) >= 6 && (ts[len(ts)-6] == '+' || ts[len(ts)-6] == '-') && ts[len(ts)-3] == ':':
		oh, ok1 := num(ts[len(ts)-5 : len(ts)-3])
		om, ok2 := num(ts[len(ts)-2:])
		if !ok1 || !ok2 {
			return 0, bad
		}
		off = oh*60 + om
		if ts[len(ts)-6] == '-' {
			off = -off
		}
	default:
		return 0, bad
	}
	return DaysFromCivil(y, m, d) + floorDiv(hh*60+mi-off, 1440), nil
}

// DaysFromCivil returns the days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
// algorithm, integer arithmetic only).
func DaysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// CivilFromDays returns the date of days since 1970-01-01 as YYYY-MM-DD.
func CivilFromDays(z int64) string {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if m > 12 {
		m -= 12
	}
	if m <= 2 {
		y++
	}
	return fmt.Sprintf("%04d-%02d-%02d", y, m, d)
}

// ParseUsageDay reads a date YYYY-MM-DD (a real one) as days since 1970-01-01.
func ParseUsageDay(s string) (int64, bool) {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return 0, false
	}
	for i, c := range []byte(s) {
		if i != 4 && i != 7 && (c < '0' || c > '9') {
			return 0, false
		}
	}
	y, _ := strconv.ParseInt(s[0:4], 10, 64)
	m, _ := strconv.ParseInt(s[5:7], 10, 64)
	d, _ := strconv.ParseInt(s[8:10], 10, 64)
	if m < 1 || m > 12 || d < 1 || d > 31 {
		return 0, false
	}
	days := DaysFromCivil(y, m, d)
	if CivilFromDays(days) != s {
		return 0, false // 2026-02-30 and the like
	}
	return days, true
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// The dimensions a usage query groups by (UsageQuery.By).
const (
	UsageByProject = "project"
	UsageByAgent   = "agent"
	UsageByModel   = "model"
	UsageBySession = "session"
	UsageByDay     = "day"
)

// UsageDimensions are the dimensions a usage query may group by, in the order groups are
// sorted and reported.
var UsageDimensions = []string{UsageByProject, UsageByAgent, UsageByModel, UsageBySession, UsageByDay}

// MaxUsageGroups caps UsageQuery.Limit; DefaultUsageGroups is its default.
const (
	MaxUsageGroups     = 10000
	DefaultUsageGroups = 1000
)

// UsageQuery asks for the rollup of a range of days, grouped and filtered. The project, agent
// and model of a session are its record's project and agent_id and its snapshot's modelId as
// they are now (usage events carry none of them).
type UsageQuery struct {
	// From and To are the first and the last day (days since 1970-01-01, UTC), inclusive.
	From, To int64
	// By are the dimensions to group by (UsageDimensions, each at most once); none gives one
	// group of everything.
	By []string
	// Project, AgentID, Model and SessionID keep only the sessions that match ("" matches all).
	Project, AgentID, Model, SessionID string
	// Limit is the most groups returned (default DefaultUsageGroups, capped at MaxUsageGroups).
	Limit int
}

// Has reports whether q groups by dim.
func (q *UsageQuery) Has(dim string) bool { return slices.Contains(q.By, dim) }

// UsageGroup is one group of a usage answer: the dimensions it is grouped by (the others are
// empty) and its totals.
type UsageGroup struct {
	Project, AgentID, Model, SessionID string
	// Day is set when the query groups by day (days since 1970-01-01).
	Day int64
	UsageTotals
}

// ToolUsage is one tool's calls over the whole query.
type ToolUsage struct {
	Tool string
	ToolTotals
}

// UsageReport is the answer to a UsageQuery.
type UsageReport struct {
	// Groups in the order of the dimensions (UsageDimensions), byte order of each.
	Groups []UsageGroup
	// Truncated is true when more groups matched than Limit.
	Truncated bool
	// Total sums every matching row (not only the groups returned).
	Total UsageTotals
	// Tools are the tools called, by tool name, over every matching row.
	Tools []ToolUsage
}

// UsageStore answers usage queries from the rollup and rebuilds it (usage.go).
type UsageStore interface {
	// Usage answers q from the rollup. Its cost is in proportion to the rollup rows of the
	// days asked for (about one per session and day active, plus one per tool used), never to
	// the events.
	Usage(ctx context.Context, q UsageQuery) (UsageReport, error)
	// RebuildUsage recomputes the rollup of every session whose log is whole (nothing
	// compacted away) from its log, and leaves the rows of compacted sessions as they are. It
	// returns the number of sessions rebuilt. progress, when not nil, is called after each
	// session with the count so far.
	RebuildUsage(ctx context.Context, progress func(done int)) (int, error)
}

// NormalizeUsageQuery checks q's fields that a driver relies on and fills the defaults.
func NormalizeUsageQuery(q UsageQuery) (UsageQuery, error) {
	if q.To < q.From {
		return q, fmt.Errorf("usage query: to (%s) is before from (%s)", CivilFromDays(q.To), CivilFromDays(q.From))
	}
	seen := map[string]bool{}
	for _, b := range q.By {
		if !slices.Contains(UsageDimensions, b) {
			return q, fmt.Errorf("usage query: unknown dimension %q (one of %s)", b, strings.Join(UsageDimensions, ", "))
		}
		if seen[b] {
			return q, fmt.Errorf("usage query: dimension %q given twice", b)
		}
		seen[b] = true
	}
	// Groups come in the order of UsageDimensions whatever the order asked.
	by := make([]string, 0, len(q.By))
	for _, d := range UsageDimensions {
		if seen[d] {
			by = append(by, d)
		}
	}
	q.By = by
	switch {
	case q.Limit <= 0:
		q.Limit = DefaultUsageGroups
	case q.Limit > MaxUsageGroups:
		q.Limit = MaxUsageGroups
	}
	return q, nil
}

// UsageRowsEqual reports whether two sessions' rollups (as Days and Tools return them, sorted)
// are equal, and describes the first difference.
func UsageRowsEqual(gotDays []UsageDay, gotTools []ToolDay, wantDays []UsageDay, wantTools []ToolDay) (bool, string) {
	if !slices.Equal(gotDays, wantDays) {
		return false, fmt.Sprintf("day rows %s, a rebuild from the log gives %s", describeDays(gotDays), describeDays(wantDays))
	}
	if !slices.Equal(gotTools, wantTools) {
		return false, fmt.Sprintf("tool rows %v, a rebuild from the log gives %v", gotTools, wantTools)
	}
	return true, ""
}

func describeDays(ds []UsageDay) string {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, d := range ds {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %+v", CivilFromDays(d.Day), d.UsageTotals)
	}
	b.WriteByte(']')
	return b.String()
}
