package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/auth"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
	"github.com/sessiond/sessiond/store/sqlite"
	"github.com/sessiond/sessiond/store/storetest"
)

// authEnv is a server with authentication on, over a store of one driver, and the keys the
// tests use, by name.
type authEnv struct {
	st   store.Store
	srv  *server.Server
	ts   *httptest.Server
	keys map[string]string // name -> secret
	ids  map[string]string // name -> key id
}

// drivers runs f on SQLite and on PostgreSQL (skipped without SESSIOND_TEST_POSTGRES, failed
// under CI without it).
func drivers(t *testing.T, f func(t *testing.T, open func(t *testing.T) store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		f(t, func(t *testing.T) store.Store {
			st, err := sqlite.Open(context.Background(), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		})
	})
	t.Run("postgres", func(t *testing.T) {
		f(t, func(t *testing.T) store.Store {
			st, err := postgres.Open(context.Background(), pgtest.Schema(t), postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		})
	})
}

func newAuthEnv(t *testing.T, st store.Store, opt server.Options, validate bool, sopt ...session.Options) *authEnv {
	t.Helper()
	opt.Auth = true
	srv := newServer(t, st, opt, sopt...)
	var h http.Handler = srv
	if validate {
		h = validated(t, srv)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); ts.Close() })
	return &authEnv{st: st, srv: srv, ts: ts, keys: map[string]string{}, ids: map[string]string{}}
}

