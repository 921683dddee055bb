package postgres

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
	"github.com/sessiond/sessiond/store/sqlite"
	"github.com/sessiond/sessiond/store/storetest"
)

// The benchmarks need SESSIOND_TEST_POSTGRES (they skip without it). Events are built and
// validated before the timer starts: they measure the stores, not the contract parser. Each
// event is a terminal event of about 330 bytes.

const benchChunk = "go test ./... ok  github.com/example/project/internal/foo 0.042s coverage: 81.3% of statements; " +
	"ok  github.com/example/project/internal/bar 0.107s coverage: 77.0% of statements; FAIL none; " +
	"all packages built"

// benchBatches returns n batches of size events for session id, keys "<prefix>-<batch>-<i>".
func benchBatches(b *testing.B, id, prefix string, n, size int) [][]*contract.EncodedEvent {
	b.Helper()
	out := make([][]*contract.EncodedEvent, n)
	for i := range out {
		out[i] = make([]*contract.EncodedEvent, size)
		for j := range out[i] {
			key := fmt.Sprintf("%s-%d-%d", prefix, i, j)
			out[i][j] = storetest.EventWithID(b, id, "ev-"+key, key, benchChunk)
		}
	}
	return out
}

// benchRandomChunk makes an event with UUIDv4 eventId and key about 470 bytes, the size of the
// agent events of the peer comparison (docs/benchmarks.md).
var benchRandomChunk = benchChunk + " (random ids: every index insert lands on a page of its own)"

// benchRandomBatches returns n batches of size events for session id with random UUIDv4
// eventIds and idempotency keys, as runtimes send them: unlike counting ids they do not append
// at the end of the unique indexes.
func benchRandomBatches(b *testing.B, id string, n, size int) [][]*contract.EncodedEvent {
	b.Helper()
	out := make([][]*contract.EncodedEvent, n)
	for i := range out {
		out[i] = make([]*contract.EncodedEvent, size)
		for j := range out[i] {
			out[i][j] = storetest.EventWithID(b, id, uuid.NewString(), uuid.NewString(), benchRandomChunk)
		}
	}
	return out
}

// benchIDs names the id schemes of the append benchmarks: "counting" ids ("ev-k-1-2") append
// at the end of every index, the best case; "random" ids (UUIDv4) are what runtimes send.
var benchIDs = []string{"counting", "random"}

// batchesFor builds n batches of size events for session id in the id scheme ids.
func batchesFor(b *testing.B, ids, id string, n, size int) [][]*contract.EncodedEvent {
	if ids == "random" {
		return benchRandomBatches(b, id, n, size)
	}
	return benchBatches(b, id, "k", n, size)
}

// serviceOpts are the options the session service gives every append from a runtime
// (session.Service.Append): a heartbeat and an empty fence.
func serviceOpts() store.AppendOptions {
	return store.AppendOptions{Heartbeat: time.Now(), Fence: &store.Fence{}}
}

