package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
)

// usageEvents are a session's events: run r1 (two tool calls, one failed; usage 100+20) that
// completes on 2026-03-01 after 1500 ms, and run r2 that fails on 2026-03-02 (UTC: 23:30 at
// -01:00) after 500 ms, with usage 7+3.
func usageEvents(sid string) string {
	evs := []string{
		`"occurredAt":"2026-03-01T12:00:00Z","eventType":"message","payload":{"messageId":"m1","role":"user","operation":"append","parts":["fix it"]}`,
		`"occurredAt":"2026-03-01T12:00:01Z","eventType":"status","runId":"r1","sourceMessageId":"m1","payload":{"status":"running","startedAt":"2026-03-01T12:00:01Z"}`,
		`"occurredAt":"2026-03-01T12:00:02Z","eventType":"tool","runId":"r1","payload":{"toolCallId":"t1","toolName":"bash","status":"completed"}`,
		`"occurredAt":"2026-03-01T12:00:03Z","eventType":"tool","runId":"r1","payload":{"toolCallId":"t2","toolName":"bash","status":"failed","error":"exit 1"}`,
		`"occurredAt":"2026-03-01T12:00:04Z","eventType":"usage","runId":"r1","payload":{"inputTokens":100,"outputTokens":20,"totalTokens":120}`,
		`"occurredAt":"2026-03-01T12:00:05Z","eventType":"status","runId":"r1","sourceMessageId":"m1","payload":{"status":"completed","completedAt":"2026-03-01T12:00:05Z","durationMs":1500}`,
		`"occurredAt":"2026-03-01T12:01:00Z","eventType":"message","payload":{"messageId":"m2","role":"user","operation":"append","parts":["again"]}`,
		`"occurredAt":"2026-03-01T23:30:00-01:00","eventType":"status","runId":"r2","sourceMessageId":"m2","payload":{"status":"running","startedAt":"2026-03-01T23:30:00-01:00"}`,
		`"occurredAt":"2026-03-01T23:30:01-01:00","eventType":"usage","runId":"r2","payload":{"inputTokens":7,"outputTokens":3}`,
		`"occurredAt":"2026-03-01T23:30:02-01:00","eventType":"status","runId":"r2","sourceMessageId":"m2","payload":{"status":"failed","failedAt":"2026-03-01T23:30:02-01:00","durationMs":500}`,
	}
	var b strings.Builder
	b.WriteString("[")
	for i, e := range evs {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"contract":"AgentSessionEvent","eventId":"ev-%d","sessionId":%q,"sequence":0,"idempotencyKey":"ev-%d",%s}`, i, sid, i, e)
	}
	b.WriteString("]")
	return b.String()
}

// TestUsage: GET /v1/usage over sessions of two projects, on both drivers: the counts by hand,
// the grouping by each dimension, the filters, the refusals (each naming its parameter) and a
// key of one project, which counts its own project only.
func TestUsage(t *testing.T) {
	drivers(t, func(t *testing.T, open func(t *testing.T) store.Store) {
		now := time.Date(2026, 3, 5, 10, 0, 0, 0, time.UTC)
		e := newAuthEnv(t, open(t), server.Options{}, true, session.Options{Clock: session.ClockFunc(func() time.Time { return now })})
		root := bearer(e.key(t, "root", store.AllProjects, "read,append,admin", 0))
		alpha := bearer(e.key(t, "alpha", "alpha", "read", 0))
		for _, s := range []struct{ id, project, model string }{{"S-a1", "alpha", "m-x"}, {"S-a2", "alpha", "m-y"}, {"S-b1", "beta", "m-x"}} {
			body := fmt.Sprintf(`{"session_id":%q,"project":%q,"agent_id":"agent-%s","role":"implementer","snapshot":{"mode":"work","modelId":%q,"capabilities":{}}}`, s.id, s.project, s.project, s.model)
			if r := e.call(t, "POST", "/v1/sessions", root, body); r.status != 201 {
				t.Fatalf("create %s: %d %s", s.id, r.status, r.body)
			}
			if r := e.call(t, "POST", "/v1/sessions/"+s.id+"/events", root, usageEvents(s.id)); r.status != 201 {
				t.Fatalf("append %s: %d %s", s.id, r.status, r.body)
			}
		}
		get := func(key, query string) api.UsageResponse {
			t.Helper()
			r := e.call(t, "GET", "/v1/usage"+query, key, "")
			if r.status != 200 {
				t.Fatalf("GET /v1/usage%s: %d %s", query, r.status, r.body)
			}
			var out api.UsageResponse
			if err := json.Unmarshal([]byte(r.body), &out); err != nil {
				t.Fatal(err)
			}
			return out
		}
		one := api.UsageCounts{UsageEvents: 2, InputTokens: 107, OutputTokens: 23, TotalTokens: 120, RunsCompleted: 1, RunsFailed: 1,
			RunDurationMs: 2000, ToolCalls: 2, ToolFailures: 1}
		one.Rates()
		times := func(c api.UsageCounts, n int64) api.UsageCounts {
			c.UsageEvents, c.InputTokens, c.OutputTokens, c.TotalTokens = c.UsageEvents*n, c.InputTokens*n, c.OutputTokens*n, c.TotalTokens*n
			c.RunsCompleted, c.RunsFailed, c.RunDurationMs, c.ToolCalls, c.ToolFailures = c.RunsCompleted*n, c.RunsFailed*n, c.RunDurationMs*n, c.ToolCalls*n, c.ToolFailures*n
			c.Rates()
			return c
		}
		// The default range is the 30 days ending today: 2026-03-01 and 02 are in it.
		all := get(root, "")
		if all.From != "2026-02-04" || all.To != "2026-03-05" || len(all.Groups) != 1 || all.Total != times(one, 3) || all.Groups[0].UsageCounts != times(one, 3) {
			t.Errorf("default query: %+v; want from 2026-02-04 to 2026-03-05 and one group of %+v", all, times(one, 3))
		}
		if all.Total.RunFailureRate != 0.5 || all.Total.MeanRunDurationMs != 1000 {
			t.Errorf("rates: %+v", all.Total)
		}
		if len(all.Tools) != 1 || all.Tools[0] != (api.ToolUsage{Tool: "bash", Calls: 6, Failures: 3, FailureRate: 0.5}) {
			t.Errorf("tools: %+v", all.Tools)
		}
		byDay := get(root, "?from=2026-03-01&to=2026-03-02&by=day,project")
		if len(byDay.Groups) != 4 || *byDay.Groups[0].Project != "alpha" || *byDay.Groups[0].Day != "2026-03-01" || *byDay.Groups[1].Day != "2026-03-02" ||
			byDay.Groups[0].InputTokens != 200 || byDay.Groups[1].InputTokens != 14 || byDay.Groups[1].RunsFailed != 2 || byDay.Groups[0].Model != nil {
			t.Errorf("by=day,project: %+v", byDay.Groups)
		}
		if strings.Join(byDay.By, ",") != "project,day" {
			t.Errorf("by is reported as %v; want the order of the dimensions, project,day", byDay.By)
		}
		byModel := get(root, "?to=2026-03-02&by=model&project=alpha")
		if len(byModel.Groups) != 2 || *byModel.Groups[0].Model != "m-x" || byModel.Groups[0].UsageCounts != one {
			t.Errorf("by=model&project=alpha: %+v", byModel.Groups)
		}
		if s := get(root, "?by=session&sessionId=S-b1&agent=agent-beta&model=m-x"); len(s.Groups) != 1 || *s.Groups[0].SessionID != "S-b1" {
			t.Errorf("sessionId, agent and model filters: %+v", s.Groups)
		}
		if s := get(root, "?by=session&limit=2"); len(s.Groups) != 2 || !s.Truncated || s.Total != times(one, 3) {
			t.Errorf("limit=2: %+v", s)
		}
		if s := get(root, "?from=2026-03-02&to=2026-03-02"); s.Total.InputTokens != 21 || s.Total.ToolCalls != 0 {
			t.Errorf("one day, 2026-03-02: %+v", s.Total)
		}
		// A key of project alpha counts alpha's sessions only, and another project's session
		// counts as much as a missing one: nothing.
		if s := get(alpha, "?by=project"); len(s.Groups) != 1 || *s.Groups[0].Project != "alpha" || s.Total != times(one, 2) {
			t.Errorf("key of alpha: %+v", s)
		}
		if b, z := get(alpha, "?sessionId=S-b1"), get(alpha, "?sessionId=S-zz"); len(b.Groups) != 0 || b.Total != (api.UsageCounts{}) || fmt.Sprint(b) != fmt.Sprint(z) {
			t.Errorf("key of alpha, beta's session: %+v; a missing one: %+v", b, z)
		}
		if r := e.call(t, "GET", "/v1/usage?project=beta", alpha, ""); r.status != 403 || !strings.Contains(r.body, "project") {
			t.Errorf("key of alpha asking for beta: %d %s", r.status, r.body)
		}
		for q, want := range map[string]string{
			"?form=2026-03-01":                       "unknown query parameter",
			"?from=2026-3-01":                        "from=",
			"?to=2026-02-30":                         "to=",
			"?from=2026-03-02&to=2026-03-01":         "is after to",
			"?from=2025-01-01&to=2026-03-01":         "at most 366 days",
			"?by=tool":                               "not a dimension",
			"?by=day,day":                            "twice",
			"?by=":                                   "by is empty",
			"?model=":                                "model is empty",
			"?limit=0":                               "limit",
			"?limit=10001":                           "limit",
			"?sessionId=" + strings.Repeat("x", 257): "sessionId",
			"?by=day&by=project":                     "given 2 times",
		} {
			r := e.call(t, "GET", "/v1/usage"+q, root, "")
			if r.status != 400 || !strings.Contains(r.body, want) {
				t.Errorf("GET /v1/usage%s: %d %s; want 400 naming %q", q, r.status, r.body, want)
			}
		}
	})
}
