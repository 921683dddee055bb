package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sessiond/sessiond/auth"
	"github.com/sessiond/sessiond/internal/testenv"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store/sqlite"
)

// The browser tests drive Debian's chromium (apt-get install chromium; .ci/run installs it)
// through the DevTools protocol. Without chromium they skip, except under CI=true, where they
// fail: CI must run them.

// site is a sessiond server for one browser test.
type site struct {
	ts      *httptest.Server
	srv     *server.Server
	streams atomic.Int64 // stream requests that carried Last-Event-ID (reconnects)
	mu      sync.Mutex
	resumes []string // their Last-Event-ID values
	conns   *connTracker
}

// connTracker is a listener that remembers its connections, so a test can cut them all,
// streams included (a stream's connection is taken over from net/http, which then no longer
// tracks it).
type connTracker struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *connTracker) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

// drop closes every connection accepted so far: the page's live stream is cut mid-flight.
func (l *connTracker) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

func newSite(t testing.TB) *site {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ix, err := st.Search(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(session.New(st, session.Options{ArchiveDir: t.TempDir()}), server.Options{Search: ix})
	s := &site{srv: srv}
	s.ts = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Last-Event-ID"); id != "" && strings.HasSuffix(r.URL.Path, "/events/stream") {
			s.streams.Add(1)
			s.mu.Lock()
			s.resumes = append(s.resumes, id)
			s.mu.Unlock()
		}
		srv.ServeHTTP(w, r)
	}))
	s.conns = &connTracker{Listener: s.ts.Listener}
	s.ts.Listener = s.conns
	s.ts.Start()
	t.Cleanup(func() {
		s.ts.CloseClientConnections()
		srv.Close()
		s.ts.Close()
		st.Close()
	})
	return s
}

