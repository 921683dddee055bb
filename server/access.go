package server

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/auth"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
)

// Authentication and authorization (docs/security.md). Every route of the table declares its
// rule ([access]); the guard applies it before anything else of the request is looked at, so
// an unauthenticated caller learns nothing about parameters or sessions. A route without a
// rule does not register (New panics), and the authorization matrix test enumerates the
// table.

// access is a route's authorization rule.
type access struct {
	// public: no credential needed (health, the OpenAPI document, the web UI's files).
	public bool
	// scope is the scope a caller needs.
	scope auth.Scope
	// global: the route acts across projects (sweep, archive upload and restore, metrics),
	// so it needs a key for every project.
	global bool
	// token: the route takes a stream token in ?token= (EventSource cannot send headers).
	token bool
	// stream: the route holds a long-lived stream; each key may hold at most
	// Options.MaxStreamsPerKey of them at once.
	stream bool
}

// declared reports whether the rule was written at all (the zero rule is not a rule).
func (a access) declared() bool { return a.public || a.scope != "" }

// The rules of the route table.
var (
	publicRoute  = access{public: true}
	readRoute    = access{scope: auth.ScopeRead}
	appendRoute  = access{scope: auth.ScopeAppend}
	commandRoute = access{scope: auth.ScopeCommand}
	adminRoute   = access{scope: auth.ScopeAdmin}
	globalAdmin  = access{scope: auth.ScopeAdmin, global: true}
)

// cookieName is the web UI's login cookie (POST /v1/login).
const cookieName = "sessiond_login"

// principalKey is the context key of the request's principal.
type principalKey struct{}

// withPrincipal returns ctx carrying p: as the request's principal, and as the scope the
// session service authorizes every id it resolves against ([session.Permits]).
func withPrincipal(ctx context.Context, p auth.Principal) context.Context {
	return session.WithScope(context.WithValue(ctx, principalKey{}, p), p)
}

// principalOf returns the principal the request acts as (auth.Anonymous without
// authentication).
func principalOf(ctx context.Context) auth.Principal {
	if p, ok := ctx.Value(principalKey{}).(auth.Principal); ok {
		return p
	}
	return auth.Anonymous
}

// TokenVerifier verifies bearer tokens that are not API keys (OIDC, [auth.OIDC]).
type TokenVerifier interface {
	Verify(ctx context.Context, raw string) (auth.Principal, error)
}

// authn is the server's authentication state.
type authn struct {
	on      bool
	keys    *auth.Keyring
	tokens  TokenVerifier
	limit   rate.Limit
	burst   int
	streams int // per key; 0: no limit
	origins map[string]bool
	watch   *credentialWatch // the credentials of the open streams (revocation.go)

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
	open     map[string]int // open streams per key
}

func newAuthn(opt Options, keys *auth.Keyring) *authn {
	a := &authn{on: opt.Auth, keys: keys, tokens: opt.Tokens, streams: opt.MaxStreamsPerKey,
		origins: map[string]bool{}, limiters: map[string]*rate.Limiter{}, open: map[string]int{},
		watch: newCredentialWatch(keys, opt.Logger)}
	if opt.RateLimit > 0 {
		a.limit = rate.Limit(opt.RateLimit)
		a.burst = opt.RateBurst
		if a.burst <= 0 {
			a.burst = int(math.Ceil(2 * opt.RateLimit))
		}
	}
	for _, o := range opt.CORSOrigins {
		a.origins[o] = true
	}
	return a
}

// unauthenticated answers 401 with the WWW-Authenticate challenge of RFC 6750.
func unauthenticated(w http.ResponseWriter, errCode, msg string) {
	ch := `Bearer realm="sessiond"`
	if errCode != "" {
		ch += `, error="` + errCode + `"`
	}
	w.Header().Set("WWW-Authenticate", ch)
	writeError(w, api.Errorf(api.CodeUnauthenticated, "%s", msg))
}