// key makes a key named name of project with scopes ("read,append"); ttl 0 never expires, a
// negative ttl makes a key that expired -ttl ago.
func (e *authEnv) key(t *testing.T, name, project, scopes string, ttl time.Duration) string {
	t.Helper()
	set, err := auth.ParseScopes(scopes)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if ttl < 0 {
		now = now.Add(2 * ttl)
		ttl = -ttl
	}
	kr := auth.NewKeyring(e.st, auth.KeyringOptions{Now: func() time.Time { return now }})
	secret, k, err := kr.Create(context.Background(), auth.KeySpec{Name: name, Project: project, Scopes: set, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	e.keys[name], e.ids[name] = secret, k.ID
	return secret
}

type authResp struct {
	status int
	header http.Header
	body   string
}

// call sends a request with the credential (an Authorization value, "" for none); a stream
// answer is closed once its header arrived.
func (e *authEnv) call(t *testing.T, method, path, authz, body string, header ...string) authResp {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return authResp{status: resp.StatusCode, header: resp.Header}
	}
	data, _ := io.ReadAll(resp.Body)
	return authResp{status: resp.StatusCode, header: resp.Header, body: string(data)}
}

func bearer(secret string) string { return "Bearer " + secret }

// routeScopes is the scope each route needs, as issue #14 and docs/security.md state them,
// written out here independently of the route table: a new route fails the matrix until it
// is added, with its scope, to this table. "" marks a public route; a "*" suffix a route that
// needs a key of every project.
var routeScopes = map[string]string{
	"GET /healthz":                                      "",
	"GET /readyz":                                       "",
	"GET /v1/openapi.json":                              "",
	"GET /{$}":                                          "",
	"GET /ui/{file...}":                                 "",
	"POST /v1/logout":                                   "",
	"GET /metrics":                                      "admin*",
	"POST /v1/sessions":                                 "append",
	"GET /v1/sessions":                                  "read",
	"GET /v1/usage":                                     "read",
	"GET /v1/sessions/{id}":                             "read",
	"PATCH /v1/sessions/{id}":                           "admin",
	"POST /v1/sessions/{id}/events":                     "append",
	"GET /v1/sessions/{id}/events":                      "read",
	"GET /v1/sessions/{id}/events/export":               "read",
	"GET /v1/sessions/{id}/events/stream":               "read",
	"GET /v1/sessions/{id}/runs":                        "read",
	"GET /v1/sessions/{id}/runs/{runId}":                "read",
	"POST /v1/sessions/{id}/commands":                   "command",
	"GET /v1/sessions/{id}/view":                        "read",
	"GET /v1/sessions/{id}/transcript":                  "read",
	"POST /v1/sessions/{id}/continuations":              "command",
	"GET /v1/sessions/{id}/lineage":                     "read",
	"GET /v1/events/stream":                             "read",
	"GET /v1/search":                                    "read",
	"POST /v1/sessions/{id}/stream-token":               "read",
	"POST /v1/login":                                    "read",
	"GET /v1/whoami":                                    "read",
	"GET /v1/keys":                                      "admin",
	"POST /v1/keys":                                     "admin",
	"GET /v1/keys/{keyId}":                              "admin",
	"POST /v1/keys/{keyId}/revoke":                      "admin",
	"POST /v1/sessions/{id}/heartbeat":                  "append",
	"POST /v1/sessions/{id}/assess":                     "read",
	"POST /v1/sessions/{id}/warm":                       "append",
	"POST /v1/sessions/{id}/archive":                    "admin",
	"GET /v1/sessions/{id}/status":                      "read",
	"GET /v1/archives":                                  "read",
	"POST /v1/archives":                                 "admin*",
	"POST /v1/archives/restore":                         "admin*",
	"POST /v1/sweep":                                    "admin*",
	"POST /v1/runs/claim":                               "append",
	"POST /v1/sessions/{id}/runs/{runId}/lease":         "append",
	"POST /v1/sessions/{id}/runs/{runId}/lease/release": "append",
	"POST /v1/sessions/{id}/chat":                       "command",
	"GET /v1/sessions/{id}/chat":                        "read",
	"GET /v1/sessions/{id}/chat/{chatId}/stream":        "read",
	"POST /v1/sessions/{id}/chat/stop":                  "command",
	"POST /v1/sessions/{id}/agui":                       "command",
	"GET /v1/sessions/{id}/agui/messages":               "read",
}

// snapshot is what a refused request must not change: every session's record and last
// sequence, every key (derived ones too) and the change feed's head.
func snapshot(t *testing.T, st store.Store) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	list, _, err := st.ListSessions(ctx, store.ListFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		rec, _ := contract.Marshal(s.Record)
		fmt.Fprintf(&b, "%s %d %s\n", s.Record.SessionID, s.LastSequence, rec)
	}
	keys, err := st.ListKeys(ctx, store.KeyFilter{Derived: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		fmt.Fprintf(&b, "key %s %v\n", k.ID, k.RevokedAt)
	}
	last, err := st.LastChange(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "change %d\n", last)
	return b.String()
}

// settled returns the store's snapshot once what earlier requests set off has landed (on
// PostgreSQL a change is numbered just after its commit): two snapshots 20 ms apart agree.
func settled(t *testing.T, st store.Store) string {
	t.Helper()
	prev := snapshot(t, st)
	for range 100 {
		time.Sleep(20 * time.Millisecond)
		cur := snapshot(t, st)
		if cur == prev {
			return cur
		}
		prev = cur
	}
	t.Fatal("the store kept changing for 2 s with no request in flight")
	return ""
}

// TestAuthorizationMatrix enumerates the router's routes and sends each one with no
// credential, a malformed one, an unknown key, a revoked key, an expired key, a key of each
// single scope, and a key of another project with every scope, checking the status (and
// that nothing was written on a refusal), on both drivers.
func TestAuthorizationMatrix(t *testing.T) {
	drivers(t, func(t *testing.T, open func(t *testing.T) store.Store) {
		st := open(t)
		e := newAuthEnv(t, st, server.Options{}, true)
		ctx := context.Background()
		for _, s := range []struct{ id, project string }{{"S-a", "alpha"}, {"S-b", "beta"}} {
			sess := storetest.NewSession(s.id, storetest.SessionSpec{Project: s.project})
			if err := st.CreateSession(ctx, sess); err != nil {
				t.Fatal(err)
			}
		}
		for _, sc := range auth.Scopes {
			e.key(t, "alpha-"+string(sc), "alpha", string(sc), 0)
			e.key(t, "all-"+string(sc), store.AllProjects, string(sc), 0)
		}
		e.key(t, "beta-all", "beta", "read,append,command,admin", 0)
		e.key(t, "revoked", store.AllProjects, "read,append,command,admin", 0)
		if _, err := st.RevokeKey(ctx, e.ids["revoked"], time.Now()); err != nil {
			t.Fatal(err)
		}
		e.key(t, "expired", store.AllProjects, "read,append,command,admin", -time.Hour)
		e.key(t, "victim", "alpha", "read", 0)
		unknown := "sk_0123456789abcdef_" + strings.Repeat("A", 43)

		table := e.srv.RouteTable()
		seen := map[string]bool{}
		for _, rt := range table {
			seen[rt.Pattern] = true
			want, ok := routeScopes[rt.Pattern]
			if !ok {
				t.Errorf("route %s is not in routeScopes: add it with the scope it needs (docs/security.md)", rt.Pattern)
				continue
			}
			scope, global := strings.TrimSuffix(want, "*"), strings.HasSuffix(want, "*")
			if rt.Public != (want == "") || rt.Scope != scope || rt.Global != global {
				t.Errorf("route %s declares public=%v scope=%q global=%v; want scope %q (\"\" public, * every project)", rt.Pattern, rt.Public, rt.Scope, rt.Global, want)
			}
		}
		for p := range routeScopes {
			if !seen[p] {
				t.Errorf("routeScopes lists %s, which the router does not have", p)
			}
		}

		for _, rt := range table {
			method, path, _ := strings.Cut(rt.Pattern, " ")
			path = strings.NewReplacer("{$}", "", "{file...}", "app.js", "{runId}", "run-1", "{chatId}", "chat-1", "{keyId}", e.ids["victim"]).Replace(path)
			onSession := strings.Contains(path, "{id}")
			sessPath := strings.ReplaceAll(path, "{id}", "S-a")
			body := ""
			if rt.Body != nil {
				body = "{}"
			}
			if rt.Pattern == "POST /v1/sessions" {
				body = `{"project":"alpha"}` // a key of one project creates in its project only
			}
			t.Run(rt.Pattern, func(t *testing.T) {
				refused := func(name, authz string, status int, code contract.ErrorCode) authResp {
					t.Helper()
					before := settled(t, st)
					r := e.call(t, method, sessPath, authz, body)
					if r.status != status {
						t.Fatalf("%s: %d, want %d: %s", name, r.status, status, r.body)
					}
					if got := errorBody(t, r.body).Code; got != code {
						t.Fatalf("%s: code %s, want %s", name, got, code)
					}
					if status == http.StatusUnauthorized && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), `Bearer realm="sessiond"`) {
						t.Errorf("%s: WWW-Authenticate %q, want a Bearer challenge", name, r.header.Get("WWW-Authenticate"))
					}
					if after := snapshot(t, st); after != before {
						t.Errorf("%s: the refused request changed the store:\nbefore %s\nafter %s", name, before, after)
					}
					return r
				}
				if rt.Public {
					if r := e.call(t, method, sessPath, "", body); r.status == http.StatusUnauthorized || r.status == http.StatusForbidden {
						t.Fatalf("public route without a credential: %d %s", r.status, r.body)
					}
					return
				}
				refused("no credential", "", 401, contract.CodeUnauthenticated)
				refused("not Bearer", "Basic dXNlcjpwYXNz", 401, contract.CodeUnauthenticated)
				refused("malformed key", "Bearer sk_nope", 401, contract.CodeUnauthenticated)
				refused("unknown key", bearer(unknown), 401, contract.CodeUnauthenticated)
				refused("wrong secret", bearer(e.keys["all-admin"][:len(e.keys["all-admin"])-4]+"AAAA"), 401, contract.CodeUnauthenticated)
				refused("revoked key", bearer(e.keys["revoked"]), 401, contract.CodeUnauthenticated)
				refused("expired key", bearer(e.keys["expired"]), 401, contract.CodeUnauthenticated)
				for _, sc := range auth.Scopes {
					if string(sc) == rt.Scope {
						continue
					}
					r := refused("scope "+string(sc), bearer(e.keys["all-"+string(sc)]), 403, contract.CodeForbidden)
					if msg := errorBody(t, r.body).Message; !strings.Contains(msg, "needs the "+rt.Scope+" scope") {
						t.Errorf("scope %s: message %q does not name the missing scope %s", sc, msg, rt.Scope)
					}
				}
				if rt.Global {
					refused("key of one project", bearer(e.keys["alpha-"+rt.Scope]), 403, contract.CodeForbidden)
				}
				if onSession {
					// Another project's session answers exactly as a missing one.
					other := refused("other project", bearer(e.keys["beta-all"]), 404, contract.CodeSessionNotFound)
					missing := e.call(t, method, strings.ReplaceAll(path, "{id}", "S-z"), bearer(e.keys["beta-all"]), body)
					norm := func(s, id string) string { return strings.ReplaceAll(s, id, "ID") }
					if missing.status != other.status || norm(missing.body, "S-z") != norm(other.body, "S-a") {
						t.Errorf("another project's session answers %d %s; a missing one %d %s", other.status, other.body, missing.status, missing.body)
					}
				}
				// The right scope passes the door (whatever the handler then says of the
				// request), for a key of the project and for a key of every project.
				holders := []string{"all-" + rt.Scope}
				if !rt.Global {
					holders = append(holders, "alpha-"+rt.Scope)
				}
				for _, h := range holders {
					r := e.call(t, method, sessPath, bearer(e.keys[h]), body)
					if r.status == 401 || r.status == 403 || r.status == 429 {
						t.Errorf("%s: %d %s, want the request let through", h, r.status, r.body)
					}
					if r.status == 404 && strings.Contains(r.body, string(contract.CodeSessionNotFound)) {
						t.Errorf("%s: the session of its own project answered %s", h, r.body)
					}
				}
			})
		}
	})
}