// call sends a JSON request and answers the status and body.
func (s *site) call(t testing.TB, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Close = true // a connection of its own: the resume test closes every client connection
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// allCaps is a snapshot with every command's capability on.
const allCaps = `{"mode":"work","modelId":"model-x","capabilities":{"tools":true,"approval":true,"steering":true,"resume":true,"summary":true,"threadForking":true,"editAndRerun":true}}`

func (s *site) create(t testing.TB, id string) {
	t.Helper()
	if code, body := s.call(t, "POST", "/v1/sessions", fmt.Sprintf(`{"session_id":%q,"agent_id":"agent-1","role":"implementer","project":"demo","snapshot":%s}`, id, allCaps)); code != http.StatusCreated {
		t.Fatalf("create %s: %d %s", id, code, body)
	}
}

var evN atomic.Int64

// ev is an event of session id with a fresh id and key.
func ev(id, eventType, runID, sourceMessageID, payload string) string {
	n := evN.Add(1)
	extra := ""
	if runID != "" {
		extra += fmt.Sprintf(`,"runId":%q`, runID)
	}
	if sourceMessageID != "" {
		extra += fmt.Sprintf(`,"sourceMessageId":%q`, sourceMessageID)
	}
	return fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"e-%d","sessionId":%q,"sequence":0,"idempotencyKey":"k-%d","occurredAt":"2026-03-01T12:00:%02dZ","eventType":%q%s,"payload":%s}`,
		n, id, n, n%60, eventType, extra, payload)
}

// appendEvents appends events (a runtime's part) and fails the test on a refusal.
func (s *site) appendEvents(t testing.TB, id string, events ...string) {
	t.Helper()
	if code, body := s.call(t, "POST", "/v1/sessions/"+id+"/events", "["+strings.Join(events, ",")+"]"); code != http.StatusCreated {
		t.Fatalf("append: %d %s", code, body)
	}
}

func msg(id, mid, role, text string) string {
	b, _ := json.Marshal(text)
	return ev(id, "message", "", "", fmt.Sprintf(`{"messageId":%q,"role":%q,"operation":"append","parts":[{"type":"text","text":%s}]}`, mid, role, b))
}

func runStatus(id, run, src, status string) string {
	ts := map[string]string{"running": `"startedAt":"2026-03-01T12:00:01Z"`, "waiting_approval": "", "stopped": `"stoppedAt":"2026-03-01T12:01:00Z","durationMs":59000`,
		"failed": `"failedAt":"2026-03-01T12:01:00Z","durationMs":59000`, "completed": `"completedAt":"2026-03-01T12:01:00Z","durationMs":59000`}[status]
	if ts != "" {
		ts = "," + ts
	}
	return ev(id, "status", run, src, fmt.Sprintf(`{"status":%q%s}`, status, ts))
}

// events reads the whole log of a session.
func (s *site) events(t testing.TB, id string) []map[string]any {
	t.Helper()
	code, body := s.call(t, "GET", "/v1/sessions/"+id+"/events?limit=10000", "")
	if code != http.StatusOK {
		t.Fatalf("read: %d %s", code, body)
	}
	var out struct{ Events []map[string]any }
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	return out.Events
}

// browser starts a headless chromium for one test and answers its context. Page errors
// (uncaught exceptions, console.error) fail the test.
func browser(t testing.TB) context.Context {
	t.Helper()
	path := testenv.Need(t, "chromium", "the browser tests drive it", "apt-get install -y chromium")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	var (
		mu       sync.Mutex
		pageErrs []string
	)
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			// DOMPurify parses untrusted markup in an inert document; Chromium reports each
			// inline handler in it as a blocked CSP violation (the CSP's second line at work),
			// nothing runs. Any other error, and any exception, fails the test.
			sanitizerParse := strings.HasSuffix(m.URL, "/ui/vendor/purify.es.mjs") && strings.Contains(m.Text, "Content Security Policy")
			// A failed request (a refused command's 4xx, the stream the resume test cuts) is
			// the browser's network log, not an error of the page.
			httpStatus := strings.HasPrefix(m.Text, "Failed to load resource:")
			if m.Type == chromedp.ConsoleException || (m.Type == chromedp.ConsoleError && !sanitizerParse && !httpStatus) {
				mu.Lock()
				pageErrs = append(pageErrs, fmt.Sprintf("%s at %s:%d: %s", m.Type, m.URL, m.Line, m.Text))
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		errs := pageErrs
		mu.Unlock()
		for _, e := range errs {
			t.Errorf("page error: %s", e)
		}
		cancelT()
		cancelC()
		cancelA()
	})
	return ctx
}

// run runs browser actions and fails the test on an error, showing the page.
func run(t testing.TB, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		dom, _ := chromedp.Run(c, chromedp.OuterHTML(chromedp.CSS("body")))
		if len(dom) > 4000 {
			dom = dom[:4000]
		}
		t.Fatalf("%s: %v\npage: %s", what, err, dom)
	}
}

// openSession opens a session's page and waits for its live stream.
func openSession(t testing.TB, ctx context.Context, s *site, id string) {
	t.Helper()
	run(t, ctx, "open "+id, chromedp.Navigate(s.ts.URL+"/#/s/"+id), chromedp.WaitVisible(chromedp.CSS(`.conn[data-state="live"]`)))
}

// waitJS polls a JavaScript condition until it is true.
func waitJS(expr string) chromedp.Action[chromedp.Void] {
	poll := chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(15*time.Second))
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := poll(ctx, tg)
		return chromedp.Void{}, err
	}
}

// eval evaluates a JavaScript expression and answers its value.
func eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// TestBrowserLiveMessage: a message a runtime appends while the page is open appears in it,
// streamed; a message streamed in several appends shows whole.
func TestBrowserLiveMessage(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	s.create(t, "S-live")
	s.appendEvents(t, "S-live", msg("S-live", "m1", "user", "Fix the **flaky** test"))
	openSession(t, ctx, s, "S-live")
	run(t, ctx, "the first message", waitJS(`document.querySelector('[data-message-id="m1"] .md strong')?.textContent === 'flaky'`))
	s.appendEvents(t, "S-live", msg("S-live", "m2", "assistant", "On it: "))
	s.appendEvents(t, "S-live", msg("S-live", "m2", "assistant", "reading the test now."))
	run(t, ctx, "the streamed reply", waitJS(`(document.querySelector('[data-message-id="m2"]')?.textContent || '').includes('reading the test now.')`),
		waitJS(`document.querySelector('main').dataset.lastSequence === '2'`))
}

// appendPendingApproval appends to session id a run r1 waiting for approval ap-1.
func appendPendingApproval(t *testing.T, s *site, id string) {
	t.Helper()
	s.appendEvents(t, id, msg(id, "m1", "user", "Clean the build"), runStatus(id, "r1", "m1", "running"),
		ev(id, "approval", "r1", "", `{"approvalId":"ap-1","status":"requested","title":"Delete the build directory?","requestedAction":{"command":"rm -rf build"}}`),
		runStatus(id, "r1", "m1", "waiting_approval"))
}

// TestBrowserApprove: the page offers Approve for a pending approval while the run waits for
// it; clicking it appends the decision and the run continues (running).
func TestBrowserApprove(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-approve"
	s.create(t, id)
	appendPendingApproval(t, s, id)
	openSession(t, ctx, s, id)
	run(t, ctx, "approve", chromedp.WaitVisible(chromedp.CSS(`[data-approval="ap-1"] button`)), chromedp.Click(chromedp.CSS(`[data-approval="ap-1"] button`)),
		waitJS(`document.querySelector('main').dataset.runStatus === 'running'`))
	var approved, running bool
	for _, e := range s.events(t, id) {
		p := e["payload"].(map[string]any)
		approved = approved || (e["eventType"] == "approval" && p["status"] == "approved" && p["approvalId"] == "ap-1")
		running = running || (approved && e["eventType"] == "status" && p["status"] == "running")
	}
	if !approved || !running {
		t.Fatalf("the log has no approved approval followed by running: approved %v, running %v", approved, running)
	}
}

// TestBrowserApprovalReason: the reason a person gave with an approval decision (here through
// the HTTP API, as sessiond cmd approve sends it) is shown in the transcript after a reload,
// on the run's status line that follows the decision.
func TestBrowserApprovalReason(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-approve-reason"
	s.create(t, id)
	appendPendingApproval(t, s, id)
	last := len(s.events(t, id)) - 1
	body := fmt.Sprintf(`{"contract":"AgentSessionCommand","commandId":"c-reason","sessionId":%q,"runId":"r1","idempotencyKey":"c-reason","expectedSequence":%d,"issuedAt":"2026-03-01T12:00:00Z","commandType":"approval","payload":{"approvalId":"ap-1","decision":"approved","reason":"the build directory is disposable"}}`, id, last)
	if code, out := s.call(t, "POST", "/v1/sessions/"+id+"/commands", body); code != 200 {
		t.Fatalf("approval command: %d %s", code, out)
	}
	openSession(t, ctx, s, id)
	run(t, ctx, "the reason in the transcript",
		waitJS(`[...document.querySelectorAll('.ev-line')].some(p => p.textContent.includes('the build directory is disposable'))`))
}

// TestBrowserStop: Stop shows stopping until the runtime confirms, then stopped; the button
// is offered only while the policy allows a stop.
func TestBrowserStop(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-stop"
	s.create(t, id)
	s.appendEvents(t, id, msg(id, "m1", "user", "Run forever"), runStatus(id, "r1", "m1", "running"))
	openSession(t, ctx, s, id)
	run(t, ctx, "stop", chromedp.Click(chromedp.CSS(`.controls button.danger`)),
		waitJS(`document.querySelector('main').dataset.runStatus === 'stopping' && document.querySelector('.controls button.danger').textContent.includes('stopping')`))
	s.appendEvents(t, id, ev(id, "status", "r1", "m1", `{"status":"stopped","stoppingRequestedAt":"2026-03-01T12:00:30Z","stoppedAt":"2026-03-01T12:01:00Z","durationMs":59000}`))
	run(t, ctx, "stopped", waitJS(`document.querySelector('main').dataset.runStatus === 'stopped' && !document.querySelector('.controls button.danger')`))
}

// TestBrowserRefusedCommandShowsServerMessage: a command the server refuses shows the
// server's code and message, not a generic failure. The page offers Steer (the snapshot has
// steering, the run is running); the snapshot then loses steering (a PATCH is not an event, so
// the page learns of it only at its next refresh, 5 s later), and the click is refused with
// CAPABILITY_UNAVAILABLE.
func TestBrowserRefusedCommandShowsServerMessage(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-refused"
	s.create(t, id)
	s.appendEvents(t, id, msg(id, "m1", "user", "Work"), runStatus(id, "r1", "m1", "running"))
	openSession(t, ctx, s, id)
	run(t, ctx, "steer text", chromedp.SendKeys(chromedp.CSS(`#steer-text`), "keep the API"))
	if code, body := s.call(t, "PATCH", "/v1/sessions/"+id, `{"updated_by_gate":"owner","snapshot":{"mode":"work","modelId":"model-x","capabilities":{"tools":true}}}`); code != http.StatusOK {
		t.Fatalf("patch: %d %s", code, body)
	}
	run(t, ctx, "send steer", chromedp.Click(chromedp.CSS(`.controls .steer button`)), waitJS(`!!document.querySelector('.notice.error')`))
	notice := eval[string](t, ctx, `document.querySelector('.notice.error').textContent`)
	if !strings.Contains(notice, "CAPABILITY_UNAVAILABLE") || !strings.Contains(notice, "steering") {
		t.Fatalf("the page does not show the server's refusal: %q", notice)
	}
}

