package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"
)

// itemIDs names, for each event type whose events are about one item, the payload field that
// is the item's id; the other types are one transcript entry per event.
var itemIDs = map[string]string{
	"message": "messageId", "reasoning": "reasoningId", "task": "taskId", "tool": "toolCallId", "approval": "approvalId",
	"artifact": "artifactId", "diff": "path", "workspace-file": "path", "terminal": "terminalId", "test-result": "testId",
	"steer": "commandId", "summary": "summaryId",
}

// storyOrder is the transcript a log tells, by the rule: each item where its first
// event stands, each other event where it stands. It answers the kinds in that order.
func storyOrder(events []map[string]any) []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range events {
		typ := e["eventType"].(string)
		if field, ok := itemIDs[typ]; ok {
			key := typ + " " + fmt.Sprint(e["payload"].(map[string]any)[field])
			if seen[key] {
				continue
			}
			seen[key] = true
		}
		out = append(out, typ)
	}
	return out
}

// TestBrowserTranscriptInLogOrder: the session page tells the session as it happened: one
// transcript whose entries (every kind of the 17) stand in the log's order, grouped by run,
// with the user's message that started the run in the run's section.
func TestBrowserTranscriptInLogOrder(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-story"
	demoSession(t, s, id)
	// A second run: its message, a tool call before the answer, a failing test, the answer.
	s.appendEvents(t, id, ev(id, "approval", "r1", "", `{"approvalId":"ap-1","status":"approved","title":"Delete the build directory?"}`), runStatus(id, "r1", "m1", "running"),
		runStatus(id, "r1", "m1", "completed"), msg(id, "m3", "user", "Now the stream test"),
		runStatus(id, "r2", "m3", "running"),
		ev(id, "tool", "r2", "", `{"toolCallId":"tc-2","toolName":"shell","status":"running","input":{"command":"go test ./stream"}}`),
		ev(id, "test-result", "r2", "", `{"testId":"TestStream2","name":"TestStream","status":"failed","durationMs":9}`),
		ev(id, "tool", "r2", "", `{"toolCallId":"tc-2","toolName":"shell","status":"completed","output":{"exitCode":1}}`),
		ev(id, "message", "r2", "", `{"messageId":"m4","role":"assistant","operation":"append","parts":[{"type":"text","text":"Still failing."}]}`))
	openSession(t, ctx, s, id)
	want := storyOrder(s.events(t, id))
	run(t, ctx, "transcript", waitJS(fmt.Sprintf(`document.querySelectorAll('.transcript .entry').length === %d`, len(want))))
	got := eval[[]string](t, ctx, `[...document.querySelectorAll('.transcript .entry')].map((e) => e.dataset.kind)`)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("transcript order\n got %v\nwant %v", got, want)
	}
	kinds := map[string]bool{}
	for _, k := range got {
		kinds[k] = true
	}
	if len(kinds) != 17 {
		t.Errorf("the transcript shows %d kinds, want all 17: %v", len(kinds), kinds)
	}
	runs := eval[string](t, ctx, `[...document.querySelectorAll('.transcript section.run')].map((s) =>
		s.querySelector('.run-head').dataset.run + ':' + [...s.querySelectorAll('[data-message-id]')].map((m) => m.dataset.messageId).join('+')).join(' ')`)
	if runs != "r1:m1+m2 r2:m3+m4" {
		t.Errorf("runs and their messages: %q, want r1:m1+m2 r2:m3+m4", runs)
	}
	// The side column only sums up: its pending approval and its failing test link to their
	// place in the transcript.
	run(t, ctx, "jump to the failing test", chromedp.Click(chromedp.CSS(`.side-col button.link.err`)),
		waitJS(`(() => { const r = document.querySelector('.transcript [data-test-status="failed"]').getBoundingClientRect();
			return r.top >= -1 && r.top < innerHeight; })()`))
}

// TestBrowserStreamedDeltasOneParagraph: a reply streamed in deltas that split a word and a
// bold span renders as the one paragraph `sessiond view` shows, markdown intact.
func TestBrowserStreamedDeltasOneParagraph(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-deltas"
	s.create(t, id)
	s.appendEvents(t, id, msg(id, "m1", "user", "Why does it flake?"))
	openSession(t, ctx, s, id)
	for _, d := range []string{"The fl", "aky test is a **ra", "ce**"} {
		s.appendEvents(t, id, msg(id, "m2", "assistant", d))
	}
	run(t, ctx, "the streamed reply", waitJS(`document.querySelector('main').dataset.lastSequence === '3'`))
	got := eval[string](t, ctx, `(() => { const md = document.querySelector('[data-message-id="m2"] .md');
		return md.querySelectorAll('p').length + '|' + md.textContent.trim() + '|' + md.querySelector('strong')?.textContent; })()`)
	if got != "1|The flaky test is a race|race" {
		t.Fatalf("paragraphs|text|bold = %q, want 1|The flaky test is a race|race", got)
	}
}