// TestProjectsAreTenants checks that lists, the change feed, claims and creates are limited
// to the key's project. (Forks and continuations are made in their source's project by the
// session service, and the source must be one the key may see.)
func TestProjectsAreTenants(t *testing.T) {
	b := setupAuth(t, server.Options{})
	alpha := b.key(t, "alpha", "alpha", "read,append,command,admin", 0)
	beta := b.key(t, "beta", "beta", "read,append,command,admin", 0)
	mk := func(secret, id, project string) authResp {
		return b.call(t, "POST", "/v1/sessions", bearer(secret), fmt.Sprintf(`{"session_id":%q,"project":%q,"agent_id":"a","role":"implementer","snapshot":{"mode":"work","modelId":"m","capabilities":{}}}`, id, project))
	}
	if r := mk(alpha, "S-a1", "alpha"); r.status != 201 {
		t.Fatalf("create in own project: %d %s", r.status, r.body)
	}
	if r := mk(beta, "S-b1", "beta"); r.status != 201 {
		t.Fatalf("create in own project: %d %s", r.status, r.body)
	}
	if r := mk(alpha, "S-a2", "beta"); r.status != 403 || !strings.Contains(r.body, `give \"project\":\"alpha\"`) {
		t.Errorf("create in another project: %d %s, want 403 naming the key's project", r.status, r.body)
	}
	r := b.call(t, "GET", "/v1/sessions", bearer(alpha), "")
	if !strings.Contains(r.body, "S-a1") || strings.Contains(r.body, "S-b1") {
		t.Errorf("list with a key of alpha: %s; want S-a1 only", r.body)
	}
	if r := b.call(t, "GET", "/v1/sessions?project=beta", bearer(alpha), ""); r.status != 403 {
		t.Errorf("list of another project: %d %s, want 403", r.status, r.body)
	}
	if r := b.call(t, "GET", "/v1/events/stream?project=beta", bearer(alpha), ""); r.status != 403 {
		t.Errorf("change feed of another project: %d %s, want 403", r.status, r.body)
	}
	if r := b.call(t, "POST", "/v1/runs/claim", bearer(alpha), `{"project":"beta"}`); r.status != 403 {
		t.Errorf("claim in another project: %d %s, want 403", r.status, r.body)
	}
	// Every session the keys made is in their own project.
	list, _, err := b.st.ListSessions(context.Background(), store.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if want := strings.TrimPrefix(s.Record.SessionID[:3], "S-"); (want == "a" && s.Record.Project.Get() != "alpha") || (want == "b" && s.Record.Project.Get() != "beta") {
			t.Errorf("session %s is in project %q", s.Record.SessionID, s.Record.Project.Get())
		}
	}
}

