package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// usageQuery are the query parameters of GET /v1/usage.
var usageQuery = []string{"from", "to", "by", "project", "agent", "model", "sessionId", "limit"}

// maxUsageDays is the longest range of days one usage query may ask for.
const maxUsageDays = 366

// usageRoutes are the usage analytics' routes.
func (s *Server) usageRoutes() []route {
	return []route{
		{pattern: "GET /v1/usage", access: readRoute, handle: s.handleUsage, query: usageQuery},
	}
}

// handleUsage answers GET /v1/usage: the usage rollup of a range of days (default the 30 days
// ending today, UTC), grouped by the dimensions of by, filtered by project, agent, model and
// session. A credential of one project counts only its project's sessions; a stream token
// only its session.
func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request) {
	q, aerr := s.usageQueryOf(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	rep, err := s.svc.Usage(r.Context(), q)
	if err != nil {
		writeError(w, storeError(err, ""))
		return
	}
	writeJSON(w, http.StatusOK, usageResponse(q, rep))
}

// usageQueryOf reads and checks the query of GET /v1/usage; each refusal names the parameter
// and the rule.
func (s *Server) usageQueryOf(r *http.Request) (store.UsageQuery, *api.Error) {
	v := r.URL.Query()
	today, _ := store.UsageDayOf(contract.FormatTime(s.svc.Now()))
	q := store.UsageQuery{To: today}
	if t := v.Get("to"); t != "" {
		d, ok := store.ParseUsageDay(t)
		if !ok {
			return q, api.Errorf(api.CodeMalformed, "query parameter to=%s must be a date YYYY-MM-DD (the last UTC day counted, inclusive)", quote(t))
		}
		q.To = d
	}
	q.From = q.To - 29
	if f := v.Get("from"); f != "" {
		d, ok := store.ParseUsageDay(f)
		if !ok {
			return q, api.Errorf(api.CodeMalformed, "query parameter from=%s must be a date YYYY-MM-DD (the first UTC day counted)", quote(f))
		}
		q.From = d
	}
	if q.From > q.To {
		return q, api.Errorf(api.CodeMalformed, "query parameter from=%s is after to=%s; give from on or before to", store.CivilFromDays(q.From), store.CivilFromDays(q.To))
	}
	if n := q.To - q.From + 1; n > maxUsageDays {
		return q, api.Errorf(api.CodeMalformed, "from=%s to=%s spans %d days; ask for at most %d days at a time", store.CivilFromDays(q.From), store.CivilFromDays(q.To), n, maxUsageDays)
	}
	if b, ok := v["by"]; ok {
		if b[0] == "" {
			return q, api.Errorf(api.CodeMalformed, "query parameter by is empty; give a comma-separated list of %s, or leave it out for one total", strings.Join(store.UsageDimensions, ", "))
		}
		for _, d := range strings.Split(b[0], ",") {
			if !slices.Contains(store.UsageDimensions, d) {
				return q, api.Errorf(api.CodeMalformed, "query parameter by=%s: %s is not a dimension; use a comma-separated list of %s", quote(b[0]), quote(d), strings.Join(store.UsageDimensions, ", "))
			}
			if slices.Contains(q.By, d) {
				return q, api.Errorf(api.CodeMalformed, "query parameter by=%s names %s twice; name each dimension once", quote(b[0]), d)
			}
			q.By = append(q.By, d)
		}
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"project", &q.Project}, {"agent", &q.AgentID}, {"model", &q.Model}, {"sessionId", &q.SessionID}} {
		val, ok := v[f.name]
		if !ok {
			continue
		}
		if val[0] == "" {
			return q, api.Errorf(api.CodeMalformed, "query parameter %s is empty; give a value or leave it out", f.name)
		}
		*f.dst = val[0]
	}
	if q.SessionID != "" {
		if p := contract.IDProblem(q.SessionID); p != "" {
			return q, api.Errorf(api.CodeMalformed, "query parameter sessionId=%s: %s", quote(q.SessionID), p)
		}
	}
	limit, aerr := queryInt(r, "limit", store.DefaultUsageGroups, 1, store.MaxUsageGroups)
	if aerr != nil {
		return q, aerr
	}
	q.Limit = int(limit)
	if q.Project, aerr = projectFilter(r, q.Project); aerr != nil {
		return q, aerr
	}
	if p := principalOf(r.Context()); p.Session != "" && q.SessionID == "" {
		q.SessionID = p.Session // a credential of one session counts that session only
	}
	q, err := store.NormalizeUsageQuery(q)
	if err != nil {
		return q, api.Errorf(api.CodeMalformed, "%v", err)
	}
	return q, nil
}

// usageResponse is the API's form of a usage report.
func usageResponse(q store.UsageQuery, rep store.UsageReport) api.UsageResponse {
	out := api.UsageResponse{From: store.CivilFromDays(q.From), To: store.CivilFromDays(q.To), By: q.By,
		Groups: make([]api.UsageGroup, 0, len(rep.Groups)), Truncated: rep.Truncated, Total: usageCounts(rep.Total),
		Tools: make([]api.ToolUsage, 0, len(rep.Tools))}
	if out.By == nil {
		out.By = []string{}
	}
	for _, g := range rep.Groups {
		ag := api.UsageGroup{UsageCounts: usageCounts(g.UsageTotals)}
		for _, d := range q.By {
			switch d {
			case store.UsageByProject:
				ag.Project = &g.Project
			case store.UsageByAgent:
				ag.Agent = &g.AgentID
			case store.UsageByModel:
				ag.Model = &g.Model
			case store.UsageBySession:
				ag.SessionID = &g.SessionID
			case store.UsageByDay:
				day := store.CivilFromDays(g.Day)
				ag.Day = &day
			}
		}
		out.Groups = append(out.Groups, ag)
	}
	for _, t := range rep.Tools {
		u := api.ToolUsage{Tool: t.Tool, Calls: t.Calls, Failures: t.Failures, Denied: t.Denied}
		if t.Calls > 0 {
			u.FailureRate = float64(t.Failures) / float64(t.Calls)
		}
		out.Tools = append(out.Tools, u)
	}
	return out
}

// usageCounts is the API's form of a group's totals, with its rates.
func usageCounts(t store.UsageTotals) api.UsageCounts {
	c := api.UsageCounts{UsageEvents: t.UsageEvents, InputTokens: t.InputTokens, OutputTokens: t.OutputTokens, TotalTokens: t.TotalTokens,
		RunsCompleted: t.RunsCompleted, RunsFailed: t.RunsFailed, RunsStopped: t.RunsStopped, RunDurationMs: t.RunDurationMs,
		ToolCalls: t.ToolCalls, ToolFailures: t.ToolFailures, ToolDenied: t.ToolDenied}
	c.Rates()
	return c
}