// hostileCorpus appends content with long unbreakable tokens of every shape to session id.
func hostileCorpus(t *testing.T, s *site, id string) {
	long := strings.Repeat("x", 250)
	url := "https://example.com/" + strings.Repeat("a/b-c_d.e", 80)
	code := "```go\nfunc f() { return " + strings.Repeat("veryLongIdentifier", 40) + " }\n```"
	s.create(t, id)
	s.appendEvents(t, id, msg(id, "m1", "user", "See "+url+" and `"+long+"` and "+long+"\n\n"+code+"\n\n| a | b |\n|---|---|\n| "+long+" | "+long+" |"),
		runStatus(id, "r1", "m1", "running"),
		ev(id, "tool", "r1", "", fmt.Sprintf(`{"toolCallId":"tc-%s","toolName":"%s","status":"failed","error":"%s","input":{"command":"%s"}}`, long, long, long, long)),
		ev(id, "approval", "r1", "", fmt.Sprintf(`{"approvalId":"ap-1","status":"requested","title":"%s","description":"%s","requestedAction":{"command":"%s"}}`, long, url, long)),
		ev(id, "terminal", "r1", "", fmt.Sprintf(`{"terminalId":"%s","stream":"stdout","chunk":"%s\n"}`, long, long)),
		ev(id, "test-result", "r1", "", fmt.Sprintf(`{"testId":"T1","name":"%s","status":"failed","output":"%s"}`, long, long)),
		ev(id, "error", "r1", "", fmt.Sprintf(`{"code":"%s","message":"%s","retryable":true}`, strings.ToUpper(long), url)),
		ev(id, "diff", "r1", "", fmt.Sprintf(`{"path":"%s","status":"modified","patch":"@@ -1 +1 @@\n-%s\n+%s\n"}`, long, long, long)),
		ev(id, "workspace-file", "r1", "", fmt.Sprintf(`{"path":"%s","operation":"upsert"}`, long)),
		ev(id, "artifact", "r1", "", fmt.Sprintf(`{"artifactId":"a1","name":"%s","kind":"file","status":"ready","url":"%s"}`, long, url)),
		ev(id, "steer", "r1", "", fmt.Sprintf(`{"commandId":"c1","targetRunId":"r1","text":"%s","status":"applied"}`, long)),
		ev(id, "summary", "r1", "", fmt.Sprintf(`{"summaryId":"s1","runId":"r1","text":"%s","highlights":["%s"],"pendingItems":[],"status":"completed"}`, long, url)),
		ev(id, "plan", "r1", "", fmt.Sprintf(`{"planId":"p1","title":"%s","status":"running","steps":[{"id":"s1","title":"%s","status":"running"}]}`, long, long)),
		ev(id, "task", "r1", "", fmt.Sprintf(`{"taskId":"t1","title":"%s","status":"running","detail":"%s"}`, long, url)),
		runStatus(id, "r1", "m1", "waiting_approval"))
}

// TestBrowserNoHorizontalOverflow: at 1,280 and 390 px no content makes a page wider than the
// window: long URLs, code lines, test output, approval titles, error codes, paths and names
// wrap or scroll inside their own box, on the session page (with its collapsed items open)
// and the sessions list.
func TestBrowserNoHorizontalOverflow(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-wide-" + strings.Repeat("w", 200)
	hostileCorpus(t, s, id)
	for _, width := range []int64{1280, 390} {
		run(t, ctx, "viewport", chromedp.EmulateViewport(width, 900))
		openSession(t, ctx, s, id)
		run(t, ctx, "open every item", waitJS(`document.querySelectorAll('.transcript .entry').length >= 14`))
		eval[any](t, ctx, `document.querySelectorAll('details').forEach((d) => d.open = true)`)
		run(t, ctx, "opened", waitJS(`!!document.querySelector('[data-tool] pre') && !!document.querySelector('.terminal pre.ansi')`))
		if w := eval[int](t, ctx, `document.scrollingElement.scrollWidth`); w > int(width) {
			wide := eval[string](t, ctx, `[...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > innerWidth + 1
				&& !e.closest('pre, .table-scroll')).slice(0, 5).map((e) => e.tagName + '.' + e.className).join(' ')`)
			t.Errorf("session page at %d px is %d px wide; too wide: %s", width, w, wide)
		}
		run(t, ctx, "list", chromedp.Navigate(s.ts.URL+"/"), waitJS(`document.querySelectorAll('table.sessions tbody tr').length === 1`))
		if w := eval[int](t, ctx, `document.scrollingElement.scrollWidth`); w > int(width) {
			t.Errorf("sessions list at %d px is %d px wide", width, w)
		}
		run(t, ctx, "blank", chromedp.Navigate("about:blank"))
	}
}