// setupAuth is an authEnv over SQLite whose traffic is checked against the OpenAPI document.
func setupAuth(t *testing.T, opt server.Options) *authEnv {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newAuthEnv(t, st, opt, true)
}

// TestChangeFeedIsFilteredByProject checks that a key of one project follows only its
// project's changes.
func TestChangeFeedIsFilteredByProject(t *testing.T) {
	b := setupAuth(t, server.Options{KeepAlive: 50 * time.Millisecond})
	alpha := b.key(t, "alpha", "alpha", "read,append", 0)
	all := b.key(t, "all", "*", "append", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b.ts.URL+"/v1/events/stream?after=0", nil)
	req.Header.Set("Authorization", bearer(alpha))
	resp, err := b.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	for _, s := range []struct{ id, project string }{{"S-b", "beta"}, {"S-a", "alpha"}} {
		r := b.call(t, "POST", "/v1/sessions", bearer(all), fmt.Sprintf(`{"session_id":%q,"project":%q,"agent_id":"a","role":"implementer","snapshot":{"mode":"work","modelId":"m","capabilities":{}}}`, s.id, s.project))
		if r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
	}
	var got strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(got.String(), `"S-a"`) {
		n, err := resp.Body.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("feed ended before S-a's change: %v\n%s", err, got.String())
		}
	}
	if strings.Contains(got.String(), "S-b") {
		t.Errorf("a key of alpha got beta's change:\n%s", got.String())
	}
}

