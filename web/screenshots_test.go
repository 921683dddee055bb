package web_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// demoSession appends a session that uses all 17 event kinds, as a runtime would.
func demoSession(t testing.TB, s *site, id string) {
	t.Helper()
	s.create(t, id)
	s.appendEvents(t, id,
		msg(id, "m1", "user", "The `TestWait` test is **flaky**: fix it without sleeping."),
		runStatus(id, "r1", "m1", "running"),
		ev(id, "reasoning", "r1", "", `{"reasoningId":"rs-1","text":"The test sleeps for a second instead of waiting for the server to be ready.","status":"completed"}`),
		ev(id, "plan", "r1", "", `{"planId":"p-1","title":"Fix the flaky test","status":"running","steps":[{"id":"s1","title":"Reproduce it","status":"completed"},{"id":"s2","title":"Wait instead of sleeping","status":"running"},{"id":"s3","title":"Run it 100 times","status":"pending"}]}`),
		ev(id, "task", "r1", "", `{"taskId":"t-1","title":"Run the test 100 times","status":"running","detail":"37 of 100"}`),
		ev(id, "tool", "r1", "", `{"toolCallId":"tc-1","toolName":"shell","status":"completed","input":{"command":"go test -run TestWait -count=100 ./server/"},"output":{"exitCode":0},"startedAt":"2026-03-01T12:00:05Z","completedAt":"2026-03-01T12:00:09Z"}`),
		ev(id, "terminal", "r1", "", `{"terminalId":"term-1","stream":"stdout","chunk":"\u001b[32mok\u001b[0m  \tgithub.com/sessiond/sessiond/server\t0.412s\n\u001b[31mFAIL\u001b[0m\tTestWait (once in 37 runs)\n","exitCode":0}`),
		ev(id, "diff", "r1", "", `{"path":"server/wait_test.go","status":"modified","patch":"@@ -10,3 +10,3 @@ func TestWait(t *testing.T) {\n \tstart(t)\n-\ttime.Sleep(time.Second)\n+\twaitFor(t, ready)\n \tcheck(t)\n"}`),
		ev(id, "workspace-file", "r1", "", `{"path":"server/wait_test.go","operation":"upsert","mimeType":"text/x-go","size":1830}`),
		ev(id, "test-result", "r1", "", `{"testId":"TestWait","name":"TestWait","status":"passed","durationMs":412}`),
		ev(id, "test-result", "r1", "", `{"testId":"TestStream","name":"TestStream","status":"failed","durationMs":1210,"output":"stream_test.go:88: got 3 events, want 4"}`),
		ev(id, "usage", "r1", "", `{"inputTokens":1200,"outputTokens":340,"totalTokens":1540,"contextTokens":1540,"contextWindow":200000}`),
		ev(id, "artifact", "r1", "", `{"artifactId":"a-1","name":"coverage.html","kind":"file","status":"ready","mimeType":"text/html","url":"https://example.com/coverage.html","size":48213}`),
		ev(id, "error", "r1", "", `{"code":"TOOL_TIMEOUT","message":"go vet did not finish within 10 minutes","retryable":true}`),
		ev(id, "resume", "r1", "", `{"resumable":true,"state":{"checkpoint":"step-2"}}`),
		ev(id, "steer", "r1", "", `{"commandId":"c-3","targetRunId":"r1","text":"Keep the public API unchanged","status":"applied"}`),
		ev(id, "message", "r1", "", `{"messageId":"m2","role":"assistant","operation":"append","parts":[{"type":"text","text":"I replaced the sleep with `+"`waitFor`"+`:\n\n- the test waits for the server\n- it passed 100 times"}],"status":"completed"}`),
		ev(id, "summary", "r1", "", `{"summaryId":"sum-1","runId":"r1","text":"Replaced a sleep with a wait; the test passed 100 times.","highlights":["no more sleeps in server tests"],"pendingItems":["TestStream still fails"],"status":"completed"}`),
		ev(id, "approval", "r1", "", `{"approvalId":"ap-1","status":"requested","title":"Delete the build directory?","requestedAction":{"command":"rm -rf build"}}`),
		runStatus(id, "r1", "m1", "waiting_approval"),
	)
}

