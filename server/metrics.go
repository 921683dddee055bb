package server

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/search"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
)

// Metrics are the server's Prometheus metrics (docs/operations.md lists them with the alerts
// to set). Create them with [NewMetrics] and pass them in [Options] and, through
// [Metrics.StoreObserver], to the store driver; GET /metrics serves them. Every method is safe
// on a nil *Metrics, which records nothing.
type Metrics struct {
	reg *prometheus.Registry

	httpRequests    *prometheus.CounterVec
	httpDuration    *prometheus.HistogramVec
	eventsAppended  *prometheus.CounterVec
	eventDuplicates prometheus.Counter
	appendRejected  *prometheus.CounterVec
	appendDuration  prometheus.Histogram
	syncDuration    prometheus.Histogram
	groupAppends    prometheus.Histogram
	groupEvents     prometheus.Histogram
	subscribers     prometheus.Gauge
	lag             prometheus.Histogram
	cutoffs         *prometheus.CounterVec
	commands        *prometheus.CounterVec
	sweeps          *prometheus.CounterVec
	swept           *prometheus.CounterVec
	leaseExpiries   *prometheus.CounterVec
	leaseErrors     prometheus.Counter
	retentionPasses *prometheus.CounterVec
	retention       *prometheus.CounterVec
	retentionBytes  prometheus.Counter
	archiveBytes    prometheus.Gauge
	searchDelays    prometheus.Histogram

	// The series every request and stored event counts into, looked up by label once
	// (WithLabelValues checks and hashes the labels on every call): requestKey →
	// *requestSeries, storedKey → prometheus.Counter of eventsAppended. Both are bounded:
	// routes are the route table's patterns (and "unmatched"), codes the API's statuses, kinds
	// the contract's event types, origins session.Origins.
	requestSeries sync.Map
	storedSeries  sync.Map
}

// storedKey names the series of stored events of one origin and event type.
type storedKey struct {
	origin session.Origin
	kind   string
}

// requestKey names the series of answered requests of one route and status code, streams
// apart (they have no duration series).
type requestKey struct {
	route  string
	code   int
	stream bool
}

// requestSeries are the series a request of one requestKey counts into (duration nil for a
// stream).
type requestSeries struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// latencyBuckets span 100µs to 10s: an fsync on a good disk to a stalled one.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 2.5, 12)