// TestStreamToken checks the browsers' stream token: read-only, one session's stream,
// short-lived, in the stream's URL; and that a long-lived key is never taken from a URL.
func TestStreamToken(t *testing.T) {
	b := setupAuth(t, server.Options{StreamTokenTTL: time.Minute})
	key := b.key(t, "k", "alpha", "read,append", 0)
	for _, id := range []string{"S-a", "S-c"} {
		if r := b.call(t, "POST", "/v1/sessions", bearer(key), fmt.Sprintf(`{"session_id":%q,"project":"alpha","agent_id":"a","role":"implementer","snapshot":{"mode":"work","modelId":"m","capabilities":{}}}`, id)); r.status != 201 {
			t.Fatal(r.body)
		}
	}
	r := b.call(t, "POST", "/v1/sessions/S-a/stream-token", bearer(key), "")
	if r.status != 201 {
		t.Fatalf("stream-token: %d %s", r.status, r.body)
	}
	tok := regexp.MustCompile(`"token":"([^"]+)"`).FindStringSubmatch(r.body)[1]
	url := regexp.MustCompile(`"url":"([^"]+)"`).FindStringSubmatch(r.body)[1]
	if r := b.call(t, "GET", url, "", ""); r.status != 200 {
		t.Errorf("the stream with its token: %d %s", r.status, r.body)
	}
	if r := b.call(t, "GET", "/v1/sessions/S-c/events/stream?token="+tok, "", ""); r.status != 401 && r.status != 403 {
		t.Errorf("another session's stream with the token: %d %s", r.status, r.body)
	}
	if r := b.call(t, "GET", "/v1/sessions/S-a/events/stream", bearer(tok), ""); r.status != 200 {
		t.Errorf("the token as a bearer on its session's stream: %d %s", r.status, r.body)
	}
	if r := b.call(t, "GET", "/v1/sessions/S-a/events", bearer(tok), ""); r.status != 403 {
		t.Errorf("the token as a bearer on its session's read: %d %s, want 403 (TestStreamTokenOpensOnlyItsStream)", r.status, r.body)
	}
	if r := b.call(t, "POST", "/v1/sessions/S-a/heartbeat", bearer(tok), ""); r.status != 403 {
		t.Errorf("the token on a write: %d %s, want 403 (read only)", r.status, r.body)
	}
	if r := b.call(t, "GET", "/v1/sessions/S-a/events/stream?token="+key, "", ""); r.status != 401 || !strings.Contains(r.body, "takes only a stream token") {
		t.Errorf("a long-lived key in the URL: %d %s, want 401", r.status, r.body)
	}
	if r := b.call(t, "GET", "/v1/sessions/S-a/events?token="+tok, "", ""); r.status != 400 && r.status != 401 {
		t.Errorf("a token in the URL of another route: %d %s, want it refused", r.status, r.body)
	}
}

