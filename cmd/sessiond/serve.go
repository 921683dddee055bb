package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres"
	"github.com/sessiond/sessiond/store/sqlite"
)

func init() {
	commands["serve"] = command{summary: "run the server (SQLite in --data by default)", run: runServe,
		about: "Every flag can also be set from the environment, by a variable named after it: SESSIOND_ and the\nflag's name in upper case with '-' as '_' (--max-attempts: SESSIOND_MAX_ATTEMPTS). A flag given on the\ncommand line wins. A SESSIOND_ variable that names no flag (a misspelling) is refused at start."}
}

func runServe(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	cl := newCommandLine("serve", stdout, stderr)
	fs := cl.fs
	addr := fs.String("addr", "127.0.0.1:7420", "address to listen on")
	data := fs.String("data", "./sessiond-data", "data directory of the embedded SQLite store")
	storeURL := fs.String("store", "", "storage: empty for SQLite in --data, or a PostgreSQL URL (postgres://user@host:5432/db?search_path=sessiond) that several instances share")
	allowRemote := fs.Bool("insecure-allow-remote", false, "allow a non-loopback address without --auth (dangerous: anyone who reaches it can read and write everything)")
	a := addAuthFlags(fs)
	var allowedHosts stringList
	fs.Var(&allowedHosts, "allowed-hosts", "without --auth, also answer requests whose Host is this name (besides localhost, 127.0.0.1, ::1 and the --addr host); repeatable. Requests for other names are refused 403, against DNS rebinding")
	shutdownTimeout := fs.Duration("shutdown-timeout", 10*time.Second, "how long to wait for in-flight requests on shutdown")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	logFormat := fs.String("log-format", "text", "log format: text (logfmt key=value lines) or json (one JSON object a line)")
	adminAddr := fs.String("admin-addr", "", "serve Go's pprof profiles (/debug/pprof/) on this address, e.g. 127.0.0.1:9421; off by default, never on the API listener")
	metricsAddr := fs.String("metrics-addr", "", "also serve the Prometheus metrics (GET /metrics) on this address, e.g. 127.0.0.1:9420; they are always on the API listener")
	staleAfter := fs.Duration("stale-after", session.DefaultStaleAfter, "heartbeat TTL: running and paused sessions silent for longer are marked stale (and their active run failed)")
	sweepInterval := fs.Duration("sweep-interval", 30*time.Second, "how often the stale sweeper runs (0 disables it)")
	archiveDir := fs.String("archive-dir", "", archiveDirFlagUsage+": the archive endpoints then answer 501 NOT_CONFIGURED")
	window := fs.Duration("window", session.DefaultWindow, "default length of the work window that warm opens")
	maxAttempts := fs.Int("max-attempts", 1, "attempts a claimed run gets: when its lease expires below this count a new attempt is queued, else the run stays failed")
	queueTimeout := fs.Duration("queue-timeout", 0, "schedule-to-start timeout: a run no worker claimed this long after it became claimable is failed with QUEUE_TIMEOUT (0, the default: a queued run waits however long)")
	retention := retentionFlags(fs)
	retentionInterval := fs.Duration("retention-interval", time.Hour, "how often the retention pass runs when a --retention-* rule is set")
	tlsCert := fs.String("tls-cert", "", "serve HTTPS with this PEM certificate (chain) file; needs --tls-key; both are read again on SIGHUP")
	tlsKey := fs.String("tls-key", "", "the PEM private key of --tls-cert")
	bodyTimeout := fs.Duration("body-timeout", server.DefaultBodyTimeout, "a request body must arrive within this time (per started 16 MiB), else 408 REQUEST_TIMEOUT")
	idleTimeout := fs.Duration("idle-timeout", server.DefaultIdleTimeout, "close a keep-alive connection idle for this long")
	maxInflight := fs.Int64("max-inflight-body-bytes", server.DefaultMaxInflightBodyBytes, "request body bytes read at once (by Content-Length); a request that finds no room within 2s is answered 503 OVERLOADED with Retry-After")
	maxInflightClient := fs.Int64("max-inflight-body-bytes-per-client", 0, "of --max-inflight-body-bytes, the most one client holds: one key (a derived credential counts as its root) or OIDC subject, or one client address without --auth (default a quarter); over it, a request that finds no room within 2s is answered 429 RATE_LIMITED with Retry-After")
	searchOn := fs.Bool("search", true, "keep the full-text search index (SQLite: search.db in --data; PostgreSQL: search_* tables) and answer GET /v1/search; false leaves the index as it is and answers 501 NOT_CONFIGURED")
	maxArchive := fs.Int64("max-archive-bytes", server.DefaultMaxArchiveBytes, "the largest archive file POST /v1/archives takes")
	if _, code, ok := cl.parseWithEnv(args, os.Environ()); !ok {
		return code
	}
	if *maxAttempts < 1 {
		fmt.Fprintln(stderr, "sessiond serve: --max-attempts must be at least 1")
		return 2
	}
	if *queueTimeout < 0 {
		fmt.Fprintln(stderr, "sessiond serve: --queue-timeout must not be negative (0 turns it off)")
		return 2
	}
	if *retentionInterval <= 0 {
		fmt.Fprintln(stderr, "sessiond serve: --retention-interval must be positive")
		return 2
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		fmt.Fprintln(stderr, "sessiond serve: --tls-cert and --tls-key go together\nhint: pass both (the certificate and its private key, PEM), or neither for plain HTTP")
		return 2
	}
	if *maxInflightClient < 0 {
		fmt.Fprintln(stderr, "sessiond serve: --max-inflight-body-bytes-per-client must not be negative (0: a quarter of --max-inflight-body-bytes)")
		return 2
	}
	if *bodyTimeout <= 0 || *idleTimeout <= 0 || *maxInflight <= 0 || *maxArchive <= 0 {
		fmt.Fprintln(stderr, "sessiond serve: --body-timeout, --idle-timeout, --max-inflight-body-bytes and --max-archive-bytes must be positive")
		return 2
	}
	if *staleAfter <= 0 || *sweepInterval < 0 || *window <= 0 {
		fmt.Fprintln(stderr, "sessiond serve: --stale-after and --window must be positive and --sweep-interval not negative")
		return 2
	}
	if *archiveDir == noArchives && retention.Enabled() {
		fmt.Fprintln(stderr, "sessiond serve: --archive-dir - turns the archives off, and the --retention-* rules need them\nhint: give --archive-dir DIR, or leave it out for <data>/archives")
		return 2
	}
	*archiveDir = resolveArchiveDir(*archiveDir, *data)
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "sessiond serve: --log-level %q: %v\n", *logLevel, err)
		return 2
	}
	var log *slog.Logger
	switch *logFormat {
	case "text":
		log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	case "json":
		log = slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	default:
		fmt.Fprintf(stderr, "sessiond serve: --log-format %q is not text or json\nhint: pass --log-format text (the default) or --log-format json\n", *logFormat)
		return 2
	}

	// servesTLS: whether the server serves TLS itself (--tls-cert and --tls-key).
	servesTLS := *tlsCert != ""
	if err := a.check(*addr, *metricsAddr, *adminAddr, *allowRemote, servesTLS, log); err != nil {
		fmt.Fprintf(stderr, "sessiond serve: %v\n", err)
		return 2
	}

	pg := isPostgresURL(*storeURL)
	if *storeURL != "" && !pg {
		fmt.Fprintf(stderr, "sessiond serve: --store %q is not a PostgreSQL URL\nhint: leave --store out for SQLite in --data, or pass postgres://user@host:5432/database?search_path=schema\n", *storeURL)
		return 2
	}

	var certs *server.CertReloader
	if *tlsCert != "" {
		var err error
		if certs, err = server.NewCertReloader(*tlsCert, *tlsKey); err != nil {
			fmt.Fprintf(stderr, "sessiond serve: %v\nhint: --tls-cert takes a PEM certificate (chain) and --tls-key its PEM private key\n", err)
			return 2
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	metrics := server.NewMetrics()
	var st store.Store
	var err error
	where := *data
	if pg {
		where = redactURL(*storeURL)
		if st, err = postgres.Open(ctx, *storeURL, postgres.Options{Logger: log}); err != nil {
			fmt.Fprintf(stderr, "sessiond serve: open store: %v\nhint: check that PostgreSQL at %s is reachable and that its user may create tables in the schema named by search_path\n", err, where)
			return 1
		}
	} else if st, err = sqlite.Open(ctx, *data, sqlite.Options{Logger: log, Observer: metrics.StoreObserver()}); err != nil {
		fmt.Fprintf(stderr, "sessiond serve: %v\nhint: %s\n", err, dataDirHint(*data))
		return 1
	}
	opts := server.Options{Logger: log, Metrics: metrics,
		BodyTimeout: *bodyTimeout, IdleTimeout: *idleTimeout, MaxInflightBodyBytes: *maxInflight, MaxInflightBodyBytesPerClient: *maxInflightClient, MaxArchiveBytes: *maxArchive}
	opts.AllowedHosts = hostAllowList(*addr, *a.on, allowedHosts)
	if *searchOn {
		if opts.Search, err = openSearch(ctx, st); err != nil {
			st.Close()
			fmt.Fprintf(stderr, "sessiond serve: %v\nhint: start with --search=false to run without the search index\n", err)
			return 1
		}
	}
	if err := a.apply(ctx, &opts); err != nil {
		st.Close()
		fmt.Fprintf(stderr, "sessiond serve: %v\n", err)
		return 1
	}
	// The domain and its background work (sweeper, lease expirer, retention): one owner, this
	// function, which starts it once the server records its passes and stops it before the
	// store closes.
	svc := session.New(st, session.Options{StaleAfter: *staleAfter, SweepInterval: *sweepInterval, ArchiveDir: *archiveDir, Window: *window,
		MaxAttempts: *maxAttempts, QueueTimeout: *queueTimeout, Retention: *retention, RetentionInterval: *retentionInterval, Logger: log})
	srv := server.New(svc, opts)
	if err := svc.Start(context.Background()); err != nil {
		st.Close()
		fmt.Fprintf(stderr, "sessiond serve: %v\n", err)
		return 1
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		svc.Close()
		st.Close()
		fmt.Fprintf(stderr, "sessiond serve: listen on %s: %v\nhint: pick a free address with --addr\n", *addr, err)
		return 1
	}
	scheme, served := "http", srv.Listener(ln)
	if certs != nil {
		scheme, served = "https", srv.TLSListener(ln, certs.TLSConfig())
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP) // before the listener answers: a SIGHUP never kills it
		defer signal.Stop(hup)
		go reloadOnHangup(ctx, hup, certs, log)
	}
	hs := srv.HTTPServer()
	errc := make(chan error, 3)
	go func() { errc <- hs.Serve(served) }()
	// The metrics listener (--metrics-addr) and the admin listener (--admin-addr), when given.
	var side []*http.Server
	for _, l := range []struct {
		addr, flag, what string
		handler          http.Handler
	}{
		{*metricsAddr, "--metrics-addr", "metrics", metricsMux(metrics)},
		{*adminAddr, "--admin-addr", "admin", adminMux()},
	} {
		if l.addr == "" {
			continue
		}
		sln, err := net.Listen("tcp", l.addr)
		if err != nil {
			for _, hs := range append(side, hs) {
				hs.Close()
			}
			srv.Close()
			svc.Close()
			st.Close()
			fmt.Fprintf(stderr, "sessiond serve: listen on %s: %v\nhint: pick a free address with %s\n", l.addr, err, l.flag)
			return 1
		}
		ss := &http.Server{Handler: l.handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		side = append(side, ss)
		go func() { errc <- ss.Serve(sln) }()
		log.Info(l.what+" listening", "addr", "http://"+sln.Addr().String())
	}
	log.Info("sessiond listening", "addr", scheme+"://"+ln.Addr().String(), "data", where, "store", st.Capabilities().Driver)
	if retention.Enabled() {
		log.Info("retention on", "archiveClosedAfter", retention.ArchiveClosedAfter, "deleteArchivesAfter", retention.DeleteArchivesAfter,
			"maxArchiveBytes", retention.MaxArchiveBytes, "interval", *retentionInterval, "archiveDir", *archiveDir)
	}
	fmt.Fprintf(stdout, "sessiond listening on %s://%s (data in %s); Ctrl-C to stop\n", scheme, ln.Addr(), where)

	code := 0
	select {
	case <-ctx.Done():
		log.Info("shutting down: finishing in-flight requests and closing streams")
	case err := <-errc:
		log.Error("server stopped", "err", err)
		code = 1
	}
	// Streams end first (they never go idle), then in-flight appends finish, then the store
	// flushes and closes.
	srv.Close()
	sctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("shutdown did not finish in time", "err", err)
	}
	for _, ss := range side {
		ss.Shutdown(sctx)
	}
	svc.Close() // the background work ends before the store closes
	if err := st.Close(); err != nil {
		log.Error("close store", "err", err)
		code = 1
	}
	log.Info("stopped")
	return code
}

