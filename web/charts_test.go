package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"
)

// chartEvents are a session's runs for the charts: three runs (two completed, one failed),
// usage events with and without totalTokens, tool calls of three tools that complete, fail
// and are denied, and a tool call still running (which counts nothing).
func chartEvents(id string) []string {
	tool := func(run, call, name, status string) string {
		return ev(id, "tool", run, "", fmt.Sprintf(`{"toolCallId":%q,"toolName":%q,"status":%q}`, call, name, status))
	}
	usage := func(run string, in, out int, total string) string {
		return ev(id, "usage", run, "", fmt.Sprintf(`{"inputTokens":%d,"outputTokens":%d%s}`, in, out, total))
	}
	return []string{
		msg(id, "m1", "user", "Fix the flaky test"),
		runStatus(id, "r1", "m1", "running"),
		tool("r1", "t1", "bash", "running"), tool("r1", "t1", "bash", "completed"),
		tool("r1", "t2", "bash", "failed"), tool("r1", "t3", "read_file", "completed"),
		usage("r1", 1200, 300, `,"totalTokens":1500`),
		runStatus(id, "r1", "m1", "completed"),
		msg(id, "m2", "user", "Again"),
		runStatus(id, "r2", "m2", "running"),
		tool("r2", "t4", "web_fetch", "denied"), tool("r2", "t5", "bash", "running"),
		usage("r2", 800, 50, ""),
		runStatus(id, "r2", "m2", "failed"),
		msg(id, "m3", "user", "Once more"),
		runStatus(id, "r3", "m3", "running"),
		usage("r3", 10, 5, `,"totalTokens":15`),
		runStatus(id, "r3", "m3", "completed"),
	}
}