// BenchmarkAppendBatch64x8Sessions (workload W1 of docs/benchmarks.md): 8 writers, each
// appending batches of 64 events to its own session, with counting and with random ids, on
// SQLite and on PostgreSQL in the same run. PostgreSQL runs with synchronous_commit=on
// (checked): every commit is flushed. One op is one batch; the figure is events/s, and on
// PostgreSQL the server's CPU per event (srv-us/event, every PostgreSQL process of this machine)
// and the WAL it inserted per event (wal-B/event: the server's whole WAL, so a server shared
// with other clients counts theirs too).
func BenchmarkAppendBatch64x8Sessions(b *testing.B) {
	for _, ids := range benchIDs {
		b.Run("sqlite/"+ids, func(b *testing.B) {
			st, err := sqlite.Open(context.Background(), b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			benchWriters(b, st, ids, 8, 64)
		})
		b.Run("postgres/"+ids, func(b *testing.B) {
			benchWriters(b, openBenchPG(b), ids, 8, 64)
		})
	}
}

// BenchmarkAppendSingle64Writers (workload W2): 64 writers, each appending single events to
// its own session, random ids, as the service appends (heartbeat, fence). One op is one
// append; reported: events/s, the p99 of one append (ms) and the server's CPU per event.
func BenchmarkAppendSingle64Writers(b *testing.B) {
	for _, ids := range benchIDs {
		b.Run("postgres/"+ids, func(b *testing.B) {
			benchWriters(b, openBenchPG(b), ids, 64, 1)
		})
	}
}

// BenchmarkAppendSerial: one writer appends single events with random ids to one session, as
// the service appends, one after the other: the latency and the server CPU of one append.
func BenchmarkAppendSerial(b *testing.B) {
	benchWriters(b, openBenchPG(b), "random", 1, 1)
}

// openBenchPG opens a PostgreSQL store in a fresh schema, under an application_name of its own
// (serverCPU finds its connections by it), and checks that commits are flushed.
func openBenchPG(b *testing.B) *Store {
	u := pgtest.Schema(b)
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	st := openURL(b, u+sep+"application_name="+benchApp)
	var sc string
	if err := st.pool.QueryRow(context.Background(), `SHOW synchronous_commit`).Scan(&sc); err != nil || sc != "on" {
		b.Fatalf("synchronous_commit = %q (%v), want on", sc, err)
	}
	return st
}

// benchApp is the application_name of the benchmarks' PostgreSQL connections.
var benchApp = "sessiond-bench-" + strconv.Itoa(os.Getpid())

// benchWriters runs writers goroutines, each appending batches of size events to its own
// session, b.N batches in all, and reports events/s, the p99 latency of one append and, on
// PostgreSQL, the server CPU per event.
func benchWriters(b *testing.B, st store.Store, ids string, writers, size int) {
	ctx := context.Background()
	per := (b.N + writers - 1) / writers
	work := make([][][]*contract.EncodedEvent, writers)
	for w := range work {
		id := fmt.Sprintf("S-bench-%d", w)
		if err := st.CreateSession(ctx, storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
			b.Fatal(err)
		}
		work[w] = batchesFor(b, ids, id, per, size)
	}
	pg, _ := st.(*Store)
	runWriters(b, work, size, pg, func(id string, batch []*contract.EncodedEvent) error {
		_, err := st.Append(ctx, id, batch, serviceOpts())
		return err
	})
}

// runWriters appends work[w] with appendBatch from one goroutine per writer (writer w's
// session is S-bench-w), b.N batches of size events in all, and reports events/s, the p99
// latency of one append and, when pg is not nil, the server CPU per event.
func runWriters(b *testing.B, work [][][]*contract.EncodedEvent, size int, pg *Store, appendBatch func(id string, batch []*contract.EncodedEvent) error) {
	var next atomic.Int64
	lats := make([][]time.Duration, len(work))
	var wal0 string
	if pg != nil {
		wal0 = walInsertLSN(b, pg)
	}
	cpu0 := processCPU()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range work {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("S-bench-%d", w)
			for _, batch := range work[w] {
				if next.Add(1) > int64(b.N) {
					return
				}
				t0 := time.Now()
				if err := appendBatch(id, batch); err != nil {
					b.Error(err)
					return
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	b.StopTimer()
	events := float64(b.N * size)
	b.ReportMetric(events/d.Seconds(), "events/s")
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)*99/100])/float64(time.Millisecond), "p99-ms")
	}
	if pg != nil {
		if cpu := serverCPU(b, pg, cpu0); cpu >= 0 {
			b.ReportMetric(float64(cpu)/float64(time.Microsecond)/events, "srv-us/event")
		}
		b.ReportMetric(float64(walSince(b, pg, wal0))/events, "wal-B/event")
	}
}

// walInsertLSN returns the server's current WAL insert position (pg_current_wal_insert_lsn).
func walInsertLSN(b *testing.B, st *Store) string {
	var lsn string
	if err := st.pool.QueryRow(context.Background(), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		b.Fatal(err)
	}
	return lsn
}