// authenticate finds the request's credential and returns its principal; on refusal it has
// answered and returns false.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, rt route) (auth.Principal, bool) {
	a := s.authn
	raw, fromCookie, fromQuery := "", false, false
	if h := r.Header.Values("Authorization"); len(h) > 0 {
		tok, ok := auth.BearerToken(h[0])
		if len(h) > 1 || !ok {
			unauthenticated(w, "invalid_request", "the Authorization header must be one \"Bearer <key>\"; see docs/security.md")
			return auth.Principal{}, false
		}
		raw = tok
	} else if rt.access.token && r.URL.Query().Has("token") {
		raw, fromQuery = r.URL.Query().Get("token"), true
	} else if c, err := r.Cookie(cookieName); err == nil && c.Value != "" {
		raw, fromCookie = c.Value, true
	}
	if raw == "" {
		unauthenticated(w, "", "this server requires a credential: send Authorization: Bearer <key> (make one with sessiond keys create); see docs/security.md")
		return auth.Principal{}, false
	}
	var (
		p   auth.Principal
		err error
	)
	switch {
	case auth.LooksLikeKey(raw):
		p, err = a.keys.Verify(r.Context(), raw)
	case a.tokens != nil && !fromQuery:
		p, err = a.tokens.Verify(r.Context(), raw)
		if p.Owner == "" {
			p.Owner = p.Subject // what its limits count against and its derived keys chain to
		}
	default:
		err = auth.ErrInvalidKey
	}
	if err != nil {
		switch {
		case errors.Is(err, auth.ErrRevokedKey), errors.Is(err, auth.ErrExpiredKey):
			unauthenticated(w, "invalid_token", err.Error()+"; ask for a new key")
		case errors.Is(err, auth.ErrTokenClaims):
			writeError(w, api.Errorf(api.CodeForbidden, "%v; see docs/security.md, \"OIDC\"", err))
		case !errors.Is(err, auth.ErrInvalidKey) && auth.LooksLikeKey(raw):
			// A store failure while looking the key up, not the caller's fault.
			s.requestLogger(w).Error("key lookup failed", "err", err)
			writeError(w, api.Errorf(api.CodeUnavailable, "the key could not be checked (the store failed); retry the request"))
		default:
			unauthenticated(w, "invalid_token", "the credential is not valid")
		}
		return auth.Principal{}, false
	}
	if fromQuery && p.Session == "" {
		// Never a long-lived key in a URL: it ends up in logs and browser history.
		unauthenticated(w, "invalid_request", "?token= takes only a stream token (POST /v1/sessions/{id}/stream-token); send a key in the Authorization header")
		return auth.Principal{}, false
	}
	if fromCookie && !safeMethod(r.Method) && !sameOrigin(r) {
		writeError(w, api.Errorf(api.CodeForbidden, "a request authenticated by the login cookie must come from this server's own origin"))
		return auth.Principal{}, false
	}
	return p, true
}

// safeMethod reports whether m reads only.
func safeMethod(m string) bool { return m == http.MethodGet || m == http.MethodHead }

// sameOrigin reports whether a browser says the request comes from the server's own origin
// (Sec-Fetch-Site, else Origin against Host).
func sameOrigin(r *http.Request) bool {
	if sfs := r.Header.Get("Sec-Fetch-Site"); sfs != "" {
		return sfs == "same-origin"
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return false
	}
	return o == "http://"+r.Host || o == "https://"+r.Host
}

// authorize applies rt's rule to the request: authentication, scope, project reach and rate
// limit. It answers the refusal itself and returns false, or returns the principal.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, rt route) (auth.Principal, bool) {
	if rt.access.public || !s.authn.on {
		return auth.Anonymous, true
	}
	p, ok := s.authenticate(w, r, rt)
	if !ok {
		return p, false
	}
	if sw, ok := w.(*statusWriter); ok {
		sw.actor = p.Subject
	}
	if p.Session != "" && !rt.access.token {
		writeError(w, api.Errorf(api.CodeForbidden, "a stream token opens only its session's event stream (GET /v1/sessions/%s/events/stream); send a key for %s", p.Session, rt.pattern))
		return p, false
	}
	if !p.Scopes.Has(rt.access.scope) {
		writeError(w, api.Errorf(api.CodeForbidden, "%s needs the %s scope; this credential has %s", rt.pattern, rt.access.scope, p.Scopes))
		return p, false
	}
	if rt.access.global && !p.AllProjects() {
		writeError(w, api.Errorf(api.CodeForbidden, "%s acts on every project; it needs a key of project \"*\", and this one is of project %q", rt.pattern, p.Project))
		return p, false
	}
	if p.Session != "" && r.PathValue("id") != p.Session {
		writeError(w, api.Errorf(api.CodeForbidden, "this token is for session %q only", p.Session))
		return p, false
	}
	if wait, ok := s.authn.allow(p); !ok {
		retryAfter(w, wait)
		writeError(w, api.Errorf(api.CodeRateLimited, "%s is over its rate of %g requests a second; retry after %s", ownerName(p), float64(s.authn.limit), w.Header().Get("Retry-After")+"s"))
		return p, false
	}
	return p, true
}

