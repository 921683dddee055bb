package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
	"github.com/sessiond/sessiond/store/storetest"
)

// largeSessionEvents is the size of the large session of the tests and benchmarks below.
const largeSessionEvents = 100_000

// largeSession creates session id with n events of about 470 bytes with random eventIds and
// keys, written with one INSERT (appending them through the driver would take minutes on a
// loaded machine; the tests below are about how the database finds and adds events, not about
// the events' content), and a new, empty session emptyID; then it analyzes the tables, so that
// the planner knows the session is large. It returns the large session's internal key.
func largeSession(t testing.TB, st *Store, id, emptyID string, n int) int64 {
	t.Helper()
	sk := sessionOfRows(t, st, id, emptyID, n)
	if _, err := st.pool.Exec(context.Background(), `ANALYZE events; ANALYZE sessions`); err != nil {
		t.Fatal(err)
	}
	return sk
}

// sessionOfRows is largeSession without the ANALYZE: the planner may know nothing of the
// tables, as in a new database.
func sessionOfRows(t testing.TB, st *Store, id, emptyID string, n int) int64 {
	t.Helper()
	ctx := context.Background()
	for _, s := range []string{id, emptyID} {
		if err := st.CreateSession(ctx, storetest.NewSession(s, storetest.SessionSpec{})); err != nil {
			t.Fatal(err)
		}
	}
	sk, err := st.sessionKey(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.pool.Exec(ctx, `INSERT INTO events (sk, seq, event_id, idem_key, event_type, run_id, data)
		SELECT $1, g, gen_random_uuid()::text, gen_random_uuid()::text, 'terminal', '', convert_to(repeat('x', 470), 'UTF8')
		FROM generate_series(0, $2::bigint - 1) AS g`, sk, n); err != nil {
		t.Fatal(err)
	}
	if _, err := st.pool.Exec(ctx, `UPDATE session_heads SET last_seq = $2 - 1 WHERE sk = $1`, sk, n); err != nil {
		t.Fatal(err)
	}
	return sk
}

// TestDuplicateLookupUsesUniqueIndexes: in a session of 100,000 events, the statements that look
// up a batch's stored keys and eventIds (the one-statement append and the locking path's
// lookup) read the unique indexes (session, key) and (session, eventId), whatever plan the
// server caches (custom or generic), and touch a few pages per key, not the session's events:
// an OR of the two conditions was planned as a scan of the whole session. Also in a session of
// 2,000 events of a table without statistics (a new database's first minute), where
// "idem_key = ANY(...)" was planned as a read of every event of the session.
func TestDuplicateLookupUsesUniqueIndexes(t *testing.T) {
	for _, c := range []struct {
		name    string
		n       int
		analyze bool
	}{{"analyzed", largeSessionEvents, true}, {"no statistics", 2000, false}} {
		t.Run(c.name, func(t *testing.T) {
			st := openURL(t, pgtest.Schema(t))
			var sk int64
			if c.analyze {
				sk = largeSession(t, st, "S-large", "S-empty", c.n)
			} else {
				sk = sessionOfRows(t, st, "S-large", "S-empty", c.n)
			}
			checkDuplicateLookups(t, st, sk)
		})
	}
}

// checkDuplicateLookups checks the plans of the duplicate lookups in session S-large (sk).
func checkDuplicateLookups(t *testing.T, st *Store, sk int64) {
	ctx := context.Background()
	keys, ids := make([]string, 64), make([]string, 64)
	for i := range keys {
		keys[i], ids[i] = uuid.NewString(), uuid.NewString()
	}
	var stored []string
	if err := st.pool.QueryRow(ctx, `SELECT array_agg(idem_key) FROM (SELECT idem_key FROM events WHERE sk = $1 LIMIT 8) AS s`, sk).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	copy(keys, stored) // some keys are stored: the lookups find rows too
	unique := map[string]bool{}
	rows, err := st.pool.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'events'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(def, "(sk, idem_key)") || strings.Contains(def, "(sk, event_id)") {
			unique[name] = true
		}
	}
	if rows.Err() != nil || len(unique) != 2 {
		t.Fatalf("unique indexes of events: %v (%v)", unique, rows.Err())
	}

	n := len(keys)
	empty := make([]string, n)
	heads := make([][]byte, n)
	genesis := store.ChainGenesis[:] // the new head and the head the batch follows (qDirect)
	// The batch's first key is stored, so the one-statement append of a large batch looks up
	// every key and eventId too: the first key, the others, the eventIds, a read of events
	// each.
	statements := []struct {
		name  string
		q     string
		args  []any
		reads int
	}{
		{"one-statement append", qDirects[0][1][0][0], []any{sk, keys, ids, nil, empty, empty, heads, heads, "2026-03-01T12:00:00Z", genesis, genesis}, 2},
		{"one-statement append of a large batch", qDirects[1][1][0][0], []any{sk, keys, ids, nil, empty, empty, heads, heads, "2026-03-01T12:00:00Z", genesis, genesis}, 3},
		{"locking path lookup", qExisting, []any{"S-large", keys, ids}, 2},
	}
	for _, s := range statements {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			t.Run(s.name+"/"+mode, func(t *testing.T) {
				conn, err := st.pool.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Release()
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback(ctx)
				if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = `+mode); err != nil {
					t.Fatal(err)
				}
				if _, err := tx.Exec(ctx, `PREPARE lookup AS `+s.q); err != nil {
					t.Fatal(err)
				}
				defer conn.Exec(ctx, `DEALLOCATE lookup`) //nolint:errcheck // after the rollback
				params := make([]string, len(s.args))
				for i := range params {
					params[i] = fmt.Sprintf("$%d", i+1)
				}
				var plan string
				// ANALYZE runs the statement; the transaction is rolled back.
				args := append([]any{pgx.QueryExecModeSimpleProtocol}, s.args...)
				if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE lookup(`+strings.Join(params, ", ")+`)`, args...).Scan(&plan); err != nil {
					t.Fatal(err)
				}
				var doc []struct{ Plan planNode }
				if err := json.Unmarshal([]byte(plan), &doc); err != nil || len(doc) != 1 {
					t.Fatalf("EXPLAIN: %v\n%s", err, plan)
				}
				lookups := 0
				doc[0].Plan.walk(func(p *planNode) {
					if p.Relation != "events" || p.Type == "ModifyTable" {
						return
					}
					lookups++
					if (p.Type != "Index Scan" && p.Type != "Index Only Scan") || !unique[p.Index] {
						t.Errorf("events read by %s %s, want an index scan of a unique index (%v)", p.Type, p.Index, unique)
					}
				})
				if lookups != s.reads {
					t.Errorf("%d reads of events, want %d (each of a unique index)\n%s", lookups, s.reads, plan)
				}
				// A descent of each index per key, and the heap page of each row found: a
				// handful of pages per key. A scan of the session would read thousands.
				if max := 2 * n * 6; doc[0].Plan.lookupBuffers() > max {
					t.Errorf("the lookups touched %d buffers for %d keys and eventIds, want at most %d\n%s", doc[0].Plan.lookupBuffers(), 2*n, max, plan)
				}
			})
		}
	}
}