// walSince returns how many bytes of WAL the server has inserted since the position lsn
// (walInsertLSN): the benchmark's own, and those of any other client of the server at the
// same time (a server of its own gives the benchmark's alone). The WAL is what every commit
// flushes and what a replica receives; it includes the full-page images of the pages that
// the first change after a checkpoint dirties.
func walSince(b *testing.B, st *Store, lsn string) int64 {
	var n int64
	if err := st.pool.QueryRow(context.Background(), `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint`, lsn).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// serverCPU returns the CPU time that the PostgreSQL server spent for the benchmark since
// processCPU returned before: that of the backends of the store's connections (found by
// benchApp: the pool and the listener). The server's background processes (WAL writer,
// checkpointer) are left out: they serve every client of the server, and other test runs may
// share it. It returns -1 when /proc cannot tell (another OS, a remote server).
func serverCPU(b *testing.B, st *Store, before map[int]time.Duration) time.Duration {
	after := processCPU()
	if len(after) == 0 {
		return -1
	}
	rows, err := st.pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity
		WHERE application_name LIKE $1 || '%'`, benchApp)
	if err != nil {
		b.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		b.Fatal(err)
	}
	var sum time.Duration
	for _, pid := range pids {
		sum += after[int(pid)] - before[int(pid)]
	}
	return sum
}

// processCPU returns the CPU time (user and system) of every process named postgres on this
// machine, by pid; empty when /proc cannot tell.
func processCPU() map[int]time.Duration {
	out := map[int]time.Duration{}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ...: utime and stime are fields 14 and 15; comm may hold spaces.
		s := string(stat)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open || s[open+1:closing] != "postgres" {
			continue
		}
		f := strings.Fields(s[closing+1:])
		if len(f) < 13 {
			continue
		}
		u, err1 := strconv.ParseInt(f[11], 10, 64)
		k, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		out[pid] = time.Duration(u+k) * time.Second / 100 // USER_HZ is 100 on Linux
	}
	return out
}

// BenchmarkCrossInstanceDelivery: two Stores on one schema, as two sessiond instances would
// be. A writer appends 1,000 events/s to one session through A (every millisecond the events
// due by then, in one append); a follower on B waits for Commits from Subscribe and reads the
// new events with ReadEvents. Latency is from just before the Append that carries an event to
// the moment the follower has read it (so it includes the commit's flush). One op is 3 s of
// traffic; reported: p50, p99 and max latency in ms. Target: p99 at most 50 ms.
func BenchmarkCrossInstanceDelivery(b *testing.B) {
	u := pgtest.Schema(b)
	a, bb := openURL(b, u), openURL(b, u)
	ctx := context.Background()
	var lats []time.Duration
	for n := 0; n < b.N; n++ {
		id := fmt.Sprintf("S-deliver-%d", n)
		if err := a.CreateSession(ctx, storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
			b.Fatal(err)
		}
		const rate, dur = 1000, 3 * time.Second
		total := int(rate * dur / time.Second)
		evs := benchBatches(b, id, "d", 1, total)[0]
		sent := make([]atomic.Int64, total) // unix nanos before the append that carried the event
		wake := make(chan struct{}, 1)
		cancel := bb.Subscribe(func(c store.Commit) {
			if c.SessionID == id {
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		})
		done := make(chan []time.Duration)
		go func() {
			var got []time.Duration
			next := int64(0)
			for next < int64(total) {
				<-wake
				for {
					page, err := bb.ReadEvents(ctx, id, next-1, 0)
					if err != nil {
						b.Error(err)
						done <- got
						return
					}
					now := time.Now().UnixNano()
					for _, e := range page {
						if e.Sequence != next {
							b.Errorf("got sequence %d, want %d", e.Sequence, next)
						}
						got = append(got, time.Duration(now-sent[e.Sequence].Load()))
						next++
					}
					if len(page) == 0 {
						break
					}
				}
			}
			done <- got
		}()
		b.ResetTimer()
		start := time.Now()
		i := 0
		for i < total {
			due := min(int(time.Since(start)*rate/time.Second)+1, total)
			if due <= i {
				time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / rate)))
				continue
			}
			now := time.Now().UnixNano()
			for j := i; j < due; j++ {
				sent[j].Store(now)
			}
			if _, err := a.Append(ctx, id, evs[i:due], store.AppendOptions{}); err != nil {
				b.Fatal(err)
			}
			i = due
		}
		select {
		case got := <-done:
			lats = append(lats, got...)
		case <-time.After(30 * time.Second):
			b.Fatal("the follower on B did not receive every event")
		}
		b.StopTimer()
		cancel()
	}
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	q := func(p float64) float64 {
		return float64(lats[min(len(lats)-1, int(p*float64(len(lats))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(lats[len(lats)-1])/float64(time.Millisecond), "max-ms")
}

// BenchmarkPlainTable is the reference the PostgreSQL driver is held to (docs/benchmarks.md):
// the session log a team would write by hand on one table, in this process, against the same
// server and in the same run: per batch one transaction that takes a per-session advisory lock
// and inserts the batch at max(seq)+1.. with a unique (session, key) constraint, in one round
// trip. It skips what sessiond adds (duplicate answers, runs, heartbeat, fan-out). Shapes:
// W1 (8 writers, batches of 64), W2 (64 writers, single events) and serial single events, with
// random ids, the same events as the driver's benchmarks.
func BenchmarkPlainTable(b *testing.B) {
	for _, c := range []struct {
		name          string
		writers, size int
	}{{"W1", 8, 64}, {"W2", 64, 1}, {"serial", 1, 1}} {
		b.Run(c.name, func(b *testing.B) { benchPlain(b, c.writers, c.size) })
	}
}

const (
	qPlainTable = `CREATE TABLE plain_events (session text NOT NULL, seq bigint NOT NULL, event_id text NOT NULL,
		idem_key text NOT NULL, data bytea NOT NULL, PRIMARY KEY (session, seq), UNIQUE (session, idem_key))`
	qPlainInsert = `INSERT INTO plain_events (session, seq, event_id, idem_key, data)
		SELECT $1, m.last + u.n, u.id, u.key, u.data
		FROM (SELECT COALESCE(max(seq), -1) AS last FROM plain_events WHERE session = $1) AS m,
			unnest($2::text[], $3::text[], $4::bytea[]) WITH ORDINALITY AS u (id, key, data, n)
		ON CONFLICT (session, idem_key) DO NOTHING`
)

func benchPlain(b *testing.B, writers, size int) {
	st := openBenchPG(b)
	ctx := context.Background()
	if _, err := st.pool.Exec(ctx, qPlainTable); err != nil {
		b.Fatal(err)
	}
	per := (b.N + writers - 1) / writers
	work := make([][][]*contract.EncodedEvent, writers)
	for w := range work {
		work[w] = benchRandomBatches(b, fmt.Sprintf("S-bench-%d", w), per, size)
	}
	runWriters(b, work, size, st, func(id string, batch []*contract.EncodedEvent) error {
		ids, keys, datas := make([]string, len(batch)), make([]string, len(batch)), make([][]byte, len(batch))
		for i, ev := range batch {
			ids[i], keys[i], datas[i] = ev.EventID, ev.IdempotencyKey, ev.JSON(0)
		}
		pb := &pgx.Batch{}
		pb.Queue("BEGIN")
		pb.Queue(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, id)
		pb.Queue(qPlainInsert, id, ids, keys, datas)
		pb.Queue("COMMIT")
		return st.pool.SendBatch(ctx, pb).Close()
	})
}

// BenchmarkAppendDuplicates (workload W3): 64 writers resend single events, random ids, that
// their sessions already store (a runtime retrying appends that did succeed), as the service
// appends. One op is one append answered as a duplicate; reported: duplicates/s and the
// server's CPU per duplicate.
func BenchmarkAppendDuplicates(b *testing.B) {
	st := openBenchPG(b)
	ctx := context.Background()
	const writers = 64
	per := (b.N + writers - 1) / writers
	work := make([][][]*contract.EncodedEvent, writers)
	for w := range work {
		id := fmt.Sprintf("S-bench-%d", w)
		if err := st.CreateSession(ctx, storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
			b.Fatal(err)
		}
		work[w] = benchRandomBatches(b, id, per, 1)
		all := make([]*contract.EncodedEvent, 0, per)
		for _, batch := range work[w] {
			all = append(all, batch...)
		}
		for i := 0; i < len(all); i += store.MaxBatchEvents {
			if _, err := st.Append(ctx, id, all[i:min(i+store.MaxBatchEvents, len(all))], store.AppendOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	var next atomic.Int64
	cpu0 := processCPU()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range work {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("S-bench-%d", w)
			for _, batch := range work[w] {
				if next.Add(1) > int64(b.N) {
					return
				}
				res, err := st.Append(ctx, id, batch, serviceOpts())
				if err != nil || !res[0].Duplicate {
					b.Errorf("resend: %v, %v; want a duplicate", res, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/d.Seconds(), "duplicates/s")
	if cpu := serverCPU(b, st, cpu0); cpu >= 0 {
		b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(b.N), "srv-us/dup")
	}
}