// TestBrowserXSS: a message holding a script, an image with onerror and a javascript: link
// executes nothing (the sentinel stays unset, also after clicking the link), and none of them
// reaches the page's DOM; the markdown around them still renders.
func TestBrowserXSS(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-xss"
	s.create(t, id)
	s.appendEvents(t, id, msg(id, "m1", "assistant", "**bold** <script>window.__xss='script'</script>\n\n<img src=x onerror=\"window.__xss='img'\">\n\n[click me](javascript:window.__xss='link') <a href=\"javascript:window.__xss='a'\">raw</a> <svg onload=\"window.__xss='svg'\"></svg>"))
	openSession(t, ctx, s, id)
	run(t, ctx, "the message", waitJS(`document.querySelector('[data-message-id="m1"] .md strong')?.textContent === 'bold'`))
	eval[any](t, ctx, `document.querySelectorAll('[data-message-id="m1"] a').forEach((a) => a.click())`)
	time.Sleep(300 * time.Millisecond)
	report := eval[string](t, ctx, `(() => {
		const m = document.querySelector('[data-message-id="m1"]');
		const bad = [];
		if (window.__xss !== undefined) bad.push('sentinel set by ' + window.__xss);
		if (m.querySelector('script')) bad.push('a script element');
		m.querySelectorAll('*').forEach((el) => { for (const a of el.attributes) if (a.name.startsWith('on')) bad.push(el.tagName + ' has ' + a.name); });
		m.querySelectorAll('[href]').forEach((el) => { if (/^\s*javascript:/i.test(el.getAttribute('href'))) bad.push('a javascript: href'); });
		return bad.join('; ');
	})()`)
	if report != "" {
		t.Fatal(report)
	}
}

