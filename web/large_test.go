package web_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// largeSession appends 2+n events (n a multiple of 100) to a new session, in batches of 1000,
// shaped like a long agent session: per 100 events, 2 messages streamed in 20 appends each,
// 10 tool calls in 2 states each, 20 terminal chunks, 10 reasoning chunks, 5 usage events and
// 5 test results.
func largeSession(tb testing.TB, s *site, id string, n int) {
	tb.Helper()
	s.create(tb, id)
	s.appendEvents(tb, id, msg(id, "m-start", "user", "Port the parser"), runStatus(id, "r1", "m-start", "running"))
	batch := make([]string, 0, 1000)
	flush := func() {
		if len(batch) > 0 {
			s.appendEvents(tb, id, batch...)
			batch = batch[:0]
		}
	}
	for g := 0; g < n/100; g++ {
		add := func(e string) {
			batch = append(batch, e)
			if len(batch) == 1000 {
				flush()
			}
		}
		for m := range 2 {
			for k := range 20 {
				add(ev(id, "message", "r1", "", fmt.Sprintf(`{"messageId":"m-%d-%d","role":"assistant","operation":"append","parts":[{"type":"text","text":"chunk %d of a **streamed** reply, with some words in it. "}]}`, g, m, k)))
			}
		}
		for k := range 10 {
			add(ev(id, "tool", "r1", "", fmt.Sprintf(`{"toolCallId":"tc-%d-%d","toolName":"shell","status":"running","input":{"command":"go test ./parser/ -run Test%d"}}`, g, k, k)))
			add(ev(id, "tool", "r1", "", fmt.Sprintf(`{"toolCallId":"tc-%d-%d","toolName":"shell","status":"completed","output":{"exitCode":0}}`, g, k)))
		}
		for k := range 20 {
			add(ev(id, "terminal", "r1", "", fmt.Sprintf(`{"terminalId":"term-%d","stream":"stdout","chunk":"\u001b[32mok\u001b[0m  parser  0.%03ds line %d\n"}`, g%100, k, k)))
		}
		for k := range 10 {
			add(ev(id, "reasoning", "r1", "", fmt.Sprintf(`{"reasoningId":"rs-%d","text":"thinking about step %d. ","status":"streaming"}`, g, k)))
		}
		for range 5 {
			add(ev(id, "usage", "r1", "", `{"inputTokens":100,"outputTokens":20,"totalTokens":120}`))
		}
		for k := range 5 {
			add(ev(id, "test-result", "r1", "", fmt.Sprintf(`{"testId":"T%d-%d","name":"TestParse%d_%d","status":"passed","durationMs":12}`, g, k, g, k)))
		}
	}
	flush()
}

// BenchmarkBrowserOpenLargeSession measures how long a session of 100,000 events takes to
// open in the browser and become interactive: from navigation to the page showing its last
// message, with the live stream connected and the controls enabled (ms-to-interactive; the
// page's performance marks give when the transcript had loaded and when it was drawn), and the
// JS heap then. The page reads the transcript projection, the runs and the last 1,000 events,
// not the log, and draws the transcript of those events (the earlier ones on request), with
// collapsed items' bodies drawn on opening. The first iteration also pays for the server's
// first fold of the session's projection. Run it with
//
//	go test ./web -run '^$' -bench BrowserOpenLargeSession -benchtime 5x
//
// The target (issue #15) is at most 2 s on a 2-core machine.
func BenchmarkBrowserOpenLargeSession(b *testing.B) {
	s := newSite(b)
	ctx := browser(b)
	const n = 100_000
	start := time.Now()
	largeSession(b, s, "S-large", n)
	b.Logf("appended %d events in %v", n+2, time.Since(start).Round(time.Millisecond))
	ready := `document.querySelector('.conn[data-state="live"]') && document.querySelector('main').dataset.lastSequence === '` + fmt.Sprint(n+1) +
		`' && !!document.querySelector('[data-message-id="m-` + fmt.Sprint(n/100-1) + `-1"]') && !document.querySelector('.controls button.danger').disabled`
	var open, loaded, drawn, heap []float64
	for b.Loop() {
		run(b, ctx, "blank", chromedp.Navigate("about:blank"))
		t0 := time.Now()
		run(b, ctx, "open", chromedp.Navigate(s.ts.URL+"/#/s/S-large"), waitJS(ready))
		open = append(open, float64(time.Since(t0).Milliseconds()))
		marks := eval[map[string]float64](b, ctx, `Object.fromEntries(performance.getEntriesByType('mark').map((m) => [m.name, m.startTime]))`)
		loaded = append(loaded, marks["sessiond:transcript-loaded"])
		drawn = append(drawn, marks["sessiond:session-drawn"])
		heap = append(heap, eval[float64](b, ctx, `performance.memory.usedJSHeapSize / 1e6`))
	}
	b.Logf("ms to interactive, per iteration: %v", open)
	b.ReportMetric(median(open), "median-ms-to-interactive")
	b.ReportMetric(median(loaded), "median-ms-transcript-loaded")
	b.ReportMetric(median(drawn), "median-ms-drawn")
	b.ReportMetric(median(heap), "median-MB-JS-heap")
}

// median of xs (sorted in place).
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}