// TestDirectAppendPlannedOnce: the one-statement append is planned once per connection (a
// generic plan) after the server's first five custom plans, for single events as for
// batches, also for a small session of a large table, whose key the statistics place beyond
// every other: planning it again at every append cost about 0.5 ms of the server's CPU. Small
// batches (at most maxGroupedEvents events) and large ones have statements of their own.
func TestDirectAppendPlannedOnce(t *testing.T) {
	st := openURL(t, pgtest.Schema(t)+"&pool_max_conns=1")
	ctx := context.Background()
	largeSession(t, st, "S-large", "S-small", 20_000)
	for first, sizes := range [2][2]int{{1, maxGroupedEvents}, {maxGroupedEvents + 1, 64}} {
		for i, id := range []string{"S-small", "S-large"} {
			for j := range 10 {
				// Batches of two sizes: the arrays' lengths must not sway the planner either.
				if _, err := st.Append(ctx, id, storetest.Batch(t, id, uuid.NewString(), sizes[(i+j)%2]), serviceOpts()); err != nil {
					t.Fatal(err)
				}
			}
			var custom, generic int64
			if err := st.pool.QueryRow(ctx, `SELECT custom_plans, generic_plans FROM pg_prepared_statements
				WHERE statement = $1`, qDirects[first][1][0][0]).Scan(&custom, &generic); err != nil {
				t.Fatal(err)
			}
			if custom > 5 {
				t.Errorf("after 10 appends of %v events to %s: %d custom plans and %d generic ones, want at most 5 custom", sizes, id, custom, generic)
			}
		}
	}
}