// reloadOnHangup reads the TLS certificate and key again on each SIGHUP until ctx ends; the
// listener stays open, new connections get the new certificate. A failed reload keeps the
// certificate served so far and logs why.
func reloadOnHangup(ctx context.Context, hup <-chan os.Signal, certs *server.CertReloader, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if err := certs.Reload(); err != nil {
				log.Error("SIGHUP: TLS certificate not reloaded; serving the previous one", "err", err)
				continue
			}
			log.Info("SIGHUP: TLS certificate reloaded")
		}
	}
}

// metricsMux serves the metrics alone (--metrics-addr).
func metricsMux(m *server.Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	return mux
}

// adminMux serves Go's pprof profiles (--admin-addr): CPU, heap, goroutines, blocking, traces.
// They expose the process's internals and cost CPU while taken, so they are on a listener of
// their own that an operator opts into, never on the API's.
func adminMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

// redactURL returns a database URL fit for logs: without its password.
// isPostgresURL reports whether s names a PostgreSQL store (postgres:// or postgresql://).
func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// hostAllowList is the server's Host allow-list (server.Options.AllowedHosts): without auth, on
// a loopback address or with --allowed-hosts given, localhost, 127.0.0.1, ::1, the host of
// addr and the names given; else none (every Host is answered: with auth a credential is
// needed anyway, and --insecure-allow-remote without a list answers every name it is reached
// by).
func hostAllowList(addr string, auth bool, extra []string) []string {
	if auth || (checkLoopback(addr) != nil && len(extra) == 0) {
		return nil
	}
	list := []string{"localhost", "127.0.0.1", "::1"}
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
			list = append(list, host)
		}
	}
	return append(list, extra...)
}

// checkLoopback returns an error unless addr's host is a loopback address or "localhost".
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %v", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--addr %q is not a loopback address; refusing to serve it", addr)
	}
	return nil
}