func retryAfter(w http.ResponseWriter, d time.Duration) {
	secs := int(math.Ceil(d.Seconds()))
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
}

// limiterKey is what a principal's limits count against: its root key, or the OIDC subject
// its token or key comes from (auth.Principal.Owner).
func limiterKey(p auth.Principal) string {
	if p.Owner != "" {
		return p.Owner
	}
	return p.Subject
}

// ownerName names what p's limits count against, for a refusal: "key <id>" or the subject.
func ownerName(p auth.Principal) string {
	if k := limiterKey(p); !auth.ValidKeyID(k) {
		return k
	}
	return "key " + limiterKey(p)
}

// allow takes one request from p's rate; it returns false and how long to wait when there is
// none left.
func (a *authn) allow(p auth.Principal) (time.Duration, bool) {
	if a.limit <= 0 {
		return 0, true
	}
	k := limiterKey(p)
	a.mu.Lock()
	l := a.limiters[k]
	if l == nil {
		if len(a.limiters) >= 100000 {
			clear(a.limiters) // bounded: a key's state restarts full
		}
		l = rate.NewLimiter(a.limit, a.burst)
		a.limiters[k] = l
	}
	a.mu.Unlock()
	res := l.Reserve()
	if d := res.Delay(); d > 0 {
		res.Cancel()
		return d, false
	}
	return 0, true
}

// openStream counts a stream of p and watches its credential, whose lapse ends the stream
// (revocation.go; the returned context carries the watch to the stream's writer); it returns
// false when p holds its maximum already. The returned func ends the count and the watch.
func (a *authn) openStream(ctx context.Context, p auth.Principal) (context.Context, func(), bool) {
	if !a.on {
		return ctx, func() {}, true
	}
	uncount, ok := a.countStream(p)
	if !ok {
		return ctx, nil, false
	}
	w, unwatch := a.watch.watch(p)
	return context.WithValue(ctx, streamWatchKey{}, w), func() { unwatch(); uncount() }, true
}

// countStream counts a stream of p; it returns false when p holds its maximum already. The
// returned func ends the count.
func (a *authn) countStream(p auth.Principal) (func(), bool) {
	if a.streams <= 0 {
		return func() {}, true
	}
	k := limiterKey(p)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.open[k] >= a.streams {
		return nil, false
	}
	a.open[k]++
	return func() {
		a.mu.Lock()
		if a.open[k]--; a.open[k] <= 0 {
			delete(a.open, k)
		}
		a.mu.Unlock()
	}, true
}

// checkSession answers 404, exactly as for a missing session, when the route's session is
// not one the principal may see ([session.Permits], the one decision, which the session
// service also asks for every id it resolves from a body); it returns false then. For a
// principal limited to a project or a session, a missing session is answered here too,
// before the body is looked at, so that a missing session and another project's answer the
// same whatever the request holds.
func (s *Server) checkSession(w http.ResponseWriter, r *http.Request, p auth.Principal) bool {
	id := r.PathValue("id")
	if id == "" || p.AllProjects() && p.Session == "" {
		return true
	}
	project, err := s.sessionProject(r.Context(), id)
	if err != nil && !errors.Is(err, store.ErrSessionNotFound) {
		writeError(w, storeError(err, id))
		return false
	}
	if err != nil || !session.Permits(r.Context(), id, project) {
		writeError(w, storeError(store.ErrSessionNotFound, id))
		return false
	}
	return true
}