// viewNumbers computes from GET /v1/sessions/{id}/view what the charts must show, by the
// rules of docs/api.md's Usage section, written out here independently of the page's code.
func viewNumbers(t *testing.T, s *site, id string) map[string]string {
	t.Helper()
	code, body := s.call(t, "GET", "/v1/sessions/"+id+"/view", "")
	if code != http.StatusOK {
		t.Fatalf("view: %d %s", code, body)
	}
	var v struct {
		Snapshot struct {
			ModelID string `json:"modelId"`
		} `json:"snapshot"`
		Events []struct {
			EventType string         `json:"eventType"`
			RunID     string         `json:"runId"`
			Payload   map[string]any `json:"payload"`
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	n := map[string]float64{}
	for _, e := range v.Events {
		p := e.Payload
		num := func(k string) float64 { f, _ := p[k].(float64); return f }
		switch {
		case e.EventType == "usage":
			n["usageEvents"]++
			n["inputTokens"] += num("inputTokens")
			n["outputTokens"] += num("outputTokens")
			n["totalTokens"] += num("totalTokens")
		case e.EventType == "status" && e.RunID != "" && (p["status"] == "completed" || p["status"] == "failed" || p["status"] == "stopped"):
			n["runs"]++
			n["runDurationMs"] += num("durationMs")
			if p["status"] == "failed" {
				n["runsFailed"]++
			}
		case e.EventType == "tool" && (p["status"] == "completed" || p["status"] == "failed" || p["status"] == "denied"):
			n["toolCalls"]++
			if p["status"] == "failed" {
				n["toolFailures"]++
			}
		}
	}
	out := map[string]string{"model": v.Snapshot.ModelID}
	for _, k := range []string{"usageEvents", "inputTokens", "outputTokens", "totalTokens", "runs", "runsFailed", "runDurationMs", "toolCalls", "toolFailures"} {
		out[k] = strconv.FormatFloat(n[k], 'f', -1, 64)
	}
	return out
}

// TestBrowserSessionCharts: a session page's charts, opened, draw three uPlot charts under the
// page's CSP (no page error), and the numbers they draw equal those computed from GET …/view;
// a usage event appended later is counted after a refresh.
func TestBrowserSessionCharts(t *testing.T) {
	s := newSite(t)
	const id = "S-charts"
	s.create(t, id)
	s.appendEvents(t, id, chartEvents(id)...)
	ctx := browser(t)
	openSession(t, ctx, s, id)
	read := func() map[string]string {
		t.Helper()
		return eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll(".charts .chart-numbers td[data-k]")].map((td) => [td.dataset.k, td.textContent]))`)
	}
	run(t, ctx, "open the charts", chromedp.Click(chromedp.CSS(".charts summary")), waitJS(`document.querySelectorAll(".charts .chart canvas").length >= 3`))
	want := viewNumbers(t, s, id)
	if want["inputTokens"] != "2010" || want["runs"] != "3" || want["toolCalls"] != "4" {
		t.Fatalf("the fixture's numbers moved: %v", want)
	}
	if got := read(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the charts show %v\nGET …/view gives %v", got, want)
	}
	tools := eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll(".charts tr[data-tool]")].map((tr) => [tr.dataset.tool, [...tr.cells].slice(1).map((c) => c.textContent).join(" ")]))`)
	if fmt.Sprint(tools) != fmt.Sprint(map[string]string{"bash": "2 1 0", "read_file": "1 0 0", "web_fetch": "1 0 1"}) {
		t.Errorf("tool calls by tool (calls failed denied): %v", tools)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll(".charts .u-legend, .charts .u-title").length`); n < 3 {
		t.Errorf("%d uPlot titles and legends; want one of each per chart", n)
	}
	s.appendEvents(t, id, ev(id, "usage", "r3", "", `{"inputTokens":5,"outputTokens":1}`))
	run(t, ctx, "refresh the charts", waitJS(`Number(document.querySelector(".session").dataset.lastSequence) >= `+strconv.Itoa(len(chartEvents(id)))),
		chromedp.Click(chromedp.CSS(".charts button.small")), waitJS(`document.querySelector('.charts td[data-k="inputTokens"]')?.textContent === "2015"`))
	if got, want := read(), viewNumbers(t, s, id); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after a refresh the charts show %v\nGET …/view gives %v", got, want)
	}
}

// TestBrowserUsagePage: the usage page (#/usage) shows GET /v1/usage's totals, by project and
// model, and by tool, for the days asked, with its charts drawn.
func TestBrowserUsagePage(t *testing.T) {
	s := newSite(t)
	for _, id := range []string{"S-use1", "S-use2"} {
		s.create(t, id)
		s.appendEvents(t, id, chartEvents(id)...)
	}
	code, body := s.call(t, "GET", "/v1/usage?from=2026-02-20&to=2026-03-10&by=day", "")
	if code != http.StatusOK {
		t.Fatalf("usage: %d %s", code, body)
	}
	var u struct {
		Total map[string]any
		Tools []struct {
			Tool  string
			Calls int
		}
	}
	if err := json.Unmarshal([]byte(body), &u); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	run(t, ctx, "open the usage page", chromedp.Navigate(s.ts.URL+"/#/usage?from=2026-02-20&to=2026-03-10"),
		waitJS(`document.querySelectorAll(".usage .chart canvas").length >= 2`))
	got := eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll(".usage-total td[data-k]")].map((td) => [td.dataset.k, td.textContent]))`)
	for _, k := range []string{"inputTokens", "outputTokens", "runs", "runsFailed", "toolCalls", "toolFailures"} {
		if want := fmt.Sprint(u.Total[k]); got[k] != want {
			t.Errorf("usage page %s = %q; GET /v1/usage says %s", k, got[k], want)
		}
	}
	if got["from"] != "2026-02-20" || got["to"] != "2026-03-10" {
		t.Errorf("usage page range %s to %s", got["from"], got["to"])
	}
	tools := eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll(".usage tr[data-tool]")].map((tr) => [tr.dataset.tool, tr.querySelector('[data-k="calls"]').textContent]))`)
	for _, x := range u.Tools {
		if tools[x.Tool] != strconv.Itoa(x.Calls) {
			t.Errorf("usage page: tool %s %q calls; GET /v1/usage says %d", x.Tool, tools[x.Tool], x.Calls)
		}
	}
	if len(tools) != len(u.Tools) || len(u.Tools) != 3 {
		t.Errorf("usage page tools %v; GET /v1/usage has %d", tools, len(u.Tools))
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('.usage-table tr[data-project="demo"][data-model="model-x"]').length`); n != 1 {
		t.Errorf("%d rows for project demo, model model-x; want 1", n)
	}
}