// TestBrowserAllKinds: a session with all 17 event kinds renders each for people: markdown
// messages, reasoning collapsed, the plan as a checklist, tasks, the tool with its input,
// approval controls, the diff coloured by line, the terminal's ANSI colours, the test table,
// usage, the error's code, the artifact's link, summary and steer. With
// SESSIOND_WRITE_SCREENSHOTS=1 it saves docs/img/web-sessions.png, web-session.png and
// web-session-dark.png (the README shows them).
func TestBrowserAllKinds(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	demoSession(t, s, "S-demo")
	s.create(t, "S-parser")
	s.appendEvents(t, "S-parser", msg("S-parser", "m1", "user", "Port the parser"), runStatus("S-parser", "r1", "m1", "running"))
	s.create(t, "S-docs")
	run(t, ctx, "list", chromedp.EmulateViewport(1280, 520), chromedp.Navigate(s.ts.URL+"/"), waitJS(`document.querySelectorAll('table.sessions tbody tr').length === 3`))
	shot(t, ctx, "web-sessions.png")
	openSession(t, ctx, s, "S-demo")
	for _, check := range []struct{ what, expr string }{
		{"markdown message", `document.querySelector('[data-message-id="m1"] .md code')?.textContent === 'TestWait'`},
		{"list in a message", `document.querySelectorAll('[data-message-id="m2"] .md li').length === 2`},
		{"reasoning collapsed", `document.querySelector('details.reasoning') && !document.querySelector('details.reasoning').open`},
		{"plan checklist, in the transcript and the side column", `document.querySelectorAll('.transcript .checklist li').length === 3 && document.querySelectorAll('.side-col .checklist li').length === 3`},
		{"task", `document.querySelector('.transcript .k-task')?.textContent.includes('37 of 100') && document.querySelector('[aria-label="Tasks"]')?.textContent.includes('37 of 100')`},
		{"tool input, on opening it", `(document.querySelector('[data-tool="tc-1"] summary').click(), document.querySelector('[data-tool="tc-1"]').textContent.includes('go test -run TestWait'))`},
		{"approval controls where it was asked", `document.querySelectorAll('.transcript [data-approval="ap-1"] button').length === 2`},
		{"diff colours", `document.querySelectorAll('.patch .add').length === 1 && document.querySelectorAll('.patch .del').length === 1`},
		{"terminal colours", `!!document.querySelector('.ansi .ansi-green-fg') && !!document.querySelector('.ansi .ansi-red-fg')`},
		{"tests", `document.querySelectorAll('.transcript .test-line').length === 2`},
		{"usage", `document.querySelector('table.usage')?.textContent.includes('1540') && document.querySelector('.transcript .k-usage')?.textContent.includes('1,540')`},
		{"error code", `document.querySelector('.error-item code')?.textContent === 'TOOL_TIMEOUT'`},
		{"artifact link", `document.querySelector('.transcript .k-artifact a')?.href === 'https://example.com/coverage.html'`},
		{"summary", `document.querySelector('.summary')?.textContent.includes('TestStream still fails')`},
		{"steer", `document.querySelector('.transcript .k-steer')?.textContent.includes('Keep the public API unchanged')`},
		{"run status", `document.querySelector('main').dataset.runStatus === 'waiting_approval'`},
		{"all 20 events in the log, workspace-file among them", `document.querySelectorAll('.events li').length === 20 && document.querySelector('.events')?.textContent.includes('server/wait_test.go upsert')`},
	} {
		run(t, ctx, check.what, waitJS(check.expr))
	}
	// The page opens at the newest entry; the screenshots show the session from its start.
	run(t, ctx, "viewport", chromedp.EmulateViewport(1280, 1400))
	eval[any](t, ctx, `window.scrollTo(0, 0)`)
	shot(t, ctx, "web-session.png")
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
		t.Fatal(err)
	}
	if bg := eval[string](t, ctx, `getComputedStyle(document.body).backgroundColor`); bg != "rgb(15, 19, 24)" {
		t.Errorf("dark scheme: background %s", bg)
	}
	shot(t, ctx, "web-session-dark.png")
}

// shot saves a screenshot of the viewport to docs/img when SESSIOND_WRITE_SCREENSHOTS=1.
func shot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("SESSIOND_WRITE_SCREENSHOTS") != "1" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "docs", "img", name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("wrote %s (%d bytes)\n", path, len(png))
}

// TestBrowserFoldMatchesServer: the page's fold (web/static/fold.js, used for live events
// and time travel) gives the server's transcript (GET /v1/sessions/{id}/transcript) for the
// session with all 17 kinds, folded from the log both ways: from empty, and from the server's
// transcript at a midpoint plus the rest of the log.
func TestBrowserFoldMatchesServer(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	demoSession(t, s, "S-demo")
	s.appendEvents(t, "S-demo", msg("S-demo", "m2", "assistant", " More."), ev("S-demo", "tool", "r1", "", `{"toolCallId":"tc-1","toolName":"shell","status":"failed","error":"killed"}`),
		ev("S-demo", "terminal", "r1", "", `{"terminalId":"term-1","stream":"stderr","chunk":"more\n","exitCode":1}`))
	run(t, ctx, "page", chromedp.Navigate(s.ts.URL+"/"))
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => {
		const { Fold, emptyTranscript } = await import('/ui/fold.js');
		const get = async (p) => (await fetch(p)).json();
		const server = await get('/v1/sessions/S-demo/transcript');
		const { events } = await get('/v1/sessions/S-demo/events?limit=1000');
		// Canonical JSON: keys sorted at every level.
		const canon = (v) => Array.isArray(v) ? '[' + v.map(canon).join(',') + ']'
			: v && typeof v === 'object' ? '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + canon(v[k])).join(',') + '}'
			: JSON.stringify(v);
		const norm = (t) => {
			const f = new Fold(t); // lists as arrays, as the page keeps them
			const o = { ...f.t };
			delete o.version;
			return canon(o);
		};
		const fromEmpty = new Fold(emptyTranscript('S-demo'));
		events.forEach((e) => fromEmpty.apply(e));
		const mid = new Fold(emptyTranscript('S-demo'));
		events.slice(0, 10).forEach((e) => mid.apply(e));
		const resumed = new Fold(JSON.parse(JSON.stringify(mid.t)));
		events.forEach((e) => resumed.apply(e)); // the first 10 again are ignored: no duplicates
		const want = norm(server);
		if (!want.includes('"exitCode":1,"output"') || !want.includes('"error":"killed"')) return 'the comparison does not see nested fields: ' + want;
		const a = norm(fromEmpty.t), b = norm(resumed.t);
		return a === want && b === want ? 'ok' : 'server ' + want + '\n\nfrom empty ' + a + '\n\nresumed ' + b;
	})()`, chromedp.EvalAwaitPromise))
	if err != nil || got != "ok" {
		t.Fatalf("%v\n%s", err, got)
	}
}