// TestLoginCookie checks the web UI's login: a derived key in an HttpOnly SameSite=Strict
// cookie, refused on a cross-origin write, gone at logout and with its parent key.
func TestLoginCookie(t *testing.T) {
	b := setupAuth(t, server.Options{})
	key := b.key(t, "k", "alpha", "read,command", 0)
	r := b.call(t, "POST", "/v1/login", bearer(key), "")
	if r.status != 200 {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	sc := r.header.Get("Set-Cookie")
	for _, want := range []string{"sessiond_login=sk_", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(sc, want) {
			t.Errorf("Set-Cookie %q lacks %s", sc, want)
		}
	}
	cookie := strings.SplitN(sc, ";", 2)[0]
	if r := b.call(t, "GET", "/v1/whoami", "", "", "Cookie", cookie); r.status != 200 || !strings.Contains(r.body, `"project":"alpha"`) {
		t.Errorf("whoami with the cookie: %d %s", r.status, r.body)
	}
	if r := b.call(t, "POST", "/v1/sessions/S-x/commands", "", "{}", "Cookie", cookie); r.status != 403 {
		t.Errorf("a write with the cookie and no Origin: %d %s, want 403", r.status, r.body)
	}
	if r := b.call(t, "POST", "/v1/sessions/S-x/commands", "", "{}", "Cookie", cookie, "Origin", "http://evil.example"); r.status != 403 {
		t.Errorf("a cross-origin write with the cookie: %d %s, want 403", r.status, r.body)
	}
	if r := b.call(t, "POST", "/v1/sessions/S-x/commands", "", "{}", "Cookie", cookie, "Sec-Fetch-Site", "same-origin"); r.status == 401 || r.status == 403 {
		t.Errorf("a same-origin write with the cookie: %d %s, want it let through", r.status, r.body)
	}
	if _, err := b.st.RevokeKey(context.Background(), b.ids["k"], time.Now()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	// The revocation went around the server's keyring: it shows within the cache's TTL.
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := b.call(t, "GET", "/v1/whoami", "", "", "Cookie", cookie)
		if r.status == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the login of a revoked key still works: %d %s", r.status, r.body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r := b.call(t, "POST", "/v1/logout", "", "", "Cookie", cookie); r.status != 204 || !strings.Contains(r.header.Get("Set-Cookie"), "Max-Age=0") {
		t.Errorf("logout: %d %v", r.status, r.header)
	}
}

// TestRevocationIsImmediate checks that a key revoked through the server stops at once.
func TestRevocationIsImmediate(t *testing.T) {
	b := setupAuth(t, server.Options{})
	admin := b.key(t, "admin", "*", "admin,read", 0)
	victim := b.key(t, "victim", "*", "read", 0)
	if r := b.call(t, "GET", "/v1/sessions", bearer(victim), ""); r.status != 200 {
		t.Fatal(r.body)
	}
	if r := b.call(t, "POST", "/v1/keys/"+b.ids["victim"]+"/revoke", bearer(admin), ""); r.status != 200 || !strings.Contains(r.body, "revokedAt") {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	if r := b.call(t, "GET", "/v1/sessions", bearer(victim), ""); r.status != 401 || !strings.Contains(r.body, "revoked") {
		t.Errorf("the revoked key: %d %s, want 401 saying it is revoked", r.status, r.body)
	}
}

// TestKeysOverHTTP makes, lists and revokes keys over HTTP, with a key of one project limited
// to its project's keys.
func TestKeysOverHTTP(t *testing.T) {
	b := setupAuth(t, server.Options{})
	root := b.key(t, "root", "*", "admin", 0)
	alphaAdmin := b.key(t, "alpha-admin", "alpha", "admin", 0)
	r := b.call(t, "POST", "/v1/keys", bearer(root), `{"name":"ci","project":"beta","scopes":["read","append"],"expiresIn":"90d"}`)
	if r.status != 201 || !strings.Contains(r.body, `"secret":"sk_`) || !strings.Contains(r.body, `"expiresAt"`) {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	secret := regexp.MustCompile(`"secret":"([^"]+)"`).FindStringSubmatch(r.body)[1]
	if r := b.call(t, "GET", "/v1/whoami", bearer(secret), ""); !strings.Contains(r.body, `"project":"beta"`) {
		t.Errorf("the new key: %s", r.body)
	}
	if r := b.call(t, "POST", "/v1/keys", bearer(alphaAdmin), `{"project":"beta","scopes":["read"]}`); r.status != 403 {
		t.Errorf("a key of alpha making a key of beta: %d %s, want 403", r.status, r.body)
	}
	if r := b.call(t, "POST", "/v1/keys", bearer(root), `{"scopes":["reed"]}`); r.status != 422 || !strings.Contains(r.body, `\"reed\" is not a scope`) {
		t.Errorf("a bad scope: %d %s", r.status, r.body)
	}
	r = b.call(t, "GET", "/v1/keys", bearer(alphaAdmin), "")
	if !strings.Contains(r.body, b.ids["alpha-admin"]) || strings.Contains(r.body, b.ids["root"]) || strings.Contains(r.body, "hash") {
		t.Errorf("list by a key of alpha: %s", r.body)
	}
	if r := b.call(t, "POST", "/v1/keys/"+b.ids["root"]+"/revoke", bearer(alphaAdmin), ""); r.status != 404 {
		t.Errorf("a key of alpha revoking a key of every project: %d %s, want 404", r.status, r.body)
	}
}

// TestRateLimitPerKey checks the per-key rate: over it, 429 with Retry-After; another key is
// not slowed.
func TestRateLimitPerKey(t *testing.T) {
	b := setupAuth(t, server.Options{RateLimit: 0.01, RateBurst: 3})
	k1 := b.key(t, "k1", "*", "read", 0)
	k2 := b.key(t, "k2", "*", "read", 0)
	for i := range 3 {
		if r := b.call(t, "GET", "/v1/sessions", bearer(k1), ""); r.status != 200 {
			t.Fatalf("request %d within the burst: %d %s", i, r.status, r.body)
		}
	}
	r := b.call(t, "GET", "/v1/sessions", bearer(k1), "")
	if r.status != 429 || r.header.Get("Retry-After") == "" || errorBody(t, r.body).Code != contract.CodeRateLimited {
		t.Errorf("over the rate: %d Retry-After %q %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	if r := b.call(t, "GET", "/v1/sessions", bearer(k2), ""); r.status != 200 {
		t.Errorf("another key: %d %s", r.status, r.body)
	}
}

// TestStreamsPerKey checks the bound on a key's concurrent streams.
func TestStreamsPerKey(t *testing.T) {
	b := setupAuth(t, server.Options{MaxStreamsPerKey: 1})
	k := b.key(t, "k", "*", "read", 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b.ts.URL+"/v1/events/stream", nil)
	req.Header.Set("Authorization", bearer(k))
	resp, err := b.ts.Client().Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first stream: %v %v", err, resp)
	}
	r := b.call(t, "GET", "/v1/events/stream", bearer(k), "")
	if r.status != 429 || r.header.Get("Retry-After") == "" {
		t.Errorf("second stream: %d %v %s, want 429 with Retry-After", r.status, r.header, r.body)
	}
	resp.Body.Close()
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := b.call(t, "GET", "/v1/events/stream", bearer(k), "")
		if r.status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the first stream closed: %d %s", r.status, r.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCORS checks the preflight and the headers of an allowed origin, and that another origin
// gets none.
func TestCORS(t *testing.T) {
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// OPTIONS is no operation of the API document: this server is not validated.
	b := newAuthEnv(t, st, server.Options{CORSOrigins: []string{"https://app.example", "https://other.example"}}, false)
	r := b.call(t, "OPTIONS", "/v1/sessions/S-a/events", "", "", "Origin", "https://app.example", "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type")
	if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		r.header.Get("Access-Control-Allow-Methods") != "POST" || !strings.Contains(r.header.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!slices.Contains(r.header.Values("Vary"), "Origin") {
		t.Errorf("preflight of an allowed origin: %d %v", r.status, r.header)
	}
	r = b.call(t, "OPTIONS", "/v1/sessions/S-a/events", "", "", "Origin", "https://evil.example", "Access-Control-Request-Method", "POST")
	if r.status != 403 || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of another origin: %d %v", r.status, r.header)
	}
	r = b.call(t, "OPTIONS", "/v1/sessions/S-a/events", "", "", "Origin", "https://app.example", "Access-Control-Request-Method", "DELETE")
	if r.status != 405 {
		t.Errorf("preflight of a method the route does not take: %d %v", r.status, r.header)
	}
	r = b.call(t, "GET", "/v1/sessions", "", "", "Origin", "https://app.example")
	if r.status != 401 || r.header.Get("Access-Control-Allow-Origin") != "https://app.example" || !strings.Contains(r.header.Get("Access-Control-Expose-Headers"), "WWW-Authenticate") {
		t.Errorf("a request of an allowed origin: %d %v", r.status, r.header)
	}
	if r := b.call(t, "GET", "/healthz", "", "", "Origin", "https://evil.example"); r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a request of another origin got CORS headers: %v", r.header)
	}
}

// TestKeyLastUseIsBatched checks that using a key writes nothing per request, and that the
// flush records the last use.
func TestKeyLastUseIsBatched(t *testing.T) {
	b := setupAuth(t, server.Options{})
	k := b.key(t, "k", "*", "read", 0)
	for range 20 {
		b.call(t, "GET", "/v1/sessions", bearer(k), "")
	}
	rec, err := b.st.Key(context.Background(), b.ids["k"])
	if err != nil {
		t.Fatal(err)
	}
	if !rec.LastUsedAt.IsZero() {
		t.Errorf("LastUsedAt %v before the flush: a request wrote it", rec.LastUsedAt)
	}
	b.srv.FlushKeyUses()
	if rec, _ = b.st.Key(context.Background(), b.ids["k"]); rec.LastUsedAt.IsZero() || time.Since(rec.LastUsedAt) > time.Minute {
		t.Errorf("LastUsedAt %v after the flush", rec.LastUsedAt)
	}
}

// FuzzAuthorizationHeader sends any Authorization value to a server with authentication: the
// answer is 200 for the one valid key, else 401 with a Bearer challenge; never anything else.
func FuzzAuthorizationHeader(f *testing.F) {
	st, err := sqlite.Open(context.Background(), f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	defer st.Close()
	srv := newServer(f, st, server.Options{Auth: true})
	defer srv.Close()
	secret, _, err := auth.NewKeyring(st, auth.KeyringOptions{}).Create(context.Background(), auth.KeySpec{Project: "*", Scopes: auth.AllScopes})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"Bearer " + secret, "bearer " + secret, "Bearer " + secret[:20], "Bearer sk_", "Basic x", "Bearer a.b.c", "", "Bearer  " + secret} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		req := httptest.NewRequest("GET", "/v1/whoami", nil)
		req.Header["Authorization"] = []string{h}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if tok, ok := auth.BearerToken(h); ok && tok == secret {
			if w.Code != 200 {
				t.Fatalf("the valid key in %q: %d %s", h, w.Code, w.Body)
			}
			return
		}
		if w.Code != 401 || !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("Authorization %q: %d %s", h, w.Code, w.Body)
		}
	})
}

