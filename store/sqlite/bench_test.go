package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// Benchmarks run with fsync on every commit (synchronous=FULL), as the store always does.
// Each reports events/s; ns/op is per event. Events are built and validated before the timer
// starts: these measure the store, not the contract parser. Event shape: a terminal event of
// about 330 bytes. Where a benchmark has variants (idKinds), "random" events have a UUIDv4 as
// eventId and as idempotency key, the worst case for the indexes, "random-ids" events a UUIDv4
// eventId and the key "<writer uuid>-<n>", "ordered" events a time-ordered UUIDv7 eventId and
// the key "<writer uuid>-<n>"; elsewhere the eventId is a UUIDv4 and the key "<writer uuid>-<n>".

func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range bigDirs {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

const benchChunk = "go test ./... ok  github.com/example/project/internal/foo 0.042s coverage: 81.3% of statements; " +
	"ok  github.com/example/project/internal/bar 0.107s coverage: 77.0% of statements; FAIL none; " +
	"all packages built"

// benchEvents returns n validated events for session id, keyed "<prefix>-<i>", with eventIds
// from newID.
func benchEvents(b *testing.B, id, prefix string, n int, newID func() string) []*contract.EncodedEvent {
	return benchEventsOf(b, id, n, idKind{id: newID, key: orderedKey}, prefix)
}

// benchEventsOf returns n validated events for session id with the ids and keys of kind k.
func benchEventsOf(b *testing.B, id string, n int, k idKind, prefix string) []*contract.EncodedEvent {
	b.Helper()
	out := make([]*contract.EncodedEvent, n)
	for i := range out {
		out[i] = storetest.EventWithID(b, id, k.id(), k.key(prefix, i), benchChunk)
	}
	return out
}

// benchOpen opens a store in dir with the default options and creates the sessions.
func benchOpen(b *testing.B, dir string, sessions ...string) *Store {
	b.Helper()
	return benchOpenWith(b, dir, Options{}, sessions...)
}

// benchOpenWith is benchOpen with options.
func benchOpenWith(b *testing.B, dir string, opt Options, sessions ...string) *Store {
	b.Helper()
	st, err := Open(context.Background(), dir, opt)
	if err != nil {
		b.Fatal(err)
	}
	for _, id := range sessions {
		if err := st.CreateSession(context.Background(), storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
			b.Fatal(err)
		}
	}
	return st
}

func report(b *testing.B, events int, d time.Duration) {
	b.ReportMetric(float64(events)/d.Seconds(), "events/s")
}

// BenchmarkAppendBatch64x8Sessions: 8 writers, each appending batches of 64 events to its own
// session. Target: at least 50,000 events/s. written-B/event is what the process wrote (write(2)
// and pwrite(2) bytes: WAL frames and checkpoints) per event.
func BenchmarkAppendBatch64x8Sessions(b *testing.B) {
	for _, k := range idKinds {
		b.Run(k.name, func(b *testing.B) { benchBatch64x8(b, k) })
	}
}

func benchBatch64x8(b *testing.B, k idKind) {
	const sessions, batch = 8, 64
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("S-%d", i)
	}
	st := benchOpen(b, b.TempDir(), ids...)
	defer st.Close()
	per := (b.N + sessions - 1) / sessions
	evs := make([][]*contract.EncodedEvent, sessions)
	for i, id := range ids {
		evs[i] = benchEventsOf(b, id, per, k, uuid.NewString())
	}
	b.ResetTimer()
	w0 := bytesWritten()
	d := appendPerSession(b, st, ids, evs, batch, store.AppendOptions{})
	b.StopTimer()
	report(b, per*sessions, d)
	if w0 >= 0 {
		b.ReportMetric(float64(bytesWritten()-w0)/float64(per*sessions), "written-B/event")
	}
}

