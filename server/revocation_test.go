package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/auth"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
)

// revocationBound is how soon after a revocation (or an expiry) the streams of the key must
// have ended, on the instance that revoked and on the others (docs/security.md).
const revocationBound = time.Second

// liveStream is an open stream of a test, read in the background: its blocks arrive on a
// channel, which is closed when the stream ends.
type liveStream struct {
	resp   *http.Response
	blocks chan sseEvent
	cancel context.CancelFunc
}

// openLive opens a stream with method, path and body on base, with the header's name and
// value pairs; it fails the test unless the answer is a 200 event stream.
func openLive(t *testing.T, base, method, path, body string, header ...string) *liveStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		resp.Body.Close()
		t.Fatalf("%s %s: %d %s, want a stream", method, path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &liveStream{resp: resp, blocks: make(chan sseEvent, 1024), cancel: cancel}
	r := &sseReader{t: t, resp: resp, r: bufio.NewReader(resp.Body), raw: true}
	go func() {
		defer close(s.blocks)
		for {
			e, err := r.next()
			if err != nil {
				return
			}
			s.blocks <- e
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return s
}

// end waits (up to a generous liveness timeout) for the stream's final stream.error block and
// the end of the stream; it returns the block's error and when it arrived.
func (s *liveStream) end(t *testing.T) (api.Error, time.Time) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-s.blocks:
			if !ok {
				t.Fatal("the stream ended without a stream.error block")
			}
			if e.event != api.SSEStreamError {
				continue
			}
			at := time.Now()
			var body api.Error
			if err := json.Unmarshal([]byte(e.data), &body); err != nil {
				t.Fatalf("stream.error %q: %v", e.data, err)
			}
			select {
			case e, ok := <-s.blocks:
				if ok {
					t.Errorf("a block after stream.error: %+v", e)
				}
			case <-time.After(10 * time.Second):
				t.Error("the stream stayed open after its stream.error block")
			}
			return body, at
		case <-timeout:
			t.Fatal("the stream did not end within 30 s")
		}
	}
}

// quiet checks that the stream sends no stream.error block in d.
func (s *liveStream) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case e, ok := <-s.blocks:
			if !ok {
				t.Fatal("the stream ended")
			}
			if e.event == api.SSEStreamError {
				t.Fatalf("the stream ended: %s", e.data)
			}
		case <-timeout:
			return
		}
	}
}

// streamRoute is a long-lived route of the API, as a test opens it for session sid.
type streamRoute struct {
	name         string
	method, path string
	body         string
	scopes       string // what the key needs
	token        bool   // a stream token opens it
}

func streamRoutes(sid string) []streamRoute {
	chat := `{"id":%q,"messages":[{"id":"m-%s","role":"user","parts":[{"type":"text","text":"hi"}]}],"trigger":"submit-message"}`
	agui := `{"threadId":%q,"runId":"run-agui-%s","state":{},"messages":[{"id":"u-%s","role":"user","content":"hi"}],"tools":[],"context":[],"forwardedProps":{}}`
	return []streamRoute{
		{name: "session stream", method: "GET", path: "/v1/sessions/" + sid + "/events/stream", scopes: "read", token: true},
		{name: "change feed", method: "GET", path: "/v1/events/stream", scopes: "read"},
		{name: "AI SDK chat", method: "POST", path: "/v1/sessions/" + sid + "/chat", body: fmt.Sprintf(chat, sid, sid), scopes: "read,command"},
		{name: "AG-UI run", method: "POST", path: "/v1/sessions/" + sid + "/agui", body: fmt.Sprintf(agui, sid, sid, sid), scopes: "read,command"},
	}
}

// credential is a way to hold a key: how a stream is opened with it, and how it is revoked.
type credential struct {
	name string
	// open returns the headers and query a stream is opened with on the server at base, for
	// the key named k (session sid), and how to revoke it: revoke(base, admin) revokes through
	// the server at base and returns its answer's status.
	open  func(t *testing.T, e *authEnv, base, k, sid string) (header []string, query string, revoke func(base, admin string) int)
	token bool // a stream token: it opens the session stream only
}

// revokeKey revokes the key named k through the server at base with the admin key.
func (e *authEnv) revokeKey(t *testing.T, k string) func(base, admin string) int {
	return func(base, admin string) int {
		return e.callAt(t, base, "POST", "/v1/keys/"+e.ids[k]+"/revoke", bearer(admin), "").status
	}
}