// TestBrowserResumeNoDuplicates: the page's stream is cut (the server closes every client
// connection); events appended while it is down arrive after EventSource reconnects with
// Last-Event-ID, each once: the event log has each sequence exactly once, in order.
func TestBrowserResumeNoDuplicates(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-resume"
	s.create(t, id)
	s.appendEvents(t, id, msg(id, "m0", "user", "line 0"))
	openSession(t, ctx, s, id)
	for i := 1; i <= 3; i++ {
		s.appendEvents(t, id, msg(id, fmt.Sprintf("m%d", i), "assistant", fmt.Sprintf("line %d", i)))
	}
	run(t, ctx, "live events", waitJS(`document.querySelector('main').dataset.lastSequence === '3'`))
	s.conns.drop()
	for i := 4; i <= 6; i++ {
		s.appendEvents(t, id, msg(id, fmt.Sprintf("m%d", i), "assistant", fmt.Sprintf("line %d", i)))
	}
	run(t, ctx, "resumed", waitJS(`document.querySelector('main').dataset.lastSequence === '6'`), chromedp.WaitVisible(chromedp.CSS(`.conn[data-state="live"]`)))
	if s.streams.Load() == 0 {
		t.Fatal("the page did not reconnect with Last-Event-ID")
	}
	seqs := eval[[]int](t, ctx, `[...document.querySelectorAll('.events li')].map((li) => Number(li.dataset.seq))`)
	msgs := eval[int](t, ctx, `document.querySelectorAll('.msg').length`)
	if fmt.Sprint(seqs) != "[0 1 2 3 4 5 6]" || msgs != 7 {
		t.Fatalf("event log sequences %v (want 0..6 once each), %d messages (want 7); reconnects with Last-Event-ID %v", seqs, msgs, s.resumes)
	}
}