// planNode is a node of EXPLAIN (FORMAT JSON).
type planNode struct {
	Type     string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Index    string     `json:"Index Name"`
	Hit      int        `json:"Shared Hit Blocks"`
	Read     int        `json:"Shared Read Blocks"`
	Plans    []planNode `json:"Plans"`
}

func (p *planNode) walk(fn func(*planNode)) {
	fn(p)
	for i := range p.Plans {
		p.Plans[i].walk(fn)
	}
}

// lookupBuffers returns the buffers the reads of events touched (their counts include their
// children's).
func (p *planNode) lookupBuffers() int {
	n := 0
	p.walk(func(q *planNode) {
		if q.Relation == "events" && q.Type != "ModifyTable" {
			n += q.Hit + q.Read
		}
	})
	return n
}

// TestAppendWaitsForALockedSession: while another transaction holds the session's row, an
// append waits for it (the one-statement append does not wait: it takes the locking path),
// gives up with its context's error without writing anything, and goes through once the row
// is free.
func TestAppendWaitsForALockedSession(t *testing.T) {
	st := openURL(t, pgtest.Schema(t))
	ctx := context.Background()
	if err := st.CreateSession(ctx, storetest.NewSession("S-1", storetest.SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM sessions WHERE id = 'S-1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	evs := storetest.Batch(t, "S-1", "k", 2)
	if !store.Unconditional(evs, serviceOpts()) {
		t.Fatal("the batch is not unconditional")
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = st.Append(cctx, "S-1", evs, serviceOpts())
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Append to a locked session: %v, want the context's deadline", err)
	}
	appendWaitsForLock(t, ctx, tx, func() error {
		res, err := st.Append(ctx, "S-1", evs, serviceOpts())
		if err == nil && (len(res) != 2 || res[1].Sequence != 1 || res[1].Duplicate) {
			err = fmt.Errorf("results %+v, want sequences 0 and 1", res)
		}
		return err
	})
	if last, err := st.LastSequence(ctx, "S-1"); err != nil || last != 1 {
		t.Errorf("LastSequence = %d, %v; want 1", last, err)
	}
}

// BenchmarkAppendLargeSession: batches of 64 events with random ids appended, as the service
// appends, to an empty session and to a session of 100,000 events of the same database (side
// by side: the second should cost no more than 20% more). Run it with -count: the sub-benchmarks
// run one after the other, and the load of the machine may change in between.
func BenchmarkAppendLargeSession(b *testing.B) {
	st := openBenchPG(b)
	largeSession(b, st, "S-large", "S-empty", largeSessionEvents)
	// The fixture's 100,000 rows leave dirty pages and WAL behind: flush them now (a superuser
	// may), so that they do not slow whichever sub-benchmark runs first; then one batch each.
	if _, err := st.pool.Exec(context.Background(), `CHECKPOINT`); err != nil {
		b.Logf("CHECKPOINT: %v (the first sub-benchmark may pay for the fixture's writes)", err)
	}
	for _, id := range []string{"S-empty", "S-large"} {
		if _, err := st.Append(context.Background(), id, benchRandomBatches(b, id, 1, 64)[0], serviceOpts()); err != nil {
			b.Fatal(err)
		}
	}
	for _, id := range []string{"S-empty", "S-large"} {
		name := map[string]string{"S-empty": "empty", "S-large": "100k"}[id]
		b.Run(name, func(b *testing.B) {
			batches := benchRandomBatches(b, id, b.N, 64)
			b.ResetTimer()
			for _, batch := range batches {
				if _, err := st.Append(context.Background(), id, batch, serviceOpts()); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*64)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// TestAppendLargeSessionCost: appending to a session of 100,000 events costs no more than
// appending to an empty one, within 20%, counted in the blocks the appends read and write of
// the events table and its indexes (pg_statio_user_tables): a figure that the machine's load
// cannot sway, where the timings of BenchmarkAppendLargeSession on a shared machine cannot
// resolve 20%. A lookup that scanned the session, or a plan that depended on its size, would
// cost thousands of blocks more.
//
// A session created after both holds 1,000 events (more than a leaf page of the primary key
// holds), so that neither compared session's rows are the last of the primary key (session,
// sequence): PostgreSQL inserts into the rightmost leaf of a B-tree without descending it, one
// block instead of three per event, an advantage of the newest session's place in the index
// that has nothing to do with its size. Without it, the empty session (created after the
// large one) read about 120 blocks fewer per append for that reason alone.
func TestAppendLargeSessionCost(t *testing.T) {
	// One connection: the appends and the statistics' flush share it.
	st := openURL(t, pgtest.Schema(t)+"&pool_max_conns=1")
	ctx := context.Background()
	largeSession(t, st, "S-large", "S-empty", largeSessionEvents)
	if err := st.CreateSession(ctx, storetest.NewSession("S-after", storetest.SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	for range 16 {
		if _, err := st.Append(ctx, "S-after", storetest.Batch(t, "S-after", uuid.NewString(), 64), serviceOpts()); err != nil {
			t.Fatal(err)
		}
	}
	blocks := func() int64 {
		t.Helper()
		if _, err := st.pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := st.pool.QueryRow(ctx, `SELECT COALESCE(heap_blks_read, 0) + COALESCE(heap_blks_hit, 0) + COALESCE(idx_blks_read, 0) + COALESCE(idx_blks_hit, 0)
			FROM pg_statio_user_tables WHERE schemaname = current_schema() AND relname = 'events'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const batches = 10
	per := map[string]float64{}
	for _, id := range []string{"S-empty", "S-large"} {
		for i := range 3 { // warm up: the statement's plan, the session's pages
			batch := make([]*contract.EncodedEvent, 64)
			for j := range batch {
				batch[j] = storetest.EventWithID(t, id, uuid.NewString(), uuid.NewString(), fmt.Sprintf("warm %d %d", i, j))
			}
			if _, err := st.Append(ctx, id, batch, serviceOpts()); err != nil {
				t.Fatal(err)
			}
		}
		b0 := blocks()
		for i := range batches {
			batch := make([]*contract.EncodedEvent, 64)
			for j := range batch {
				batch[j] = storetest.EventWithID(t, id, uuid.NewString(), uuid.NewString(), fmt.Sprintf("event %d %d", i, j))
			}
			if _, err := st.Append(ctx, id, batch, serviceOpts()); err != nil {
				t.Fatal(err)
			}
		}
		per[id] = float64(blocks()-b0) / batches
	}
	t.Logf("blocks of events and its indexes per append of 64 events: empty session %.0f, 100,000-event session %.0f", per["S-empty"], per["S-large"])
	if per["S-empty"] <= 0 || per["S-large"] > 1.2*per["S-empty"] {
		t.Errorf("an append to the 100,000-event session reads %.0f blocks, to an empty one %.0f: more than 20%% apart", per["S-large"], per["S-empty"])
	}
}

// appendWaitsForLock checks that app, an append, does not return while tx holds a lock it
// needs, and succeeds once tx rolls back.
func appendWaitsForLock(t *testing.T, ctx context.Context, tx pgx.Tx, app func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- app() }()
	select {
	case err := <-done:
		t.Fatalf("the append went through while the lock was held: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("append after the lock: %v", err)
	}
}