// sessionProject returns a session's project ("" for none); a session's project never
// changes, so it is cached.
func (s *Server) sessionProject(ctx context.Context, id string) (string, error) {
	s.projMu.Lock()
	p, ok := s.projects[id]
	s.projMu.Unlock()
	if ok {
		return p, nil
	}
	p, err := s.svc.Project(ctx, id)
	if err != nil {
		return "", err
	}
	s.projMu.Lock()
	if len(s.projects) >= 100000 {
		clear(s.projects)
	}
	s.projects[id] = p
	s.projMu.Unlock()
	return p, nil
}

// projectFilter returns the project a list, feed, archive list or claim of the request's
// principal is limited to: the one asked for (any for a key of every project), else the
// key's own; asking for another project is refused.
func projectFilter(r *http.Request, asked string) (string, *api.Error) {
	p := principalOf(r.Context())
	switch {
	case p.AllProjects():
		return asked, nil
	case asked == "" || asked == p.Project:
		return p.Project, nil
	}
	return "", api.Errorf(api.CodeForbidden, "this credential may act only on project %q, not %q; ask for project %q or leave project out", p.Project, asked, p.Project)
}

// checkCreateProject refuses to create, with a key of one project, a session of another.
func checkCreateProject(r *http.Request, body []byte) *api.Error {
	p := principalOf(r.Context())
	if p.AllProjects() {
		return nil
	}
	var b struct {
		Project *string `json:"project"`
	}
	if json.Unmarshal(body, &b) != nil {
		return nil // not JSON: the service says what is wrong with it
	}
	if b.Project == nil || *b.Project != p.Project {
		return api.Errorf(api.CodeForbidden, "this credential creates sessions of project %q only; give \"project\":%q in the body", p.Project, p.Project)
	}
	return nil
}

// cors answers a CORS preflight, or sets the CORS headers of an answer to an allowed origin.
// It returns true when it answered (a preflight).
func (s *Server) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || len(s.authn.origins) == 0 {
		return false
	}
	allowed := s.authn.origins[origin]
	h := w.Header()
	h.Add("Vary", "Origin")
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	if !allowed {
		if preflight {
			writeError(w, api.Errorf(api.CodeForbidden, "origin %s is not allowed; start the server with --cors-origin %s to allow it", quote(origin), quote(origin)))
			return true
		}
		return false
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Expose-Headers", "X-Request-Id, Retry-After, WWW-Authenticate, ETag, Location, Sessiond-Last-Sequence")
	if !preflight {
		return false
	}
	h.Add("Vary", "Access-Control-Request-Method")
	h.Add("Vary", "Access-Control-Request-Headers")
	method := r.Header.Get("Access-Control-Request-Method")
	probe := r.Clone(r.Context())
	probe.Method = method
	if _, p := s.mux.Handler(probe); p == "" {
		writeError(w, api.Errorf(api.CodeMethodNotAllowed, "%s is not allowed on %s", quote(method), quote(r.URL.Path)))
		return true
	}
	h.Set("Access-Control-Allow-Methods", method)
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID, Idempotency-Key, Sessiond-Lease, X-Request-Id, If-None-Match, Accept")
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// startKeyFlusher writes the keys' last uses every interval until the server closes, and
// starts the watch of the open streams' credentials (revocation.go).
func (s *Server) startKeyFlusher() {
	if !s.authn.on {
		return
	}
	s.sweeper.Add(1)
	go func() {
		defer s.sweeper.Done()
		s.authn.watch.run(s.shutdown)
	}()
	flush := func(d time.Duration) func() {
		return func() {
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			s.flushKeys(ctx)
		}
	}
	s.every(keyFlushInterval, flush(time.Minute), flush(5*time.Second))
}

// keyFlushInterval is how often the keys' last uses are written: one write for every key
// used in the interval, never one per request.
const keyFlushInterval = 10 * time.Second

func (s *Server) flushKeys(ctx context.Context) {
	if err := s.authn.keys.FlushUses(ctx); err != nil {
		s.opt.Logger.Warn("record the keys' last use; retrying at the next interval", "err", err)
	}
}
