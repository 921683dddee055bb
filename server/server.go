package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/auth"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/search"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/web"
)

// Options configure a [Server]. Zero fields take the defaults documented on each field.
type Options struct {
	// MaxBodyBytes bounds a request body (default 16 MiB).
	MaxBodyBytes int64
	// MaxArchiveBytes bounds an archive file uploaded to POST /v1/archives (default 256 MiB).
	// The upload is streamed to a temporary file, then verified whole: one upload at a time.
	MaxArchiveBytes int64
	// MaxEventBytes bounds one event (default contract.DefaultMaxBytes, 1 MiB).
	MaxEventBytes int
	// KeepAlive is the interval of SSE keep-alive comments (default 15s).
	KeepAlive time.Duration
	// WriteTimeout bounds one SSE write; a subscriber that cannot take a write for this long
	// is cut off (default 10s). The deadline is moved at most every WriteTimeout/8, so a
	// write may be cut off after 7/8 of it.
	WriteTimeout time.Duration
	// MaxLag is how far (in events) a live subscriber may fall behind the head of its session
	// before it is cut off with a final error message (default 10000).
	MaxLag int64
	// RingSize is how many recent events per watched session (one with a live subscriber)
	// are kept in memory, encoded, for live subscribers (default 1024: about 0.5 MiB for
	// 500-byte events). A subscriber further behind reads from the store.
	RingSize int
	// Logger receives request and lifecycle logs (default: discard).
	Logger *slog.Logger
	// Metrics are the Prometheus metrics the server records and serves at GET /metrics
	// (default: a fresh set, [NewMetrics]). Pass the same ones to the store driver through
	// [Metrics.StoreObserver] to have its group commits and syncs measured too.
	Metrics *Metrics
	// DisableMetrics records no metrics (GET /metrics answers NOT_CONFIGURED): for the
	// benchmark that measures what metrics cost.
	DisableMetrics bool
	// HeaderTimeout bounds the arrival of a request's line and headers (default 10s;
	// [Server.HTTPServer]).
	HeaderTimeout time.Duration
	// BodyTimeout bounds the arrival of a request body, per started 16 MiB of it (default 60s):
	// a body that does not arrive in time is answered 408 REQUEST_TIMEOUT. It is set when the
	// handler starts and lifted once the body is read, so it never cuts off a stream.
	BodyTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that has no request for this long (default
	// 120s; [Server.HTTPServer]).
	IdleTimeout time.Duration
	// MaxInflightBodyBytes bounds the request bodies read at once, counted by their
	// Content-Length (MaxBodyBytes when it is not known), default 128 MiB: a request that
	// finds no room within BodyQueueWait is answered 503 OVERLOADED with Retry-After. Archive
	// uploads are outside it (streamed to a file, one at a time).
	MaxInflightBodyBytes int64
	// MaxInflightBodyBytesPerClient bounds the part of MaxInflightBodyBytes one client may
	// hold: one key (a derived credential counts as its root) or OIDC subject, or one client
	// address without authentication (default a quarter of MaxInflightBodyBytes). A request
	// over it that finds no room within BodyQueueWait is answered 429 RATE_LIMITED with
	// Retry-After, so that one client's stalled bodies never hold every other client's writes
	// off. A body larger than it is taken alone.
	MaxInflightBodyBytesPerClient int64
	// BodyQueueWait is how long a request waits for room in MaxInflightBodyBytes (default 2s).
	BodyQueueWait time.Duration
	// ProgressInterval is the least time between two progress lines of archive and restore,
	// and before the first one (default 200ms; docs/api.md, "Progress of archive and
	// restore").
	ProgressInterval time.Duration

	// Search is the driver's search index (store/sqlite and store/postgres: Store.Search);
	// the server keeps it up to date with an indexer of its own (started by New, stopped by
	// Close) and answers GET /v1/search from it. Nil: no search (GET /v1/search answers
	// NOT_CONFIGURED).
	Search search.Backend

	// Auth turns authentication on: every route but the public ones (health, the OpenAPI
	// document, the web UI's files) needs an API key, a token of Tokens, a stream token or the
	// web UI's login cookie, with the route's scope (docs/security.md). Off, every request acts
	// with every scope on every project, as a loopback server without set-up does.
	Auth bool
	// Tokens, when set, verifies the bearer tokens that are not API keys (OIDC).
	Tokens TokenVerifier
	// RateLimit is the sustained request rate each key (a derived key counts as its parent)
	// may make, per second; 0 sets no limit. RateBurst is the burst above it (default twice
	// the rate). Over it, requests answer 429 RATE_LIMITED with Retry-After.
	RateLimit float64
	RateBurst int
	// MaxStreamsPerKey bounds the event streams and change feeds each key may hold open at
	// once (0: no bound); one more answers 429 RATE_LIMITED with Retry-After.
	MaxStreamsPerKey int
	// CORSOrigins are the browser origins ("https://app.example.com") allowed to call the
	// API from their pages; none by default.
	CORSOrigins []string
	// StreamTokenTTL is the lifetime of a stream token (default 5m); LoginTTL the lifetime of
	// the web UI's login cookie (default 12h). Neither outlives the key it comes from.
	StreamTokenTTL time.Duration
	LoginTTL       time.Duration
	// AllowedHosts, when not empty, are the only host names (the Host header without its port;
	// IPv6 addresses without brackets) the server answers: a request for any other is refused
	// 403 FORBIDDEN before anything else. sessiond serve sets it on a loopback server without
	// authentication, which a page of another site could otherwise reach by DNS rebinding
	// (its own name resolved to 127.0.0.1), to localhost, 127.0.0.1, ::1, the listen host and
	// serve --allowed-hosts.
	AllowedHosts []string
	// CookieSecure marks the login cookie Secure on every request, not only on those that came
	// over TLS: for TLS ended by a proxy in front, which forwards plain HTTP.
	CookieSecure bool
}

func (o Options) withDefaults() Options {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 16 << 20
	}
	if o.MaxArchiveBytes <= 0 {
		o.MaxArchiveBytes = DefaultMaxArchiveBytes
	}
	if o.MaxEventBytes <= 0 {
		o.MaxEventBytes = contract.DefaultMaxBytes
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.MaxLag <= 0 {
		o.MaxLag = 10000
	}
	if o.RingSize <= 0 {
		o.RingSize = 1024
	}
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = DefaultHeaderTimeout
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxInflightBodyBytes <= 0 {
		o.MaxInflightBodyBytes = DefaultMaxInflightBodyBytes
	}
	if o.MaxInflightBodyBytesPerClient <= 0 {
		o.MaxInflightBodyBytesPerClient = o.MaxInflightBodyBytes / 4
	}
	if o.BodyQueueWait <= 0 {
		o.BodyQueueWait = DefaultBodyQueueWait
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = 200 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.StreamTokenTTL <= 0 {
		o.StreamTokenTTL = 5 * time.Minute
	}
	if o.LoginTTL <= 0 {
		o.LoginTTL = 12 * time.Hour
	}
	switch {
	case o.DisableMetrics:
		o.Metrics = nil
	case o.Metrics == nil:
		o.Metrics = NewMetrics()
	}
	return o
}

// DefaultMaxArchiveBytes is the default of Options.MaxArchiveBytes.
const DefaultMaxArchiveBytes = 256 << 20

// Server serves the v1 HTTP API over a session service. Create it with [New]; it is an
// http.Handler.
//
// The server reaches the store only through the session service, but for transport: the live
// stream hub and the change feed subscribe to the store's commit notifications and read
// committed events (New), and the keyring keeps API keys in it.
type Server struct {
	svc      *session.Service
	opt      Options
	hub      *hub
	feed     *feed // the change feed (feed.go)
	mux      *http.ServeMux
	closing  atomic.Bool
	stopSub  func()
	shutdown chan struct{}
	streamMu sync.Mutex      // orders streams.Add against Close's streams.Wait
	streams  sync.WaitGroup  // streams on connections taken over from net/http
	sweeper  sync.WaitGroup  // the server's background work: the key flusher (keys.go)
	life     context.Context // ends when the server closes: ends waiting claims (workers.go)
	endLife  context.CancelFunc
	// metricsHandler serves GET /metrics; nil without metrics.
	metricsHandler http.Handler
	reqPrefix      string        // the process's prefix of generated request ids
	reqSeq         atomic.Uint64 // the counter of generated request ids
	uploads        chan struct{} // one slot: the archive upload being verified (lifecycle.go)
	bodies         *bodyBudget   // the request body bytes in flight (transport.go)
	authn          *authn        // authentication state (access.go)
	keys           *auth.Keyring
	projMu         sync.Mutex
	projects       map[string]string // session id -> project, for the project check (access.go)
	search         *searcher         // the search index and its indexer (search.go); nil without
}

// New returns a server of the session service svc, which its owner made (session.New) and
// whose background work (sweeper, lease expirer, retention) its owner starts and stops
// (session.Service.Start, Close); the server records that work's passes in its metrics. Call
// Close when done, before closing the service and its store.
func New(svc *session.Service, opt Options) *Server {
	s := &Server{opt: opt.withDefaults(), mux: http.NewServeMux(), shutdown: make(chan struct{}), uploads: make(chan struct{}, 1)}
	s.life, s.endLife = context.WithCancel(context.Background())
	s.bodies = newBodyBudget(s.opt.MaxInflightBodyBytes, s.opt.MaxInflightBodyBytesPerClient, s.opt.MaxBodyBytes, s.opt.BodyQueueWait)
	s.svc = svc
	st := svc.Store()
	s.hub = newHub(s.opt.RingSize)
	s.reqPrefix = newRequestIDPrefix()
	if s.opt.Metrics != nil {
		s.metricsHandler = s.opt.Metrics.Handler()
		s.svc.OnStored(s.opt.Metrics.stored)
		pol := svc.Options().Retention
		s.svc.OnPass(func(p session.Pass) { s.opt.Metrics.pass(p, pol) })
		s.opt.Metrics.observeStore(st)
	}
	s.keys = auth.NewKeyring(st, auth.KeyringOptions{Now: svc.Now})
	s.authn = newAuthn(s.opt, s.keys)
	s.projects = map[string]string{}
	s.stopSub = st.Subscribe(s.hub.publish)
	s.feed = newFeed(st, feedRing, s.opt.Logger)
	s.register(s.routes())
	s.startKeyFlusher()
	s.startSearch(st)
	return s
}

// routes is the API's route table, from which the router is built: each endpoint with the
// query parameters it knows and the media types its body may have (see [route]).
func (s *Server) routes() []route {
	return append([]route{
		{pattern: "GET /healthz", access: publicRoute, handle: s.handleHealth},
		{pattern: "GET /readyz", access: publicRoute, handle: s.handleReady},
		{pattern: "GET /v1/openapi.json", access: publicRoute, handle: handleOpenAPI},
		{pattern: "GET /metrics", access: globalAdmin, handle: s.handleMetrics},
		{pattern: "POST /v1/sessions", access: appendRoute, handle: s.handleCreateSession, body: jsonBody},
		{pattern: "GET /v1/sessions", access: readRoute, handle: s.handleListSessions, query: []string{"status", "agent", "project", "after", "limit"}},
		{pattern: "GET /v1/sessions/{id}", access: readRoute, handle: s.handleGetSession},
		{pattern: "PATCH /v1/sessions/{id}", access: adminRoute, handle: s.handlePatchSession, body: jsonBody},
		{pattern: appendPattern, access: appendRoute, handle: s.handleAppend, query: []string{"expectedSequence", "multitask"}, body: eventsBody},
		{pattern: "GET /v1/sessions/{id}/events", access: readRoute, handle: s.handleReadEvents, query: []string{"after", "limit"}},
		{pattern: exportPattern, access: readRoute, handle: s.handleExport, query: []string{"after"}},
		{pattern: "GET /v1/sessions/{id}/events/stream", access: access{scope: auth.ScopeRead, token: true, stream: true}, handle: s.handleStream, query: []string{"after", "tail", "token"}},
		{pattern: "GET /v1/sessions/{id}/runs", access: readRoute, handle: s.handleRuns},
		{pattern: "GET /v1/sessions/{id}/runs/{runId}", access: readRoute, handle: s.handleRun},
		{pattern: "POST /v1/sessions/{id}/commands", access: commandRoute, handle: s.handleCommand, query: []string{"wait"}, body: jsonBody},
		{pattern: "GET /v1/sessions/{id}/view", access: readRoute, handle: s.handleView},
		{pattern: "GET /v1/sessions/{id}/transcript", access: readRoute, handle: s.handleTranscript},
		{pattern: "POST /v1/sessions/{id}/continuations", access: commandRoute, handle: s.handleContinuation, body: jsonBody},
		{pattern: "GET /v1/sessions/{id}/lineage", access: readRoute, handle: s.handleLineage},
		{pattern: "GET /v1/search", access: readRoute, handle: s.handleSearch, query: searchQuery},
		{pattern: "GET /v1/events/stream", access: access{scope: auth.ScopeRead, stream: true}, handle: s.handleChangeStream, query: []string{"project", "agent", "after"}},
		// The web UI (package web): the page, and its static files and policy table.
		{pattern: "POST /v1/sessions/{id}/stream-token", access: readRoute, handle: s.handleStreamToken},
		{pattern: "POST /v1/login", access: readRoute, handle: s.handleLogin},
		{pattern: "POST /v1/logout", access: publicRoute, handle: s.handleLogout},
		{pattern: "GET /v1/whoami", access: readRoute, handle: s.handleWhoami},
		{pattern: "GET /v1/keys", access: adminRoute, handle: s.handleListKeys},
		{pattern: "POST /v1/keys", access: adminRoute, handle: s.handleCreateKey, body: jsonBody},
		{pattern: "GET /v1/keys/{keyId}", access: adminRoute, handle: s.handleGetKey},
		{pattern: "POST /v1/keys/{keyId}/revoke", access: adminRoute, handle: s.handleRevokeKey},
		{pattern: "GET /{$}", access: publicRoute, handle: web.ServeIndex},
		{pattern: "GET /ui/{file...}", access: publicRoute, handle: web.ServeAsset},
	}, append(append(append(s.lifecycleRoutes(), s.workerRoutes()...), s.bridgeRoutes()...), s.usageRoutes()...)...)
}

// ServeHTTP implements http.Handler. A panic in a handler is turned into a 500 and logged, so
// one bad request never takes the process down. Every request gets a request id (the client's
// X-Request-Id when it is a fit one, else a new one), sent back in X-Request-Id and put on
// every log line of the request; every answer is counted in the metrics by route pattern and
// status (requestlog.go).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r = withTLSState(r)
	_, pattern := s.mux.Handler(r)
	id := s.requestID(r.Header.Get(requestIDHeader))
	w.Header().Set(requestIDHeader, id)
	sw := &statusWriter{ResponseWriter: w}
	start := time.Now()
	defer s.finish(sw, r, pattern, id, start)
	s.serve(sw, r, pattern)
}

// serve answers r; pattern is the route that matched it ("" for none).
func (s *Server) serve(w http.ResponseWriter, r *http.Request, pattern string) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.requestLogger(w).Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", v)
			writeError(w, api.Errorf(contract.CodeInternal, "internal error; the server logged it"))
		}
	}()
	if !s.hostAllowed(r.Host) {
		writeError(w, api.Errorf(contract.CodeForbidden, "this server answers requests for %s only, and this one is for Host %s: without --auth it refuses other names, so that a page of another site that points its own name at this address (DNS rebinding) cannot reach it; use one of those names, or start serve with --allowed-hosts %s", strings.Join(s.opt.AllowedHosts, ", "), quote(r.Host), quote(hostName(r.Host))))
		return
	}
	if s.cors(w, r) {
		return
	}
	if s.closing.Load() && r.URL.Path != "/healthz" {
		writeError(w, api.Errorf(contract.CodeUnavailable, "the server is shutting down; retry against another instance or after restart"))
		return
	}
	// The mux answers unknown paths and methods with plain text; keep errors in one shape.
	if pattern == "" {
		var allowed []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPatch} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, p := s.mux.Handler(probe); p != "" {
				allowed = append(allowed, m)
			}
		}
		if len(allowed) == 0 {
			writeError(w, api.Errorf(contract.CodeNotFound, "no endpoint %s %s; see docs/api.md for the API", quote(r.Method), quote(r.URL.Path)))
			return
		}
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeError(w, api.Errorf(contract.CodeMethodNotAllowed, "%s is not allowed on %s; use %s", quote(r.Method), quote(r.URL.Path), strings.Join(allowed, " or ")))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// hostAllowed reports whether host, a request's Host header, names this server
// (Options.AllowedHosts; any host when there is no list).
func (s *Server) hostAllowed(host string) bool {
	if len(s.opt.AllowedHosts) == 0 {
		return true
	}
	name := hostName(host)
	for _, h := range s.opt.AllowedHosts {
		if strings.EqualFold(h, name) {
			return true
		}
	}
	return false
}