// TestBrowserRemoteImagesNotLoaded: a message's images from another origin (markdown, raw
// HTML, reference style) are shown as links to them, and the page requests none of them; an
// image of the page's own origin still shows.
func TestBrowserRemoteImagesNotLoaded(t *testing.T) {
	var hits atomic.Int64
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "image/gif")
		w.Write([]byte("GIF89a"))
	}))
	defer remote.Close()
	s := newSite(t)
	ctx := browser(t)
	id := "S-pixel"
	s.create(t, id)
	s.appendEvents(t, id, msg(id, "m1", "assistant", fmt.Sprintf("Look: ![a pixel](%[1]s/md.gif)\n\n<img src=\"%[1]s/raw.gif\" alt=\"raw\">\n\n![ref][p]\n\n[p]: %[1]s/ref.gif\n\n![local](/favicon.ico)", remote.URL)))
	openSession(t, ctx, s, id)
	run(t, ctx, "message", waitJS(`document.querySelectorAll('[data-message-id="m1"] .remote-img').length === 3`))
	links := eval[[]string](t, ctx, `[...document.querySelectorAll('[data-message-id="m1"] .remote-img')].map((a) => a.href)`)
	for i, want := range []string{"/md.gif", "/raw.gif", "/ref.gif"} {
		if links[i] != remote.URL+want {
			t.Errorf("link %d: %q, want %q", i, links[i], remote.URL+want)
		}
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('[data-message-id="m1"] img').length`); n != 1 {
		t.Errorf("%d images left in the message, want the local one", n)
	}
	run(t, ctx, "settle", chromedp.Navigate("about:blank"))
	if n := hits.Load(); n != 0 {
		t.Fatalf("the remote origin got %d requests", n)
	}
}

// TestBrowserANSIStyles: terminal output's SGR styles all render, by classes and CSSOM (the
// CSP allows no style attribute): bold, italic, underline, the 8 colours and their bright
// backgrounds, the 256 colours and 24-bit colour, foreground and background.
func TestBrowserANSIStyles(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-ansi"
	s.create(t, id)
	segs := []struct{ sgr, text string }{
		{"1", "bold"}, {"3", "italic"}, {"4", "underline"}, {"35", "magenta"}, {"36", "cyan"}, {"37", "white"}, {"30", "black"},
		{"103", "brightbg"}, {"45", "magentabg"}, {"38;5;196", "c256"}, {"48;5;21", "b256"}, {"38;2;1;2;3", "rgb"}, {"48;2;250;128;7", "rgbbg"},
	}
	var chunk strings.Builder
	for _, sg := range segs {
		fmt.Fprintf(&chunk, "\x1b[%sm%s\x1b[0m ", sg.sgr, sg.text)
	}
	b, _ := json.Marshal(chunk.String())
	s.appendEvents(t, id, ev(id, "terminal", "", "", fmt.Sprintf(`{"terminalId":"t1","stream":"stdout","chunk":%s}`, b)))
	openSession(t, ctx, s, id)
	eval[any](t, ctx, `window.__violations = 0; document.addEventListener('securitypolicyviolation', () => window.__violations++)`)
	run(t, ctx, "terminal", waitJS(`!!document.querySelector('.terminal pre.ansi span')`))
	got := eval[map[string]string](t, ctx, `(() => {
		const out = {};
		for (const sp of document.querySelectorAll('.terminal pre.ansi span')) {
			const c = getComputedStyle(sp);
			out[sp.textContent] = [c.fontWeight, c.fontStyle, c.textDecorationLine, c.color, c.backgroundColor].join(';');
		}
		return out;
	})()`)
	base := eval[string](t, ctx, `(() => { const c = getComputedStyle(document.querySelector('.terminal pre.ansi')); return c.color + '|' + c.backgroundColor; })()`)
	fg, bg, _ := strings.Cut(base, "|")
	for _, c := range []struct{ text, field, want string }{
		{"bold", "weight", "700"}, {"italic", "style", "italic"}, {"underline", "decoration", "underline"},
		{"c256", "color", "rgb(255, 0, 0)"}, {"b256", "background", "rgb(0, 0, 255)"},
		{"rgb", "color", "rgb(1, 2, 3)"}, {"rgbbg", "background", "rgb(250, 128, 7)"},
		{"magenta", "color", "!" + fg}, {"cyan", "color", "!" + fg}, {"white", "color", "!"}, {"black", "color", "!" + fg},
		{"brightbg", "background", "!" + bg}, {"magentabg", "background", "!" + bg},
	} {
		v, ok := got[c.text]
		if !ok {
			t.Errorf("%s: no styled span (spans: %v)", c.text, got)
			continue
		}
		f := strings.Split(v, ";")
		val := map[string]string{"weight": f[0], "style": f[1], "decoration": f[2], "color": f[3], "background": f[4]}[c.field]
		if want, not := strings.CutPrefix(c.want, "!"); not {
			if val == want || val == "rgba(0, 0, 0, 0)" || val == "" {
				t.Errorf("%s: %s %q is the default", c.text, c.field, val)
			}
		} else if val != c.want {
			t.Errorf("%s: %s %q, want %q", c.text, c.field, val, c.want)
		}
	}
	// 24-bit colours are set through the CSSOM, which the CSP allows (a style attribute in
	// markup would be a violation, and a console error that fails the test).
	if n := eval[int](t, ctx, `window.__violations`); n != 0 {
		t.Errorf("%d CSP violations", n)
	}
}

// TestBrowserOddSessionID: a URL whose id is not valid percent-encoding (#/s/S-100%) opens
// that id's page (the server answers it is not found) instead of throwing URIError and
// leaving a blank page.
func TestBrowserOddSessionID(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	run(t, ctx, "open", chromedp.Navigate(s.ts.URL+"/#/s/S-100%"), waitJS(`document.querySelector('main .err')?.textContent.includes('NOT_FOUND')`))
}

// TestBrowserTimeTravelHeader: in the past the header shows the sequence and the run's
// status as they were then, not "live" and the current ones.
func TestBrowserTimeTravelHeader(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-then"
	s.create(t, id)
	s.appendEvents(t, id, msg(id, "m1", "user", "Go"), runStatus(id, "r1", "m1", "running"),
		ev(id, "message", "r1", "", `{"messageId":"m2","role":"assistant","operation":"append","parts":[{"type":"text","text":"Done."}]}`),
		runStatus(id, "r1", "m1", "completed"))
	openSession(t, ctx, s, id)
	eval[any](t, ctx, `(() => { const i = document.querySelector('.travel input[type=number]'); i.value = '1'; i.dispatchEvent(new Event('change', { bubbles: true })); })()`)
	run(t, ctx, "sequence 1", waitJS(`document.querySelector('main').dataset.shownSequence === '1' && !document.querySelector('.past').textContent.includes('loading')`))
	head := eval[string](t, ctx, `document.querySelector('.session-head').textContent`)
	for _, want := range []string{"the past: sequence 1", "running", "sequence 1 of 3"} {
		if !strings.Contains(head, want) {
			t.Errorf("header %q lacks %q", head, want)
		}
	}
	if strings.Contains(head, "completed") || eval[int](t, ctx, `document.querySelectorAll('.session-head .conn[data-state]').length`) != 0 {
		t.Errorf("header in the past shows the present: %q", head)
	}
}

// TestBrowserForkOnlyFromRuns: "fork from here" and "edit and rerun" are offered on the message
// that started a run and on the messages of a run, not on a message that started none.
func TestBrowserForkOnlyFromRuns(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-forks"
	s.create(t, id)
	s.appendEvents(t, id, msg(id, "m1", "user", "Go"), runStatus(id, "r1", "m1", "running"),
		ev(id, "message", "r1", "", `{"messageId":"m2","role":"assistant","operation":"append","parts":[{"type":"text","text":"Done."}]}`),
		runStatus(id, "r1", "m1", "completed"), msg(id, "m3", "user", "A note that queued nothing"))
	openSession(t, ctx, s, id)
	got := eval[string](t, ctx, `[...document.querySelectorAll('.msg')].map((m) => m.dataset.messageId + ':' +
		[...m.querySelectorAll('header button')].map((b) => b.textContent).join('+')).join(' ')`)
	if got != "m1:fork from here+edit and rerun m2:fork from here m3:" {
		t.Fatalf("message controls %q", got)
	}
}

// TestBrowserWorkWindow: the lifecycle panel says no work window started, rather than an
// empty one; once warm starts one it shows the time left.
func TestBrowserWorkWindow(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-window"
	s.create(t, id)
	openSession(t, ctx, s, id)
	run(t, ctx, "panel", chromedp.Click(chromedp.CSS(`.lifecycle summary`)), waitJS(`!!document.querySelector('.work-window')`))
	if got := eval[string](t, ctx, `document.querySelector('.work-window').textContent`); !strings.HasPrefix(got, "none started") {
		t.Errorf("work window without one: %q", got)
	}
	if code, body := s.call(t, "POST", "/v1/sessions/"+id+"/warm", `{"hours":3}`); code != http.StatusOK {
		t.Fatalf("warm: %d %s", code, body)
	}
	run(t, ctx, "reopen", chromedp.Reload(), chromedp.Click(chromedp.CSS(`.lifecycle summary`)),
		waitJS(`/\(3\.0 h left\)|\(2\.9 h left\)/.test(document.querySelector('.work-window')?.textContent || '')`))
}

// TestBrowserListFiltersInURL: the sessions list keeps its filters in the URL: a reload shows
// the same filtered list.
func TestBrowserListFiltersInURL(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	s.create(t, "S-a")
	s.create(t, "S-b")
	run(t, ctx, "list", chromedp.Navigate(s.ts.URL+"/"), waitJS(`document.querySelectorAll('table.sessions tbody tr').length === 2`),
		chromedp.SendKeys(chromedp.CSS(`input[type=search]`), "S-b"), waitJS(`document.querySelectorAll('table.sessions tbody tr').length === 1`))
	eval[any](t, ctx, `(() => { const r = document.querySelectorAll('.filters input')[3]; r.value = 'implementer'; r.dispatchEvent(new Event('input', { bubbles: true })); })()`)
	run(t, ctx, "url", waitJS(`location.hash === '#/?role=implementer&q=S-b'`), chromedp.Reload(),
		waitJS(`document.querySelectorAll('table.sessions tbody tr').length === 1 && document.querySelector('input[type=search]').value === 'S-b'`))
	// Times are relative, with the absolute time on hover.
	if got := eval[string](t, ctx, `(() => { const t = document.querySelector('table.sessions time'); return t.textContent + '|' + (t.title === t.getAttribute('datetime')); })()`); got != "just now|true" {
		t.Errorf("last activity %q, want just now|true", got)
	}
}

// TestBrowserLargeSessionWindow: a long session opens at its newest entry; the transcript says
// it shows the last N of M events and loads the earlier ones on request, until the first.
func TestBrowserLargeSessionWindow(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-long"
	largeSession(t, s, id, 2500)
	run(t, ctx, "viewport", chromedp.EmulateViewport(1280, 900))
	openSession(t, ctx, s, id)
	run(t, ctx, "newest in view", waitJS(`(() => { const all = document.querySelectorAll('.transcript .entry'); const r = all[all.length - 1]?.getBoundingClientRect();
		return !!r && r.bottom > 0 && r.top < innerHeight; })()`))
	if got := eval[string](t, ctx, `document.querySelector('.window-note').textContent`); !strings.Contains(got, "the last 1,000 of 2,502 events") {
		t.Errorf("window note %q", got)
	}
	if eval[bool](t, ctx, `!!document.querySelector('[data-message-id="m-start"]')`) {
		t.Fatal("the first message is drawn although it is outside the window")
	}
	for i := 0; i < 3 && !eval[bool](t, ctx, `!!document.querySelector('[data-message-id="m-start"]')`); i++ {
		run(t, ctx, "load earlier", chromedp.Click(chromedp.CSS(`.load-earlier`)), waitJS(`!document.querySelector('.load-earlier')?.disabled`))
	}
	run(t, ctx, "all loaded", waitJS(`!!document.querySelector('[data-message-id="m-start"]') && !document.querySelector('.window-note')`))
	// The first message is the first entry of the first run: the order holds across windows.
	if got := eval[string](t, ctx, `document.querySelector('.transcript .entry').dataset.key`); got != "message m-start" {
		t.Errorf("first entry %q", got)
	}
	seqs := eval[[]int](t, ctx, `[...document.querySelectorAll('.transcript .entry')].map((e) => Number(e.dataset.seq))`)
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("entries out of order at %d: %v", i, seqs[max(0, i-3):i+1])
		}
	}
}