// login returns the login cookie of key k made by the server at base.
func (e *authEnv) login(t *testing.T, base, k string) string {
	t.Helper()
	r := e.callAt(t, base, "POST", "/v1/login", bearer(e.keys[k]), "")
	if r.status != 200 {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	return strings.SplitN(r.header.Get("Set-Cookie"), ";", 2)[0]
}

var credentials = []credential{
	{name: "key", open: func(t *testing.T, e *authEnv, _, k, _ string) ([]string, string, func(string, string) int) {
		return []string{"Authorization", bearer(e.keys[k])}, "", e.revokeKey(t, k)
	}},
	{name: "login cookie", open: func(t *testing.T, e *authEnv, base, k, _ string) ([]string, string, func(string, string) int) {
		return []string{"Cookie", e.login(t, base, k), "Sec-Fetch-Site", "same-origin"}, "", e.revokeKey(t, k)
	}},
	{name: "logout", open: func(t *testing.T, e *authEnv, base, k, _ string) ([]string, string, func(string, string) int) {
		cookie := e.login(t, base, k)
		return []string{"Cookie", cookie, "Sec-Fetch-Site", "same-origin"}, "", func(base, _ string) int {
			r := e.callAt(t, base, "POST", "/v1/logout", "", "", "Cookie", cookie)
			if r.status == 204 {
				return 200
			}
			return r.status
		}
	}},
	{name: "stream token", token: true, open: func(t *testing.T, e *authEnv, base, k, sid string) ([]string, string, func(string, string) int) {
		r := e.callAt(t, base, "POST", "/v1/sessions/"+sid+"/stream-token", bearer(e.keys[k]), "")
		if r.status != 201 {
			t.Fatalf("stream-token: %d %s", r.status, r.body)
		}
		tok := regexp.MustCompile(`"token":"([^"]+)"`).FindStringSubmatch(r.body)[1]
		return nil, "?token=" + tok, e.revokeKey(t, k)
	}},
}

// callAt is call on another server's URL (another instance on the same store).
func (e *authEnv) callAt(t *testing.T, base, method, path, authz, body string, header ...string) authResp {
	t.Helper()
	saved := e.ts.URL
	e.ts.URL = base
	defer func() { e.ts.URL = saved }()
	return e.call(t, method, path, authz, body, header...)
}

// revocationCase opens every long-lived route with every credential on the server at open,
// revokes the key through the server at revoke, and checks that each stream ends with
// CREDENTIAL_REVOKED within revocationBound of the revocation's answer.
func revocationCases(t *testing.T, e *authEnv, open, revoke string) {
	admin := e.key(t, "admin", store.AllProjects, "admin,read", 0)
	n := 0
	for _, cred := range credentials {
		for _, sr := range streamRoutes("S-x") {
			if cred.token && !sr.token {
				continue // a stream token opens the session stream only (TestStreamTokenOpensOnlyItsStream)
			}
			t.Run(cred.name+"/"+sr.name, func(t *testing.T) {
				n++
				sid, k := fmt.Sprintf("S-rev-%d", n), fmt.Sprintf("holder-%d", n)
				sr := streamRoutes(sid)[indexOf(sr.name)]
				e.key(t, k, "alpha", "append,"+sr.scopes, 0)
				if r := e.callAt(t, open, "POST", "/v1/sessions", bearer(e.keys[k]), fmt.Sprintf(`{"session_id":%q,"project":"alpha","agent_id":"a","role":"implementer","snapshot":{"mode":"work","modelId":"m","capabilities":{"approval":true}}}`, sid)); r.status != 201 {
					t.Fatalf("create: %d %s", r.status, r.body)
				}
				header, query, revokeIt := cred.open(t, e, open, k, sid)
				s := openLive(t, open, sr.method, sr.path+query, sr.body, header...)
				s.quiet(t, 50*time.Millisecond) // open, and not ended for nothing
				if status := revokeIt(revoke, admin); status != 200 {
					t.Fatalf("revoke: %d", status)
				}
				revoked := time.Now()
				body, at := s.end(t)
				if body.Code != contract.CodeCredentialRevoked || !strings.Contains(body.Message, "revoked") {
					t.Errorf("final block %+v, want %s saying the key was revoked", body, contract.CodeCredentialRevoked)
				}
				if d := at.Sub(revoked); d > revocationBound {
					t.Errorf("the stream ended %v after the revocation, over the bound of %v", d, revocationBound)
				} else {
					t.Logf("ended %v after the revocation", d)
				}
			})
		}
	}
}

func indexOf(name string) int {
	for i, sr := range streamRoutes("") {
		if sr.name == name {
			return i
		}
	}
	panic(name)
}

// TestStreamEndsOnRevocation revokes, through the server, the key behind each kind of open
// stream (a session stream, the change feed, an AI SDK chat and an AG-UI run) opened with
// the key, a login cookie made from it, or a stream token minted with it, and the login's own
// key (logout): each stream ends with CREDENTIAL_REVOKED within a second, on both drivers.
func TestStreamEndsOnRevocation(t *testing.T) {
	drivers(t, func(t *testing.T, open func(t *testing.T) store.Store) {
		e := newAuthEnv(t, open(t), server.Options{}, true)
		revocationCases(t, e, e.ts.URL, e.ts.URL)
	})
}

// TestStreamEndsOnRevocationElsewhere runs two instances on one PostgreSQL database: streams
// opened on one end within a second of a revocation made through the other, although the
// first has the key cached (for 5 s) from opening them.
func TestStreamEndsOnRevocationElsewhere(t *testing.T) {
	url := pgtest.Schema(t)
	openPG := func() store.Store {
		st, err := postgres.Open(context.Background(), url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a := newAuthEnv(t, openPG(), server.Options{}, true)
	b := newAuthEnv(t, openPG(), server.Options{}, true)
	revocationCases(t, a, b.ts.URL, a.ts.URL)
}

// TestStreamEndsOnExpiry checks that a key's expiry ends the streams it opened, and those of
// the stream tokens minted with it, with CREDENTIAL_REVOKED within a second; and that a
// stream token's own, shorter, expiry does not end the stream it opened (docs/security.md).
func TestStreamEndsOnExpiry(t *testing.T) {
	drivers(t, func(t *testing.T, open func(t *testing.T) store.Store) {
		e := newAuthEnv(t, open(t), server.Options{StreamTokenTTL: time.Second}, true)
		forever := e.key(t, "forever", "alpha", "read,append", 0)
		for _, sid := range []string{"S-exp", "S-tok"} {
			if r := e.call(t, "POST", "/v1/sessions", bearer(forever), fmt.Sprintf(`{"session_id":%q,"project":"alpha","agent_id":"a","role":"implementer","snapshot":{"mode":"work","modelId":"m","capabilities":{}}}`, sid)); r.status != 201 {
				t.Fatalf("create: %d %s", r.status, r.body)
			}
		}
		// A stream token outlives its own expiry: its key holds.
		short := credentials[3]
		_, query, _ := short.open(t, e, e.ts.URL, "forever", "S-tok")
		tokStream := openLive(t, e.ts.URL, "GET", "/v1/sessions/S-tok/events/stream"+query, "")

		// A key that expires in 4 s: its stream and its token's end when it does.
		kr := auth.NewKeyring(e.st, auth.KeyringOptions{})
		secret, rec, err := kr.Create(context.Background(), auth.KeySpec{Name: "brief", Project: "alpha", Scopes: auth.AllScopes, TTL: 4 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		e.keys["brief"], e.ids["brief"] = secret, rec.ID
		keyStream := openLive(t, e.ts.URL, "GET", "/v1/events/stream", "", "Authorization", bearer(secret))
		r := e.call(t, "POST", "/v1/sessions/S-exp/stream-token", bearer(secret), "")
		if r.status != 201 {
			t.Fatalf("stream-token: %d %s", r.status, r.body)
		}
		tok := regexp.MustCompile(`"token":"([^"]+)"`).FindStringSubmatch(r.body)[1]
		derived := openLive(t, e.ts.URL, "GET", "/v1/sessions/S-exp/events/stream?token="+tok, "")
		for _, s := range []*liveStream{keyStream, derived} {
			body, at := s.end(t)
			if body.Code != contract.CodeCredentialRevoked || !strings.Contains(body.Message, "expired") {
				t.Errorf("final block %+v, want %s saying the key expired", body, contract.CodeCredentialRevoked)
			}
			if d := at.Sub(rec.ExpiresAt); d > revocationBound || d < 0 {
				t.Errorf("the stream ended %v after the key expired, want within [0, %v]", d, revocationBound)
			}
		}
		// By now the token of S-tok expired seconds ago; its stream still delivers.
		if r := e.call(t, "POST", "/v1/sessions/S-tok/events", bearer(forever), "["+event("S-tok", 1)+"]"); r.status != 201 {
			t.Fatalf("append: %d %s", r.status, r.body)
		}
		deadline := time.After(30 * time.Second)
		for got := false; !got; {
			select {
			case b, ok := <-tokStream.blocks:
				if !ok || b.event == api.SSEStreamError {
					t.Fatalf("the stream of an expired stream token whose key holds ended: %+v", b)
				}
				got = b.data != ""
			case <-deadline:
				t.Fatal("the stream of an expired stream token delivered nothing")
			}
		}
	})
}

// TestStreamTokenOpensOnlyItsStream sends a stream token, in the Authorization header, to
// every route of the route table that takes a credential: the routes that take a stream
// token (its session's event stream) let it through, every other one answers 403 FORBIDDEN
// saying what a stream token opens, and writes nothing. The routes come from the table, so a
// new route is held to the rule without being listed here.
func TestStreamTokenOpensOnlyItsStream(t *testing.T) {
	e := setupAuth(t, server.Options{})
	key := e.key(t, "k", "alpha", "read,append,command,admin", 0)
	if r := e.call(t, "POST", "/v1/sessions", bearer(key), `{"session_id":"S-a","project":"alpha","agent_id":"a","role":"implementer","snapshot":{"mode":"work","modelId":"m","capabilities":{}}}`); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	r := e.call(t, "POST", "/v1/sessions/S-a/stream-token", bearer(key), "")
	if r.status != 201 {
		t.Fatalf("stream-token: %d %s", r.status, r.body)
	}
	tok := regexp.MustCompile(`"token":"([^"]+)"`).FindStringSubmatch(r.body)[1]
	tokens := 0
	for _, rt := range e.srv.RouteTable() {
		if rt.Public {
			continue // takes no credential: a token there is not looked at
		}
		method, path, _ := strings.Cut(rt.Pattern, " ")
		path = strings.NewReplacer("{id}", "S-a", "{runId}", "run-1", "{chatId}", "S-a", "{keyId}", e.ids["k"]).Replace(path)
		body := ""
		if rt.Body != nil {
			body = "{}"
		}
		before := settled(t, e.st)
		r := e.call(t, method, path, bearer(tok), body)
		if rt.Token {
			tokens++
			if r.status != 200 {
				t.Errorf("%s with its stream token: %d %s, want it let through", rt.Pattern, r.status, r.body)
			}
			continue
		}
		if r.status != 403 || errorBody(t, r.body).Code != contract.CodeForbidden || !strings.Contains(r.body, "a stream token opens only its session's event stream") {
			t.Errorf("%s with a stream token: %d %s, want 403 FORBIDDEN saying what a stream token opens", rt.Pattern, r.status, r.body)
		}
		if after := snapshot(t, e.st); after != before {
			t.Errorf("%s: the refused request changed the store:\nbefore %s\nafter %s", rt.Pattern, before, after)
		}
	}
	if tokens == 0 {
		t.Error("no route of the table takes a stream token")
	}
}

// TestDerivedTokensCountAgainstTheirSubject checks that the stream tokens an OIDC subject
// mints count against the subject, for the streams it may hold open and for its request rate,
// as those of a key count against the key: minting tokens gets around neither.
func TestDerivedTokensCountAgainstTheirSubject(t *testing.T) {
	create := `{"session_id":"S-o","project":"alpha","agent_id":"a","role":"implementer","snapshot":{"mode":"work","modelId":"m","capabilities":{}}}`
	mint := func(t *testing.T, e *authEnv, authz string) string {
		t.Helper()
		r := e.call(t, "POST", "/v1/sessions/S-o/stream-token", authz, "")
		if r.status != 201 {
			t.Fatalf("stream-token: %d %s", r.status, r.body)
		}
		return regexp.MustCompile(`"url":"([^"]+)"`).FindStringSubmatch(r.body)[1]
	}
	for _, holder := range []struct{ name, authz, owner string }{
		{"OIDC subject", "Bearer oidc-alpha-read", "oidc:bob"},
		{"key", "", "key "},
	} {
		// setup starts a server with opt and returns holder's credential, which made S-o.
		setup := func(t *testing.T, opt server.Options) (*authEnv, string) {
			opt.Tokens = fakeIdP{}
			e := setupAuth(t, opt)
			authz := holder.authz
			if authz == "" {
				authz = bearer(e.key(t, "k", "alpha", "read,append", 0))
			}
			if r := e.call(t, "POST", "/v1/sessions", strings.Replace(authz, "read", "append", 1), create); r.status != 201 {
				t.Fatalf("create: %d %s", r.status, r.body)
			}
			return e, authz
		}
		t.Run(holder.name+"/streams", func(t *testing.T) {
			e, authz := setup(t, server.Options{MaxStreamsPerKey: 1})
			url := mint(t, e, authz)
			openLive(t, e.ts.URL, "GET", "/v1/events/stream", "", "Authorization", authz)
			r := e.call(t, "GET", url, "", "")
			if r.status != 429 || !strings.Contains(r.body, holder.owner) {
				t.Errorf("a second stream, through a stream token: %d %s, want 429 naming %q", r.status, r.body, holder.owner)
			}
		})
		t.Run(holder.name+"/rate", func(t *testing.T) {
			e, authz := setup(t, server.Options{RateLimit: 0.01, RateBurst: 3})
			url := mint(t, e, authz)
			if r := e.call(t, "GET", "/v1/whoami", authz, ""); r.status != 200 {
				t.Fatalf("the third request of the burst: %d %s", r.status, r.body)
			}
			r := e.call(t, "GET", url, "", "")
			if r.status != 429 || !strings.Contains(r.body, holder.owner) {
				t.Errorf("a fourth request, through a stream token: %d %s, want 429 naming %q", r.status, r.body, holder.owner)
			}
		})
	}
}