// hostName is the name of a Host header: without its port, and an IPv6 address without its
// brackets.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

// Close ends every live stream cleanly and stops new requests (health checks keep answering).
// It returns when the streams have sent their final message (each bounded by the write
// timeout), as http.Server.Shutdown does not wait for streams, whose connections the server
// takes over. It closes neither the session service nor the store.
func (s *Server) Close() {
	if s.closing.Swap(true) {
		return
	}
	close(s.shutdown)
	s.endLife()
	s.stopSearch()
	s.stopSub()
	s.feed.close()
	// A stream that checked closing before it was set has called streams.Add by the time
	// this lock is free; later ones see closing and do not take their connection over.
	s.streamMu.Lock()
	//lint:ignore SA2001 the empty critical section is the barrier described above
	s.streamMu.Unlock()
	s.streams.Wait()
	s.sweeper.Wait()
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if s.closing.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "shutting-down"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "store": s.svc.StoreDriver()})
}

// readyTimeout bounds the store check of a readiness probe.
const readyTimeout = 2 * time.Second

// handleReady answers whether this instance should be sent requests, writes included: 200
// when the store can take writes; 503 when it cannot, with the code of why
// (unavailableError): STORE_FULL (the disk is full, until space is freed), STORE_UNAVAILABLE
// (PostgreSQL cannot be reached or is read-only), STORE_UNWRITABLE (a failed sync of the
// SQLite WAL, until restart; any other refusal); 503 UNAVAILABLE while shutting down
// (answered by serve). /healthz, by contrast, says only that the process answers.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.svc.Ready(ctx); err != nil {
		s.requestLogger(w).Warn("readiness: the store refuses writes", "err", err)
		e := unavailableError(err)
		if e == nil {
			e = api.Errorf(contract.CodeStoreUnwritable, "not ready: the store refuses writes (%v)", err)
		} else {
			e.Message = "not ready: " + e.Message
		}
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "store": s.svc.StoreDriver()})
}