// TestBrowserTimeTravel: setting the sequence shows the transcript as it stood then (folded
// from the log's prefix), with live controls off; back to live shows all of it again.
func TestBrowserTimeTravel(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-travel"
	s.create(t, id)
	for i := range 5 {
		s.appendEvents(t, id, msg(id, fmt.Sprintf("m%d", i), "user", fmt.Sprintf("message %d", i)))
	}
	openSession(t, ctx, s, id)
	run(t, ctx, "live", waitJS(`document.querySelectorAll('.msg').length === 5`))
	eval[any](t, ctx, `(() => { const i = document.querySelector('.travel input[type=number]'); i.value = '1'; i.dispatchEvent(new Event('change', { bubbles: true })); })()`)
	run(t, ctx, "sequence 1", waitJS(`document.querySelector('.past')?.textContent.includes('viewing sequence 1 of 4') && !document.querySelector('.past').textContent.includes('loading') && document.querySelectorAll('.msg').length === 2`))
	if got := eval[string](t, ctx, `[...document.querySelectorAll('.msg .md')].map((m) => m.textContent.trim()).join('|')`); got != "message 0|message 1" {
		t.Fatalf("at sequence 1 the page shows %q", got)
	}
	// These messages started no run and belong to none: there is nothing to fork from or
	// rerun, so they offer no control (the snapshot allows forks).
	if got := eval[string](t, ctx, `[...document.querySelectorAll('.msg button')].map((b) => b.textContent).join('|')`); got != "" {
		t.Errorf("messages that started no run offer the controls %q", got)
	}
	run(t, ctx, "back to live", chromedp.Click(chromedp.CSS(`.travel button`)), waitJS(`!document.querySelector('.past') && document.querySelectorAll('.msg').length === 5`))
}

// TestBrowserForkFromMessage: "fork from here" on a message creates a new session from it and
// opens its page, whose lineage names the source session.
func TestBrowserForkFromMessage(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-source"
	s.create(t, id)
	s.appendEvents(t, id, msg(id, "m1", "user", "Write the parser"), runStatus(id, "r1", "m1", "running"),
		ev(id, "message", "r1", "", `{"messageId":"m2","role":"assistant","operation":"append","parts":[{"type":"text","text":"Parser written."}],"status":"completed"}`),
		runStatus(id, "r1", "m1", "completed"))
	openSession(t, ctx, s, id)
	run(t, ctx, "fork", chromedp.Click(chromedp.CSS(`[data-message-id="m2"] button`)),
		waitJS(`location.hash.startsWith('#/s/') && location.hash !== '#/s/S-source'`),
		waitJS(`!!document.querySelector('.lineage a[href="#/s/S-source"]')`))
	hash := eval[string](t, ctx, `location.hash`)
	code, body := s.call(t, "GET", "/v1/sessions/"+strings.TrimPrefix(hash, "#/s/")+"/lineage", "")
	if code != http.StatusOK || !strings.Contains(body, `"forkedFromThreadId":"S-source"`) || !strings.Contains(body, `"forkedFromMessageId":"m2"`) {
		t.Fatalf("the new session's lineage: %d %s", code, body)
	}
}