// fakeIdP verifies "oidc-<project>-<scopes>" tokens: the server's use of a TokenVerifier,
// apart from OIDC itself (auth's TestOIDC).
type fakeIdP struct{}

func (fakeIdP) Verify(_ context.Context, raw string) (auth.Principal, error) {
	parts := strings.Split(raw, "-")
	if len(parts) != 3 || parts[0] != "oidc" {
		return auth.Principal{}, fmt.Errorf("bad token")
	}
	set, err := auth.ParseScopes(parts[2])
	if err != nil {
		return auth.Principal{}, err
	}
	return auth.Principal{Subject: "oidc:bob", Project: parts[1], Scopes: set}, nil
}

// TestTokenVerifier checks that a bearer token that is not a key goes to Options.Tokens.
func TestTokenVerifier(t *testing.T) {
	b := setupAuth(t, server.Options{Tokens: fakeIdP{}})
	if r := b.call(t, "GET", "/v1/whoami", "Bearer oidc-alpha-read", ""); r.status != 200 || !strings.Contains(r.body, `"subject":"oidc:bob"`) {
		t.Errorf("a good token: %d %s", r.status, r.body)
	}
	if r := b.call(t, "GET", "/v1/keys", "Bearer oidc-alpha-read", ""); r.status != 403 {
		t.Errorf("a token without admin on an admin route: %d %s", r.status, r.body)
	}
	if r := b.call(t, "GET", "/v1/whoami", "Bearer forged", ""); r.status != 401 {
		t.Errorf("a bad token: %d %s", r.status, r.body)
	}
	// A token's holder gets a stream token too (derived, not chained to a key).
	if r := b.call(t, "POST", "/v1/sessions", "Bearer oidc-alpha-append", `{"session_id":"S-o","project":"alpha","agent_id":"a","role":"implementer","snapshot":{"mode":"work","modelId":"m","capabilities":{}}}`); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	r := b.call(t, "POST", "/v1/sessions/S-o/stream-token", "Bearer oidc-alpha-read", "")
	if r.status != 201 {
		t.Fatalf("stream-token: %d %s", r.status, r.body)
	}
	url := regexp.MustCompile(`"url":"([^"]+)"`).FindStringSubmatch(r.body)[1]
	if r := b.call(t, "GET", url, "", ""); r.status != 200 {
		t.Errorf("the stream with an OIDC holder's token: %d %s", r.status, r.body)
	}
}