// handleOpenAPI serves the OpenAPI 3.1 description of this API (api/openapi.json).
func handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(api.OpenAPI)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := contract.Marshal(v)
	if err != nil {
		writeError(w, api.Errorf(contract.CodeInternal, "encode response: %v", err))
		return
	}
	writeJSONBytes(w, status, append(b, '\n'))
}

// writeJSONBytes answers with status and b, a JSON document and its newline.
func writeJSONBytes(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func writeError(w http.ResponseWriter, e *api.Error) {
	if sw, ok := w.(*statusWriter); ok {
		sw.errCode = e.Code // for the count of refused appends (Server.finish)
	}
	b, _ := contract.Marshal(api.ErrorBody{Error: e})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if r := contract.RetryFor(e.Code); r.AfterSeconds > 0 && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", strconv.Itoa(r.AfterSeconds))
	}
	w.WriteHeader(api.HTTPStatus(e.Code))
	w.Write(append(b, '\n'))
}

// validationError turns contract problems into a 400 (not acceptable JSON) or 422 (breaks the
// contract) error.
func validationError(what string, probs []contract.Problem) *api.Error {
	e := api.Errorf(contract.ProblemsCode(probs), "%s: %d problem(s) found; see details", what, len(probs))
	e.Details = probs
	return e
}