// TestBrowserForkFromThePast: in time travel, "Fork from here" forks from the latest message at
// the chosen sequence: the new session's lineage names that message, not the latest one.
func TestBrowserForkFromThePast(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-past"
	s.create(t, id)
	s.appendEvents(t, id, msg(id, "m1", "user", "Write the parser"), runStatus(id, "r1", "m1", "running"),
		ev(id, "message", "r1", "", `{"messageId":"m2","role":"assistant","operation":"append","parts":[{"type":"text","text":"Parser written."}],"status":"completed"}`),
		runStatus(id, "r1", "m1", "completed"), // sequence 3
		msg(id, "m3", "user", "Now the lexer"), runStatus(id, "r2", "m3", "running"),
		ev(id, "message", "r2", "", `{"messageId":"m4","role":"assistant","operation":"append","parts":[{"type":"text","text":"Lexer written."}],"status":"completed"}`),
		runStatus(id, "r2", "m3", "completed"))
	openSession(t, ctx, s, id)
	run(t, ctx, "live", waitJS(`document.querySelectorAll('.msg').length === 4`))
	eval[any](t, ctx, `(() => { const i = document.querySelector('.travel input[type=number]'); i.value = '3'; i.dispatchEvent(new Event('change', { bubbles: true })); })()`)
	run(t, ctx, "sequence 3", waitJS(`document.querySelectorAll('.msg').length === 2 && !!document.querySelector('.travel .fork-here')`),
		chromedp.Click(chromedp.CSS(`.travel .fork-here`)),
		waitJS(`location.hash.startsWith('#/s/') && location.hash !== '#/s/S-past'`),
		waitJS(`!!document.querySelector('.lineage a[href="#/s/S-past"]')`))
	hash := eval[string](t, ctx, `location.hash`)
	code, body := s.call(t, "GET", "/v1/sessions/"+strings.TrimPrefix(hash, "#/s/")+"/lineage", "")
	if code != http.StatusOK || !strings.Contains(body, `"forkedFromMessageId":"m2"`) {
		t.Fatalf("the fork from sequence 3 should come from m2: %d %s", code, body)
	}
}

