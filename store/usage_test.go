package store_test

import (
	"math"
	"testing"
	"time"

	"github.com/sessiond/sessiond/store"
)

// TestUsageDayOf: the UTC day of every form of contract timestamp, checked against the
// standard library over a range of instants, zones and forms, and the years 0000 and 9999.
func TestUsageDayOf(t *testing.T) {
	zones := []*time.Location{time.UTC, time.FixedZone("", 14*3600), time.FixedZone("", -12*3600), time.FixedZone("", 5*3600+1800), time.FixedZone("", -(3*3600 + 30*60))}
	layouts := []string{"2006-01-02T15:04Z07:00", "2006-01-02T15:04:05Z07:00", "2006-01-02T15:04:05.000000000Z07:00"}
	for at := time.Date(1999, 12, 30, 0, 0, 0, 0, time.UTC); at.Before(time.Date(2000, 3, 3, 0, 0, 0, 0, time.UTC)); at = at.Add(97 * time.Minute) {
		want := int64(math.Floor(float64(at.Unix()) / 86400))
		for _, z := range zones {
			for _, l := range layouts {
				s := at.In(z).Format(l)
				got, err := store.UsageDayOf(s)
				if err != nil || got != want {
					t.Fatalf("UsageDayOf(%q) = %d, %v; want %d", s, got, err, want)
				}
			}
		}
	}
	for s, want := range map[string]int64{"0000-01-01T00:30+01:00": store.DaysFromCivil(0, 1, 1) - 1, "9999-12-31T23:59:59.999Z": store.DaysFromCivil(9999, 12, 31), "2024-02-29T23:00-02:00": store.DaysFromCivil(2024, 3, 1)} {
		if got, err := store.UsageDayOf(s); err != nil || got != want {
			t.Errorf("UsageDayOf(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, bad := range []string{"", "2026-03-01", "2026-03-01T12:00", "2026-03-01 12:00Z", "x026-03-01T12:00Z"} {
		if _, err := store.UsageDayOf(bad); err == nil {
			t.Errorf("UsageDayOf(%q): no error", bad)
		}
	}
	for _, s := range []string{"2026-02-30", "2026-13-01", "2026-1-01", "20260101", "2026-02-29"} {
		if _, ok := store.ParseUsageDay(s); ok {
			t.Errorf("ParseUsageDay(%q) accepted", s)
		}
	}
	if d, ok := store.ParseUsageDay("2024-02-29"); !ok || store.CivilFromDays(d) != "2024-02-29" {
		t.Errorf("ParseUsageDay(2024-02-29) = %d, %v", d, ok)
	}
}

// TestUsageRollup: what each kind of event adds, by hand.
func TestUsageRollup(t *testing.T) {
	ev := func(typ, run, data string) *store.StoredEvent {
		return &store.StoredEvent{EventType: typ, RunID: run, Data: []byte(data)}
	}
	var r store.UsageRollup
	for _, e := range []*store.StoredEvent{
		ev("usage", "r1", `{"occurredAt":"2026-03-01T23:30:00-01:00","payload":{"inputTokens":100,"outputTokens":1e1,"totalTokens":110}}`),
		ev("usage", "", `{"occurredAt":"2026-03-01T10:00Z","payload":{"inputTokens":9007199254740991,"outputTokens":9007199254740991}}`),
		ev("usage", "", `{"occurredAt":"2026-03-01T10:00Z","payload":{}}`),
		ev("status", "r1", `{"occurredAt":"2026-03-01T10:00Z","payload":{"status":"running"}}`),
		ev("status", "r1", `{"occurredAt":"2026-03-01T10:00Z","payload":{"status":"completed","durationMs":2500.0}}`),
		ev("status", "r2", `{"occurredAt":"2026-03-01T10:00Z","payload":{"status":"failed","durationMs":500}}`),
		ev("status", "r3", `{"occurredAt":"2026-03-01T10:00Z","payload":{"status":"stopped","durationMs":1}}`),
		ev("status", "", `{"occurredAt":"2026-03-01T10:00Z","payload":{"status":"completed"}}`),
		ev("tool", "r1", `{"occurredAt":"2026-03-01T10:00Z","payload":{"toolName":"bash","status":"running"}}`),
		ev("tool", "r1", `{"occurredAt":"2026-03-01T10:00Z","payload":{"toolName":"bash","status":"completed"}}`),
		ev("tool", "r1", `{"occurredAt":"2026-03-01T10:00Z","payload":{"toolName":"bash","status":"failed"}}`),
		ev("tool", "r1", `{"occurredAt":"2026-03-01T10:00Z","payload":{"toolName":"a\u0000b","status":"denied"}}`),
		ev("message", "r1", `not even JSON: never read`),
	} {
		if err := r.Add(e); err != nil {
			t.Fatalf("Add: %v", err)
		}
	}
	d0 := store.DaysFromCivil(2026, 3, 1)
	days := r.Days()
	want := []store.UsageDay{
		{Day: d0, UsageTotals: store.UsageTotals{UsageEvents: 2, InputTokens: 9007199254740991, OutputTokens: 9007199254740991, RunsCompleted: 1, RunsFailed: 1, RunsStopped: 1, RunDurationMs: 3001, ToolCalls: 3, ToolFailures: 1, ToolDenied: 1}},
		{Day: d0 + 1, UsageTotals: store.UsageTotals{UsageEvents: 1, InputTokens: 100, OutputTokens: 10, TotalTokens: 110}},
	}
	if ok, why := store.UsageRowsEqual(days, r.Tools(), want, []store.ToolDay{
		{Day: d0, Tool: "a\uFFFDb", ToolTotals: store.ToolTotals{Calls: 1, Denied: 1}},
		{Day: d0, Tool: "bash", ToolTotals: store.ToolTotals{Calls: 2, Failures: 1}},
	}); !ok {
		t.Error(why)
	}
	if got := store.SatAdd(math.MaxInt64-1, 5); got != math.MaxInt64 {
		t.Errorf("SatAdd saturates at %d", got)
	}
}