// appendPerSession runs one writer per session, each appending its list in batches.
func appendPerSession(b *testing.B, st *Store, ids []string, evs [][]*contract.EncodedEvent, batch int, opts store.AppendOptions) time.Duration {
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	start := time.Now()
	for i, id := range ids {
		wg.Add(1)
		go func(id string, list []*contract.EncodedEvent) {
			defer wg.Done()
			for k := 0; k < len(list); k += batch {
				if _, err := st.Append(ctx, id, list[k:min(k+batch, len(list))], opts); err != nil {
					errs <- err
					return
				}
			}
		}(id, evs[i])
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return d
}

// appendShared runs writers goroutines appending batches taken in turn from one list to one
// session.
func appendShared(b *testing.B, st *Store, id string, list []*contract.EncodedEvent, batch, writers int) time.Duration {
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	start := time.Now()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(int64(batch))) - batch
				if k >= len(list) {
					return
				}
				if _, err := st.Append(ctx, id, list[k:min(k+batch, len(list))], store.AppendOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return d
}

// BenchmarkAppendSingle64Writers: 64 writers appending one event at a time to 8 sessions; only
// group commit makes this fast. Target: at least 10,000 events/s.
func BenchmarkAppendSingle64Writers(b *testing.B) {
	const writers, sessions = 64, 8
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("S-%d", i)
	}
	st := benchOpen(b, b.TempDir(), ids...)
	defer st.Close()
	per := (b.N + writers - 1) / writers
	evs := make([][]*contract.EncodedEvent, writers)
	for w := range evs {
		evs[w] = benchEvents(b, ids[w%sessions], uuid.NewString(), per, uuid.NewString)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(id string, list []*contract.EncodedEvent) {
			defer wg.Done()
			for _, ev := range list {
				if _, err := st.Append(ctx, id, []*contract.EncodedEvent{ev}, store.AppendOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}(ids[w%sessions], evs[w])
	}
	wg.Wait()
	d := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	report(b, per*writers, d)
}

// bigDirs hold, per id kind, a store with one session of bigEvents events, built once per test
// process by bulkLoad and removed by TestMain.
var (
	bigMu   sync.Mutex
	bigDirs = map[string]string{}
)

const (
	bigSession = "S-big"
	bigEvents  = 1_000_000
)

// BenchmarkAppendSessionSize appends batches of 64 events from 4 writers to one session that is
// empty, and to one that already holds 1,000,000 events. Target: within 20% of each other.
func BenchmarkAppendSessionSize(b *testing.B) {
	for _, k := range idKinds {
		for _, size := range []string{"empty", "1M"} {
			b.Run(size+"/"+k.name, func(b *testing.B) {
				var dir string
				if size == "empty" {
					dir = b.TempDir()
					benchOpen(b, dir, bigSession).Close()
				} else {
					bigMu.Lock()
					dir = bigDirs[k.name]
					if dir == "" {
						var err error
						if dir, err = bulkLoad(b, bigEvents, k); err != nil {
							bigMu.Unlock()
							b.Fatal(err)
						}
						bigDirs[k.name] = dir
					}
					bigMu.Unlock()
				}
				st := benchOpen(b, dir)
				defer st.Close()
				before, err := st.LastSequence(context.Background(), bigSession)
				if err != nil {
					b.Fatal(err)
				}
				evs := benchEventsOf(b, bigSession, b.N, k, uuid.NewString())
				b.ResetTimer()
				w0 := bytesWritten()
				d := appendShared(b, st, bigSession, evs, 64, 4)
				b.StopTimer()
				report(b, len(evs), d)
				if w0 >= 0 {
					b.ReportMetric(float64(bytesWritten()-w0)/float64(len(evs)), "written-B/event")
				}
				b.ReportMetric(float64(before+1), "events-before")
			})
		}
	}
}

// bulkLoad creates a store holding one session of n events, written straight into the tables in
// one transaction: the same rows Append writes (canonical JSON with the event's sequence,
// random UUID eventIds), only without the per-append overhead, so that building it takes
// seconds rather than minutes.
func bulkLoad(tb testing.TB, n int, k idKind) (string, error) {
	dir, err := os.MkdirTemp("", "sessiond-bench-big-")
	if err != nil {
		return "", err
	}
	st, err := Open(context.Background(), dir)
	if err != nil {
		return dir, err
	}
	if err := st.CreateSession(context.Background(), storetest.NewSession(bigSession, storetest.SessionSpec{})); err != nil {
		return dir, err
	}
	if err := st.Close(); err != nil {
		return dir, err
	}
	// The template is checked against the contract's own canonical form.
	tmpl := func(eventID, key string, seq int64) string {
		return `{"contract":"AgentSessionEvent","eventId":"` + eventID + `","sessionId":"` + bigSession + `","sequence":` +
			fmt.Sprint(seq) + `,"idempotencyKey":"` + key + `","occurredAt":"` + storetest.Timestamp +
			`","eventType":"terminal","payload":{"terminalId":"term-1","stream":"stdout","chunk":"` + benchChunk + `"}}`
	}
	probe := storetest.EventWithID(tb, bigSession, "ev-x", "k-x", benchChunk)
	if got, want := tmpl("ev-x", "k-x", 5), string(probe.JSON(5)); got != want {
		return dir, fmt.Errorf("bulk template is not canonical:\n got %s\nwant %s", got, want)
	}
	db, err := sql.Open("sqlite", dsn(filepath.Join(dir, DBFile), roleWriter))
	if err != nil {
		return dir, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return dir, err
	}
	defer tx.Rollback()
	var sk int64
	if err := tx.QueryRow(`SELECT sk FROM sessions WHERE id = ?`, bigSession).Scan(&sk); err != nil {
		return dir, err
	}
	bits, err := readGenerationBits(ctx, tx)
	if err != nil {
		return dir, err
	}
	ins, err := tx.Prepare(qInsertEvents(1))
	if err != nil {
		return dir, err
	}
	prefix := uuid.NewString()
	head := store.ChainGenesis
	for i := 0; i < n; i++ {
		id, key := k.id(), k.key(prefix, i)
		e := store.StoredEvent{Sequence: int64(i), EventID: id, IdempotencyKey: key, EventType: "terminal", Data: []byte(tmpl(id, key, int64(i)))}
		head = store.ChainNext(head, e.Data)
		if _, err := ins.Exec(eventRow(nil, sk, int64(i>>bits), &e, head[:])...); err != nil {
			return dir, err
		}
	}
	if _, err := tx.Exec(`UPDATE sessions SET last_seq = ? WHERE sk = ?`, n-1, sk); err != nil {
		return dir, err
	}
	if _, err := tx.Exec(`INSERT INTO session_heads (sk, last_seq, head_hash) VALUES (?1, ?2, ?3) ON CONFLICT (sk) DO UPDATE SET last_seq = ?2, head_hash = ?3`, sk, n-1, head[:]); err != nil {
		return dir, err
	}
	for g := range int64(n) >> bits { // the sealed generations' tables, as the writer seals them
		lo, hi := g<<bits, (g+1)<<bits-1
		for _, q := range []string{qSealKeys, qSealIDs} {
			if _, err := tx.Exec(q, sk, g, lo, hi); err != nil {
				return dir, err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return dir, err
	}
	_, err = db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	return dir, err
}

// BenchmarkReadLog reads a session's log in order, 10,000 events a call, from the start to
// the end, again and again. Target: at least 300,000 events/s.
func BenchmarkReadLog(b *testing.B) {
	const n = 100_000
	dir := b.TempDir()
	st := benchOpen(b, dir, "S-read")
	defer st.Close()
	evs := benchEvents(b, "S-read", uuid.NewString(), n, uuid.NewString)
	for k := 0; k < n; k += store.MaxBatchEvents {
		if _, err := st.Append(context.Background(), "S-read", evs[k:k+store.MaxBatchEvents], store.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	read, after := 0, int64(-1)
	var bytes int64
	for read < b.N {
		page, err := st.ReadEvents(ctx, "S-read", after, 0)
		if err != nil {
			b.Fatal(err)
		}
		if len(page) == 0 {
			after = -1
			continue
		}
		for i := range page {
			if page[i].Sequence != after+1 {
				b.Fatalf("read sequence %d after %d", page[i].Sequence, after)
			}
			after = page[i].Sequence
			bytes += int64(len(page[i].Data))
		}
		read += len(page)
	}
	d := time.Since(start)
	b.StopTimer()
	report(b, read, d)
	b.SetBytes(bytes / int64(max(read, 1)))
}

// BenchmarkFdatasync is the floor every durable commit stands on: write 4 KiB to a file in the
// same file system and fdatasync it, one op each. "overwrite" rewrites blocks the file already
// has (no metadata to commit); "append" grows the file, as a WAL does until it starts over, so
// each sync also commits the new size through the file system's journal.
func BenchmarkFdatasync(b *testing.B) {
	for _, mode := range []string{"overwrite", "append"} {
		b.Run(mode, func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "sync"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			buf := []byte(strings.Repeat("x", 4096))
			if mode == "overwrite" {
				for i := 0; i < 256; i++ {
					if _, err := f.WriteAt(buf, int64(i)*4096); err != nil {
						b.Fatal(err)
					}
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				off := int64(i) * 4096
				if mode == "overwrite" {
					off = int64(i%256) * 4096
				}
				if _, err := f.WriteAt(buf, off); err != nil {
					b.Fatal(err)
				}
				if err := syscall.Fdatasync(int(f.Fd())); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// idKind is a way of choosing event ids and idempotency keys.
type idKind struct {
	name string
	id   func() string                     // a new eventId
	key  func(prefix string, i int) string // the key of the i-th event of a writer
}

func orderedKey(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }

// idKinds are the kinds of ids and keys the append benchmarks use: "random", UUIDv4 ids and
// keys, the worst case for a B-tree index (each new one lands on its own index page);
// "random-ids", UUIDv4 ids with keys counting up; and "ordered", time-ordered UUIDv7 ids (or
// ULID-like ones) with keys counting up, which land at the end of the indexes.
var idKinds = []idKind{
	{"random", uuid.NewString, func(string, int) string { return uuid.NewString() }},
	{"random-ids", uuid.NewString, orderedKey},
	{"ordered", func() string { return uuid.Must(uuid.NewV7()).String() }, orderedKey},
}

// BenchmarkAppendLatency appends one event at a time from a single writer: ns/op is the latency
// of one durable commit, to compare with BenchmarkFdatasync.
func BenchmarkAppendLatency(b *testing.B) {
	st := benchOpen(b, b.TempDir(), "S-lat")
	defer st.Close()
	evs := benchEvents(b, "S-lat", uuid.NewString(), b.N, uuid.NewString)
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for _, ev := range evs {
		if _, err := st.Append(ctx, "S-lat", []*contract.EncodedEvent{ev}, store.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	d := time.Since(start)
	b.StopTimer()
	report(b, len(evs), d)
}

// bytesWritten returns how many bytes this process has handed to write(2) and its kin so far
// (WAL, checkpoints, everything), or -1 where /proc/self/io is not available.
func bytesWritten() int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// BenchmarkSealGeneration is what sealing a full generation (65,536 events, random ids and
// keys) costs the writer, once per generation of a session: "seal" writes its keys and ids into
// their tables in key order and turns the open index the writer kept while the generation
// filled into its filter (the usual case; each op first deletes the tables' rows, which is
// counted); "scan" builds the filter from the tables instead (a generation without a stored
// filter). ns/op is one generation.
func BenchmarkSealGeneration(b *testing.B) {
	dir, err := bulkLoad(b, 1<<16, idKinds[0])
	defer os.RemoveAll(dir)
	if err != nil {
		b.Fatal(err)
	}
	st := benchOpen(b, dir)
	defer st.Close()
	ctx := context.Background()
	run := func(b *testing.B, op func(w *writer, ss *sessState) error) {
		r := &request{ctx: ctx, op: func(w *writer) error {
			ss, err := w.session(bigSession)
			if err != nil {
				return err
			}
			b.ResetTimer()
			for range b.N {
				if err := op(w, ss); err != nil {
					return err
				}
			}
			b.StopTimer()
			return nil
		}}
		if err := st.submit(ctx, r); err != nil || r.err != nil {
			b.Fatal(err, r.err)
		}
	}
	b.Run("scan", func(b *testing.B) {
		run(b, func(w *writer, ss *sessState) error { _, err := w.scanFilter(ss, 0); return err })
	})
	b.Run("seal", func(b *testing.B) {
		x := &openIndex{gen: 0, offs: map[uint64]int32{}}
		for i := range 1 << 16 {
			x.add(keyHash('k', uuid.NewString()), int32(i))
			x.add(keyHash('i', uuid.NewString()), int32(i))
		}
		run(b, func(w *writer, ss *sessState) error {
			for _, q := range []string{`DELETE FROM event_keys WHERE sk = ? AND gen = 0`, `DELETE FROM event_ids WHERE sk = ? AND gen = 0`} {
				if _, err := w.conn.ExecContext(w.ctx, q, ss.sk); err != nil {
					return err
				}
			}
			w.dropFilters(ss)
			w.setOpen(ss, x)
			return w.seal(ss, 0)
		})
	})
}
