package web_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testenv"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store/sqlite"
)

// TestBrowserManyStreamsOverTLS: a browser holds more than 6 live event streams to one origin
// over TLS, and every one of them delivers: the server speaks HTTP/2, whose streams share one
// connection. Over HTTP/1.1 a browser opens at most 6 connections per origin, and the 7th
// stream would wait for one of them to close (a few tabs of the web UI, each with a session
// stream and the change feed, exhausted it).
func TestBrowserManyStreamsOverTLS(t *testing.T) {
	const streams = 9
	path := testenv.Need(t, "chromium", "the browser tests drive it", "apt-get install -y chromium")
	cert := testenv.SelfSignedCert(t, 1)
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(session.New(st, session.Options{}), server.Options{})
	hs := srv.HTTPServer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert.TLS}, NextProtos: []string{"h2", "http/1.1"}}
	go hs.Serve(srv.TLSListener(ln, cfg))
	t.Cleanup(func() { srv.Close(); hs.Close(); st.Close() })
	origin := "https://" + ln.Addr().String()
	cl := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	post := func(path, body string) {
		t.Helper()
		resp, err := cl.Post(origin+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST %s: %d", path, resp.StatusCode)
		}
	}
	ids := make([]string, streams)
	for i := range ids {
		ids[i] = "S-tab" + string(rune('a'+i))
		post("/v1/sessions", `{"session_id":"`+ids[i]+`","agent_id":"a","role":"implementer","snapshot":{"mode":"work","modelId":"m","capabilities":{}}}`)
	}

	actx, cancelA := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.UserDataDir(t.TempDir()), chromedp.Flag("ignore-certificate-errors", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-dev-shm-usage", true))
	defer cancelA()
	ctx, cancelC := chromedp.NewContext(actx)
	defer cancelC()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(origin+"/")); err != nil {
		t.Fatalf("open %s in chromium: %v", origin, err)
	}
	proto, err := chromedp.Run(ctx, chromedp.Evaluate[string](`performance.getEntriesByType('navigation')[0].nextHopProtocol`))
	if err != nil || proto != "h2" {
		t.Errorf("the page came over %q (%v), want h2", proto, err)
	}
	// Each stream counts its message events; every stream is open before the appends.
	open := `window.got = {}; window.opened = 0; ` + "[" + quoteAll(ids) + `].forEach(id => { const es = new EventSource('/v1/sessions/' + id + '/events/stream'); es.onopen = () => window.opened++; es.addEventListener('` + api.SSEEventPrefix + `message', () => { window.got[id] = (window.got[id] || 0) + 1; }); }); true`
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](open)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, waitJS(`window.opened === `+itoa(streams))); err != nil {
		t.Fatalf("not every stream opened: %d of %d: %v", eval[int](t, ctx, `window.opened`), streams, err)
	}
	for _, id := range ids {
		post("/v1/sessions/"+id+"/events", `{"contract":"AgentSessionEvent","eventId":"e1","sessionId":"`+id+`","sequence":0,"idempotencyKey":"k1","occurredAt":"2026-03-01T12:00:00Z","eventType":"message","payload":{"messageId":"m1","role":"user","operation":"append","parts":["hi"]}}`)
	}
	if err := chromedp.Do(ctx, waitJS(`Object.keys(window.got).length === `+itoa(streams))); err != nil {
		t.Fatalf("the streams that delivered: %v of %d: %v", eval[map[string]any](t, ctx, `window.got`), streams, err)
	}
}

func quoteAll(ids []string) string { return "'" + strings.Join(ids, "','") + "'" }

func itoa(n int) string { return strconv.Itoa(n) }