// NewMetrics returns the server's metrics in a registry of their own, with the Go runtime's
// and the process's collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessiond_http_requests_total", Help: "HTTP requests answered, by route pattern and status code.",
		}, []string{"route", "code"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sessiond_http_request_duration_seconds", Help: "Time to answer an HTTP request, by route pattern (streams are not observed).", Buckets: latencyBuckets,
		}, []string{"route"}),
		eventsAppended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessiond_events_appended_total", Help: "Events stored in a session's log, by origin (api, command, bridge, continuation, restore, lease-expiry, sweep) and event type.",
		}, []string{"origin", "kind"}),
		eventDuplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessiond_event_duplicates_total", Help: "Appended events that were already stored (same idempotencyKey and content) and were not added again.",
		}),
		appendRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessiond_append_rejections_total", Help: "Append requests (POST /v1/sessions/{id}/events) refused, nothing of the batch stored, by error code: every refusal, the ones before the handler (media type, query, path, authentication) included.",
		}, []string{"code"}),
		appendDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sessiond_append_duration_seconds", Help: "Time from a parsed batch to its durable commit (the store's group commit and sync included).", Buckets: latencyBuckets,
		}),
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sessiond_store_sync_duration_seconds", Help: "Time of one sync (fsync) of the store's log (SQLite).", Buckets: latencyBuckets,
		}),
		groupAppends: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sessiond_store_group_commit_appends", Help: "Appends carried by one group commit (SQLite).", Buckets: prometheus.ExponentialBuckets(1, 2, 9),
		}),
		groupEvents: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sessiond_store_group_commit_events", Help: "Events carried by one group commit (SQLite).", Buckets: prometheus.ExponentialBuckets(1, 4, 9),
		}),
		subscribers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sessiond_sse_subscribers", Help: "Live SSE streams.",
		}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sessiond_sse_delivery_lag_events", Help: "How far behind its session's head a live stream was after each write, in events (0: caught up).", Buckets: []float64{0, 1, 10, 100, 1000, 10000},
		}),
		cutoffs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessiond_sse_stream_ends_total", Help: "SSE streams the server ended, by reason: SUBSCRIBER_TOO_SLOW (fell MaxLag behind), write_timeout (could not take a write), SHUTTING_DOWN, STREAM_FAILED.",
		}, []string{"reason"}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessiond_commands_total", Help: "Commands executed, by command type and outcome (accepted, duplicate, rejected, failed, error).",
		}, []string{"type", "outcome"}),
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessiond_sweeps_total", Help: "Sweeps run (background and POST /v1/sweep), by result (ok, error).",
		}, []string{"result"}),
		swept: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessiond_swept_sessions_total", Help: "Sessions the sweeps handled, by action: expired (reported silent), stale (marked stale), runs_failed (active run failed with HEARTBEAT_LOST), skipped (alive after all).",
		}, []string{"action"}),
		leaseExpiries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessiond_lease_expiries_total", Help: "Expired leases the lease expirer handled, by action: expired (found expired), failed (run failed), requeued (new attempt queued), skipped (renewed, released or ended meanwhile).",
		}, []string{"action"}),
		leaseErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessiond_lease_expiry_errors_total", Help: "Passes of the lease expirer that failed (retried at the next interval).",
		}),
		retentionPasses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessiond_retention_passes_total", Help: "Retention passes run, by result (ok, error).",
		}, []string{"result"}),
		retention: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessiond_retention_actions_total", Help: "What retention did, by action: archived (a closed session archived and compacted), deleted (an archive file deleted), kept_last_copy (an archive a rule selected, kept as the last copy of its session's log), failed (an action that failed).",
		}, []string{"action"}),
		retentionBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessiond_retention_deleted_bytes_total", Help: "Bytes of archive files retention deleted.",
		}),
		archiveBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sessiond_archive_bytes", Help: "Total size of the archive directory after the last retention pass that measured it (one with a delete rule).",
		}),
		searchDelays: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sessiond_search_index_delay_seconds", Help: "Time from a commit to the search index taking it, per session batch indexed (the lag a search could see).", Buckets: latencyBuckets,
		}),
	}
	m.reg.MustRegister(m.httpRequests, m.httpDuration, m.eventsAppended, m.eventDuplicates, m.appendRejected,
		m.appendDuration, m.syncDuration, m.groupAppends, m.groupEvents, m.subscribers, m.lag, m.cutoffs,
		m.commands, m.sweeps, m.swept, m.leaseExpiries, m.leaseErrors, m.retentionPasses, m.retention, m.retentionBytes, m.archiveBytes, m.searchDelays,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Zero series for the outcomes an alert looks at, so a rate() sees them before the first.
	for _, code := range []string{string(contract.CodeSubscriberTooSlow), "write_timeout", string(contract.CodeShuttingDown), string(contract.CodeStreamFailed)} {
		m.cutoffs.WithLabelValues(code)
	}
	for _, r := range []string{"ok", "error"} {
		m.sweeps.WithLabelValues(r)
		m.retentionPasses.WithLabelValues(r)
	}
	for _, a := range []string{"expired", "failed", "requeued", "skipped"} {
		m.leaseExpiries.WithLabelValues(a)
	}
	for _, a := range []string{"archived", "deleted", "kept_last_copy", "failed"} {
		m.retention.WithLabelValues(a)
	}
	return m
}

// searchDelay records how long a commit waited for the search index.
func (m *Metrics) searchDelay(d time.Duration) {
	if m != nil {
		m.searchDelays.Observe(d.Seconds())
	}
}