// TestBrowserListLive: the sessions list follows the change feed: a session created, its run
// queued and finished show within seconds (the list's own poll is 10 s), and the advice column
// says archive_now for a session whose work window is nearly over.
func TestBrowserListLive(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	s.create(t, "S-one")
	run(t, ctx, "list", chromedp.Navigate(s.ts.URL+"/"), waitJS(`document.querySelectorAll('table.sessions tbody tr').length === 1 && document.querySelector('.conn')?.dataset.state === 'live'`))
	start := time.Now()
	s.create(t, "S-two")
	run(t, ctx, "created", waitJS(`!!document.querySelector('tr[data-session="S-two"]')`))
	s.appendEvents(t, "S-two", msg("S-two", "m1", "user", "go"), runStatus("S-two", "r1", "m1", "queued"))
	run(t, ctx, "queued", waitJS(`document.querySelector('tr[data-session="S-two"] td:nth-child(3)')?.textContent.trim() === 'queued'`))
	if code, body := s.call(t, "POST", "/v1/sessions/S-one/warm", `{"hours":0.25}`); code != http.StatusOK {
		t.Fatalf("warm: %d %s", code, body)
	}
	s.appendEvents(t, "S-two", runStatus("S-two", "r1", "m1", "failed"))
	run(t, ctx, "finished", waitJS(`document.querySelector('tr[data-session="S-two"] td:nth-child(3)')?.textContent.trim() === 'failed'`))
	if d := time.Since(start); d > 9*time.Second {
		t.Errorf("the list took %v to show three changes: it polled instead of following the feed", d)
	}
	// The warm is not a change of the feed: the advice shows after the next reload (the
	// run's finish above caused one).
	run(t, ctx, "advice", waitJS(`document.querySelector('tr[data-session="S-one"] .advice')?.textContent.includes('archive now')`))
	if got := eval[string](t, ctx, `document.querySelector('tr[data-session="S-one"] .advice span').title`); !strings.Contains(got, "the window closes in") {
		t.Errorf("the advice's reasons: %q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('tr[data-session="S-two"] .advice').textContent.trim()`); got != "ok" {
		t.Errorf("a fresh session's advice: %q", got)
	}
}

// TestBrowserRetryAndResume: a failed run offers Retry (not Stop): it queues a new run from
// the same message; when that run completes, Resume (the snapshot has resume) queues another.
func TestBrowserRetryAndResume(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-retry"
	s.create(t, id)
	s.appendEvents(t, id, msg(id, "m1", "user", "Build it"), runStatus(id, "r1", "m1", "running"),
		ev(id, "error", "r1", "", `{"code":"MODEL_OVERLOADED","message":"try again","retryable":true}`), runStatus(id, "r1", "m1", "failed"))
	openSession(t, ctx, s, id)
	if n := eval[int](t, ctx, `document.querySelectorAll('.controls button.danger').length`); n != 0 {
		t.Fatalf("a failed run offers Stop")
	}
	run(t, ctx, "retry", chromedp.Click(chromedp.CSS(`.controls button`)), waitJS(`document.querySelector('main').dataset.runStatus === 'queued'`))
	runs := func() string { _, body := s.call(t, "GET", "/v1/sessions/"+id+"/runs", ""); return body }
	if r := runs(); strings.Count(r, `"sourceMessageId":"m1"`) != 2 {
		t.Fatalf("after retry: %s", r)
	}
	var newRun struct {
		Runs []struct{ RunID, Status string }
	}
	json.Unmarshal([]byte(runs()), &newRun)
	r2 := newRun.Runs[len(newRun.Runs)-1].RunID
	s.appendEvents(t, id, runStatus(id, r2, "m1", "running"), runStatus(id, r2, "m1", "completed"))
	run(t, ctx, "completed", waitJS(`document.querySelector('main').dataset.runStatus === 'completed' && [...document.querySelectorAll('.controls button')].some((b) => b.textContent === 'Resume')`))
	run(t, ctx, "resume", chromedp.Click(chromedp.CSS(`.controls button`)), waitJS(`document.querySelector('main').dataset.runStatus === 'queued'`))
	if r := runs(); strings.Count(r, `"sourceMessageId":"m1"`) != 3 {
		t.Fatalf("after resume: %s", r)
	}
}

// TestBrowserArchiveAndRestore: the lifecycle panel archives the session with a note, lists
// the archive, and restores it.
func TestBrowserArchiveAndRestore(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-archive"
	s.create(t, id)
	s.appendEvents(t, id, msg(id, "m1", "user", "Keep this"))
	openSession(t, ctx, s, id)
	run(t, ctx, "archive", chromedp.Click(chromedp.CSS(`.lifecycle summary`)), chromedp.WaitVisible(chromedp.CSS(`.lifecycle form.archive input`)),
		chromedp.SendKeys(chromedp.CSS(`.lifecycle form.archive input`), "the parser"), chromedp.Click(chromedp.CSS(`.lifecycle form.archive button`)),
		waitJS(`document.querySelector('.lifecycle .notice')?.textContent === 'archive: done' && !!document.querySelector('.lifecycle li code')`))
	if _, body := s.call(t, "GET", "/v1/sessions/"+id, ""); !strings.Contains(body, `"status":"archived"`) {
		t.Fatalf("after archive: %s", body)
	}
	run(t, ctx, "restore", chromedp.Click(chromedp.CSS(`.lifecycle li button`)), waitJS(`document.querySelector('.lifecycle .notice')?.textContent === 'restore: done'`))
	if _, body := s.call(t, "GET", "/v1/sessions/"+id, ""); strings.Contains(body, `"status":"archived"`) {
		t.Fatalf("after restore: %s", body)
	}
}

// TestBrowserEditAndRerun: after the run ended, a user message offers "edit and rerun": the
// edited text starts a new session (with its lineage), whose first message is the new text.
func TestBrowserEditAndRerun(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-edit"
	s.create(t, id)
	s.appendEvents(t, id, msg(id, "m1", "user", "Write the parser"), runStatus(id, "r1", "m1", "running"), runStatus(id, "r1", "m1", "completed"))
	openSession(t, ctx, s, id)
	run(t, ctx, "edit", chromedp.Click(chromedp.CSS(`[data-message-id="m1"] button:nth-of-type(2)`)), chromedp.WaitVisible(chromedp.CSS(`.edit-rerun textarea`)))
	eval[any](t, ctx, `(() => { const a = document.querySelector('.edit-rerun textarea'); a.value = 'Write the parser in Go'; a.dispatchEvent(new Event('input', { bubbles: true })); })()`)
	run(t, ctx, "rerun", chromedp.Click(chromedp.CSS(`.edit-rerun button[type=submit]`)),
		waitJS(`location.hash.startsWith('#/s/') && location.hash !== '#/s/S-edit'`),
		waitJS(`[...document.querySelectorAll('.msg .md')].some((m) => m.textContent.includes('Write the parser in Go'))`),
		waitJS(`!!document.querySelector('.lineage a[href="#/s/S-edit"]')`))
}

// TestBrowserWorkspaceFiles: the workspace files the runtime reports show by path in their
// latest state, live.
func TestBrowserWorkspaceFiles(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	id := "S-files"
	s.create(t, id)
	s.appendEvents(t, id, ev(id, "workspace-file", "", "", `{"path":"parser.go","operation":"upsert","mimeType":"text/x-go","size":120}`))
	openSession(t, ctx, s, id)
	run(t, ctx, "upsert", waitJS(`document.querySelector('[data-workspace-file="parser.go"]')?.textContent.includes('120 bytes')`))
	s.appendEvents(t, id, ev(id, "workspace-file", "", "", `{"path":"parser.go","operation":"delete"}`))
	run(t, ctx, "delete", waitJS(`document.querySelector('[data-workspace-file="parser.go"] .badge')?.textContent === 'deleted'`))
	for _, where := range []string{".transcript", ".side-col"} {
		if n := eval[int](t, ctx, `document.querySelectorAll('`+where+` [data-workspace-file]').length`); n != 1 {
			t.Errorf("%s: %d workspace file rows, want 1", where, n)
		}
	}
}

// TestLoginWithAKey: on a server with authentication the UI asks for a key, turns it into the
// login cookie, then lists the sessions and follows a session's live stream with the cookie.
func TestLoginWithAKey(t *testing.T) {
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv := server.New(session.New(st, session.Options{}), server.Options{Auth: true})
	ts := httptest.NewServer(srv)
	defer func() { ts.CloseClientConnections(); srv.Close(); ts.Close() }()
	key, _, err := auth.NewKeyring(st, auth.KeyringOptions{}).Create(context.Background(), auth.KeySpec{Project: "demo", Scopes: auth.AllScopes})
	if err != nil {
		t.Fatal(err)
	}
	call := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := call("POST", "/v1/sessions", fmt.Sprintf(`{"session_id":"S-auth","agent_id":"agent-1","role":"implementer","project":"demo","snapshot":%s}`, allCaps)); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	ctx := browser(t)
	run(t, ctx, "log in", chromedp.Navigate(ts.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`input[name=key]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=key]`), key), chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`.who`)), waitJS(`!!document.querySelector('a[href="#/s/S-auth"]')`))
	if strings.Contains(eval[string](t, ctx, `document.body.innerText`), key) {
		t.Error("the page shows the key")
	}
	// The live stream follows with the cookie: an event appended now shows up.
	run(t, ctx, "open S-auth", chromedp.Navigate(ts.URL+"/#/s/S-auth"), chromedp.WaitVisible(chromedp.CSS(`.conn[data-state="live"]`)))
	if code, body := call("POST", "/v1/sessions/S-auth/events", msg("S-auth", "m1", "user", "hello through the cookie")); code != 201 {
		t.Fatalf("append: %d %s", code, body)
	}
	run(t, ctx, "the live message", waitJS(`document.body.innerText.includes("hello through the cookie")`))
}