// queryInt parses an optional integer query parameter within [min, max].
func queryInt(r *http.Request, name string, def, min, max int64) (int64, *api.Error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < min || n > max {
		return 0, api.Errorf(contract.CodeMalformed, "query parameter %s=%s must be an integer from %d to %d", name, quote(v), min, max)
	}
	return n, nil
}

// decodeStrict decodes a small JSON request body into v after checking it is acceptable JSON
// (no duplicate keys, depth and size limits) and has no unknown fields.
func decodeStrict(data []byte, v any) *api.Error {
	if _, err := contract.Parse(data, contract.Limits{}); err != nil {
		var se *contract.SyntaxError
		errors.As(err, &se)
		return validationError("request body", []contract.Problem{{Path: se.Path, Rule: se.Rule, Layer: contract.LayerJSON, Message: se.Msg}})
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return api.Errorf(contract.CodeContractViolation, "request body: %s", jsonErrorText(err))
	}
	return nil
}

func jsonErrorText(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("field %s must be %s, not %s", quote(te.Field), te.Type, te.Value)
	}
	return clip(err)
}

// Service returns the domain service the server executes commands and projections with.
func (s *Server) Service() *session.Service { return s.svc }

// Metrics returns the metrics the server records (nil with Options.DisableMetrics).
func (s *Server) Metrics() *Metrics { return s.opt.Metrics }

// every runs tick every interval in a goroutine of its own (counted in s.sweeper, which Close
// waits for) until Close, then last, when it is not nil. Ticks do not overlap: a tick that
// outlasts the interval delays the next one.
func (s *Server) every(interval time.Duration, tick, last func()) {
	s.sweeper.Add(1)
	go func() {
		defer s.sweeper.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.shutdown:
				if last != nil {
					last()
				}
				return
			case <-t.C:
			}
			tick()
		}
	}()
}