// observeSearch adds the gauges of the search indexer: its lag and the events behind. A second
// server over the same metrics finds them registered and keeps the first indexer's.
func (m *Metrics) observeSearch(ix *search.Indexer) {
	if m == nil {
		return
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessiond_search_index_lag_seconds", Help: "How long the oldest commit the search index has not taken yet has waited (0: level with the logs)."},
			func() float64 { lag, _ := ix.Lag(); return lag.Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessiond_search_index_behind_events", Help: "Events the search index was behind the logs at the start of its last pass."},
			func() float64 { _, n := ix.Lag(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sessiond_search_indexed_events_total", Help: "Events the search indexer has indexed since the process started."},
			func() float64 { return float64(ix.Indexed()) }),
	} {
		if err := m.reg.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			panic(err)
		}
	}
}

// observeStore adds the gauges of what the store driver reports about itself: the SQLite
// files' sizes, the PostgreSQL pool and listener. They are read at scrape time. A second
// server over the same metrics finds them registered and keeps the first store's.
func (m *Metrics) observeStore(st store.Store) {
	if m == nil {
		return
	}
	var cs []prometheus.Collector
	if fs, ok := st.(store.FileSizer); ok {
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessiond_store_size_bytes", Help: "Size of the SQLite database file."},
				func() float64 { d, _ := fs.FileSizes(); return float64(d) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessiond_store_wal_size_bytes", Help: "Size of the SQLite write-ahead log (the checkpointer moves it into the database file)."},
				func() float64 { _, w := fs.FileSizes(); return float64(w) }))
	}
	if pr, ok := st.(store.PoolReporter); ok {
		conns := func(f func(store.PoolState) int32) func() float64 {
			return func() float64 { return float64(f(pr.PoolState())) }
		}
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessiond_pg_pool_connections", Help: "PostgreSQL pool connections by state.", ConstLabels: prometheus.Labels{"state": "acquired"}},
				conns(func(p store.PoolState) int32 { return p.AcquiredConns })),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessiond_pg_pool_connections", Help: "PostgreSQL pool connections by state.", ConstLabels: prometheus.Labels{"state": "idle"}},
				conns(func(p store.PoolState) int32 { return p.IdleConns })),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessiond_pg_pool_max_connections", Help: "Size of the PostgreSQL pool."},
				conns(func(p store.PoolState) int32 { return p.MaxConns })),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sessiond_pg_pool_empty_acquires_total", Help: "Acquires that waited for a PostgreSQL connection because the pool was exhausted."},
				func() float64 { return float64(pr.PoolState().EmptyAcquires) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessiond_pg_listener_up", Help: "1 while the PostgreSQL commit listener holds a listening connection, else 0."},
				func() float64 {
					if pr.PoolState().ListenerUp {
						return 1
					}
					return 0
				}),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sessiond_pg_listener_reconnects_total", Help: "Connections of the PostgreSQL commit listener replaced after a failure."},
				func() float64 { return float64(pr.PoolState().ListenerReconnects) }))
	}
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				panic(err) // a name clash between the metrics of this file: a bug
			}
		}
	}
}

// Registry returns the registry the metrics are in, to add more collectors to it.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics (for GET /metrics and --metrics-addr) in the format the scraper's
// Accept asks for: OpenMetrics (application/openmetrics-text, what Prometheus asks first), else
// the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// StoreObserver returns the hooks a store driver reports its group commits and syncs to.
func (m *Metrics) StoreObserver() store.Observer {
	if m == nil {
		return store.Observer{}
	}
	return store.Observer{
		GroupCommitted: func(appends, events int) {
			m.groupAppends.Observe(float64(appends))
			m.groupEvents.Observe(float64(events))
		},
		Synced: func(took time.Duration, _ int) { m.syncDuration.Observe(took.Seconds()) },
	}
}

func (m *Metrics) request(route string, code int, took time.Duration, stream bool) {
	if m == nil {
		return
	}
	k := requestKey{route, code, stream}
	v, ok := m.requestSeries.Load(k)
	if !ok {
		rs := &requestSeries{count: m.httpRequests.WithLabelValues(route, strconv.Itoa(code))}
		if !stream {
			// A stream's duration is not observed: it has no duration series at all (an empty
			// histogram would give dashboards a NaN quantile for its route).
			rs.duration = m.httpDuration.WithLabelValues(route)
		}
		v, _ = m.requestSeries.LoadOrStore(k, rs)
	}
	rs := v.(*requestSeries)
	rs.count.Inc()
	if rs.duration != nil {
		rs.duration.Observe(took.Seconds())
	}
}

// stored counts n events of type kind stored from origin: the session service tells it of
// every event it stores (session.Service.OnStored), whoever had it stored.
func (m *Metrics) stored(origin session.Origin, kind string, n int) {
	if m == nil {
		return
	}
	k := storedKey{origin, kind}
	v, ok := m.storedSeries.Load(k)
	if !ok {
		v, _ = m.storedSeries.LoadOrStore(k, m.eventsAppended.WithLabelValues(string(origin), kind))
	}
	v.(prometheus.Counter).Add(float64(n))
}