// TestForksStayInTheProject forks and continues a session of project "bench" with a key of
// that project: the new threads are in "bench"; a key of another project cannot reach the
// source (404, as for a missing session).
func TestForksStayInTheProject(t *testing.T) {
	b := setup(t, server.Options{Auth: true})
	kr := auth.NewKeyring(b.st, auth.KeyringOptions{})
	key, _, err := kr.Create(context.Background(), auth.KeySpec{Project: "bench", Scopes: auth.AllScopes})
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := kr.Create(context.Background(), auth.KeySpec{Project: "other", Scopes: auth.AllScopes})
	if err != nil {
		t.Fatal(err)
	}
	b.authz = "Bearer " + key
	r := forkSource(t, b, "S-src")
	status, res := b.command(t, "S-src", "fork", "", "fork-p", r.last(), forkPayload("S-src", "a2", "r2", excludeAll), "")
	if status != 200 || res.Outcome != "accepted" {
		t.Fatalf("fork: %d %+v", status, res)
	}
	cont := `{"idempotencyKey":"cont-p","sourceMessageId":"a2","sourceRunId":"r2","inheritance":` + excludeAll + `}`
	if resp := b.do(t, "POST", "/v1/sessions/S-src/continuations", "", cont); resp.status >= 300 {
		t.Fatalf("continuation: %d %s", resp.status, resp.body)
	}
	list, _, err := b.st.ListSessions(context.Background(), store.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) < 3 {
		t.Fatalf("%d sessions, want the source, the fork's thread and the continuation", len(list))
	}
	for _, s := range list {
		if s.Record.Project.Get() != "bench" {
			t.Errorf("session %s is in project %q, want bench", s.Record.SessionID, s.Record.Project.Get())
		}
	}
	b.authz = "Bearer " + other
	if resp := b.do(t, "POST", "/v1/sessions/S-src/continuations", "", strings.Replace(cont, "cont-p", "cont-o", 1)); resp.status != 404 {
		t.Errorf("continuation with a key of another project: %d %s, want 404", resp.status, resp.body)
	}
}