// duplicates counts the events of an answered append that were already stored.
func (m *Metrics) duplicates(results []store.AppendResult) {
	if m == nil {
		return
	}
	dups := 0
	for _, r := range results {
		if r.Duplicate {
			dups++
		}
	}
	if dups > 0 {
		m.eventDuplicates.Add(float64(dups))
	}
}

// rejected counts a refused append request by its error code.
func (m *Metrics) rejected(code contract.ErrorCode) {
	if m != nil {
		m.appendRejected.WithLabelValues(string(code)).Inc()
	}
}

func (m *Metrics) appendTook(d time.Duration) {
	if m != nil {
		m.appendDuration.Observe(d.Seconds())
	}
}

func (m *Metrics) subscriber(delta float64) {
	if m != nil {
		m.subscribers.Add(delta)
	}
}

func (m *Metrics) delivered(behind int64) {
	if m != nil {
		m.lag.Observe(float64(behind))
	}
}

func (m *Metrics) streamEnded(reason string) {
	if m != nil {
		m.cutoffs.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) command(typ, outcome string) {
	if m != nil {
		m.commands.WithLabelValues(typ, outcome).Inc()
	}
}

// pass records a pass of the session service's background work (session.Service.OnPass);
// pol is the service's retention policy.
func (m *Metrics) pass(p session.Pass, pol session.RetentionPolicy) {
	switch p.Kind {
	case session.PassSweep:
		m.sweep(p.Sweep.Expired, p.Sweep.Stale, p.Sweep.RunsFailed, p.Sweep.Skipped, p.Err)
	case session.PassLeaseExpiry:
		m.leaseExpiry(p.Leases.Expired, p.Leases.Failed, p.Leases.Requeued, p.Leases.Skipped, p.Err)
	case session.PassRetention:
		m.retained(p.Retention, pol.DeleteArchivesAfter > 0 || pol.MaxArchiveBytes > 0, p.Err)
	}
}

func (m *Metrics) sweep(expired, stale, runsFailed, skipped int, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.sweeps.WithLabelValues("error").Inc()
		return
	}
	m.sweeps.WithLabelValues("ok").Inc()
	m.swept.WithLabelValues("expired").Add(float64(expired))
	m.swept.WithLabelValues("stale").Add(float64(stale))
	m.swept.WithLabelValues("runs_failed").Add(float64(runsFailed))
	m.swept.WithLabelValues("skipped").Add(float64(skipped))
}

func (m *Metrics) leaseExpiry(expired, failed, requeued, skipped int, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.leaseErrors.Inc()
		return
	}
	m.leaseExpiries.WithLabelValues("expired").Add(float64(expired))
	m.leaseExpiries.WithLabelValues("failed").Add(float64(failed))
	m.leaseExpiries.WithLabelValues("requeued").Add(float64(requeued))
	m.leaseExpiries.WithLabelValues("skipped").Add(float64(skipped))
}

// retained records a retention pass; measured: the policy deletes archives, so the pass
// measured the archive directory (ArchiveBytesAfter).
func (m *Metrics) retained(p *session.RetentionPlan, measured bool, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.retentionPasses.WithLabelValues("error").Inc()
		return
	}
	m.retentionPasses.WithLabelValues("ok").Inc()
	m.retention.WithLabelValues("archived").Add(float64(len(p.Archive)))
	m.retention.WithLabelValues("deleted").Add(float64(len(p.Delete)))
	m.retention.WithLabelValues("kept_last_copy").Add(float64(len(p.Kept)))
	m.retention.WithLabelValues("failed").Add(float64(len(p.Errors)))
	for _, a := range p.Delete {
		m.retentionBytes.Add(float64(a.Bytes))
	}
	if measured {
		m.archiveBytes.Set(float64(p.ArchiveBytesAfter))
	}
}

// handleMetrics serves GET /metrics.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if s.opt.Metrics == nil {
		writeError(w, api.Errorf(contract.CodeNotConfigured, "this server collects no metrics (Options.DisableMetrics); sessiond serve always does"))
		return
	}
	s.metricsHandler.ServeHTTP(w, r)
}
