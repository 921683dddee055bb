package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
	"github.com/sessiond/sessiond/store/storetest"
)

// fastListener shortens the listener's timing for the test.
func fastListener(t *testing.T) {
	t.Helper()
	pe, minB, maxB := pollEvery, minBackoff, maxBackoff
	pollEvery, minBackoff, maxBackoff = 50*time.Millisecond, 10*time.Millisecond, 200*time.Millisecond
	t.Cleanup(func() { pollEvery, minBackoff, maxBackoff = pe, minB, maxB })
}

func createSession(t testing.TB, st store.Store, id string) {
	t.Helper()
	if err := st.CreateSession(context.Background(), storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
		t.Fatalf("CreateSession(%s): %v", id, err)
	}
}

// follower follows a session through Subscribe and ReadEvents only (no polling): after each
// Commit it reads up to the commit's last sequence. It reports an error on any skipped or
// repeated sequence, and stops when it has seen total events or ctx ends.
func follower(ctx context.Context, st store.Store, id string, total int64) error {
	wake := make(chan int64, 1)
	var head atomic.Int64
	head.Store(-1)
	cancel := st.Subscribe(func(c store.Commit) {
		if c.SessionID != id {
			return
		}
		for {
			h := head.Load()
			if c.LastSequence <= h || head.CompareAndSwap(h, c.LastSequence) {
				break
			}
		}
		select {
		case wake <- c.LastSequence:
		default:
		}
	})
	defer cancel()
	last, err := st.LastSequence(ctx, id)
	if err != nil {
		return err
	}
	next := int64(0)
	upTo := last
	for {
		if next, err = storetest.CatchUp(ctx, st, id, next, upTo); err != nil {
			return err
		}
		if next >= total {
			return nil
		}
		select {
		case <-wake:
			upTo = head.Load()
		case <-ctx.Done():
			return fmt.Errorf("stopped at %d of %d with no commit reported for the rest: %w", next, total, ctx.Err())
		}
	}
}

// TestTwoInstancesGapFree appends to one session concurrently through two Stores on one schema
// while pollers and followers on both read it: nobody may ever see sequence N+1 before N.
func TestTwoInstancesGapFree(t *testing.T) {
	u := pgtest.Schema(t)
	a, b := openURL(t, u), openURL(t, u)
	const id = "S-gap"
	createSession(t, a, id)
	const writers, perWriter = 6, 200
	total := int64(writers * perWriter)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := 0; w < writers; w++ {
		st := []*Store{a, b}[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for i := 0; i < perWriter; {
				n := min(1+rng.Intn(8), perWriter-i)
				if _, err := st.Append(ctx, id, storetest.Batch(t, id, fmt.Sprintf("w%d-%d", w, i), n), store.AppendOptions{}); err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
				i += n
			}
		}()
	}
	for r, st := range []*Store{a, b, a, b} {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := storetest.Tail(ctx, st, id, total, 1+r*3); err != nil {
				errs <- fmt.Errorf("poller %d: %w", r, err)
			}
		}()
		go func() {
			defer wg.Done()
			if err := follower(ctx, st, id, total); err != nil {
				errs <- fmt.Errorf("follower %d: %w", r, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// terminator runs query (which calls pg_terminate_backend on the backends it selects) after
// waits drawn at random from [interval, 4 × interval) until stop is called, and counts the
// backends it ended. The waits vary so that a connection sometimes lives long enough to be
// opened and used: on a machine where opening one takes about 20 ms, a kill every 25 ms left
// no window, and the writers of TestDroppedConnectionsWhileAppending never got an append through.
func terminator(t *testing.T, interval time.Duration, query string, args ...any) (stop func() int) {
	t.Helper()
	admin := pgtest.Admin(t)
	done := make(chan struct{})
	var killed atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(interval + time.Duration(rand.Int63n(int64(3*interval)))):
			}
			var n int64
			if err := admin.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
				t.Errorf("terminate backends: %v", err)
				return
			}
			killed.Add(n)
		}
	}()
	return func() int {
		close(done)
		wg.Wait()
		return int(killed.Load())
	}
}

// TestListenerLoss kills the listener connection of instance B again and again while instance
// A appends: B's subscribers must still hear of every commit (after a reconnect, through the
// catch-up), so a follower that relies on commits alone reaches the end without a gap.
func TestListenerLoss(t *testing.T) {
	fastListener(t)
	u := pgtest.Schema(t)
	a, b := openURL(t, u), openURL(t, u)
	ids := []string{"S-l0", "S-l1", "S-l2"}
	for _, id := range ids {
		createSession(t, a, id)
	}
	const perSession = 600
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := pgtest.Admin(t)
	killDone := make(chan struct{})
	var kills atomic.Int64
	var stopped atomic.Bool
	stopKilling := func() { stopped.Store(true) }
	go func() {
		defer close(killDone)
		for ctx.Err() == nil && !stopped.Load() {
			time.Sleep(time.Duration(20+rand.Intn(60)) * time.Millisecond)
			pid := b.lis.pid.Load()
			var ok bool
			if err := admin.QueryRow(context.Background(), `SELECT pg_terminate_backend($1)`, int64(pid)).Scan(&ok); err == nil && ok {
				kills.Add(1)
			}
		}
	}()

	const final = 3 // appended at the end while B's listener is held disconnected
	var wg, writers sync.WaitGroup
	errs := make(chan error, 16)
	for _, id := range ids {
		wg.Add(1)
		writers.Add(1)
		go func() {
			defer wg.Done()
			if err := follower(ctx, b, id, perSession+final); err != nil {
				errs <- fmt.Errorf("follower of %s on B: %w", id, err)
			}
		}()
		go func() {
			defer writers.Done()
			for i := 0; i < perSession; i += 3 {
				if _, err := a.Append(ctx, id, storetest.Batch(t, id, fmt.Sprintf("b%d", i), 3), store.AppendOptions{}); err != nil {
					errs <- fmt.Errorf("append through A: %w", err)
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	writers.Wait()
	// The last commits happen while B's listener is down and held so: only the catch-up after
	// it reconnects can tell B's subscribers about them.
	stopKilling()
	<-killDone
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook := func() { once.Do(func() { close(held) }); <-release }
	testHookReconnect.Store(&hook)
	defer testHookReconnect.Store(nil)
	// Kill the listener's current connection (its pid changes with each reconnect) until the
	// listener is held disconnected.
	deadline := time.After(30 * time.Second)
hold:
	for {
		if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, int64(b.lis.pid.Load())); err != nil {
			t.Fatalf("terminate B's listener: %v", err)
		}
		select {
		case <-held:
			break hold
		case <-deadline:
			t.Fatal("B's listener did not notice it was disconnected")
		case <-time.After(20 * time.Millisecond):
		}
	}
	for _, id := range ids {
		if _, err := a.Append(ctx, id, storetest.Batch(t, id, "final", final), store.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	caught := b.lis.caughtUp.Load()
	close(release)
	wg.Wait()
	cancel()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := b.lis.caughtUp.Load() - caught; got < int64(len(ids)) {
		t.Errorf("the catch-up after the last reconnect reported %d commits, want at least %d", got, len(ids))
	}
	t.Logf("listener killed %d times, %d reconnects, %d commits reported by catch-up", kills.Load(), b.lis.reconnects.Load(), b.lis.caughtUp.Load())
	if kills.Load() == 0 || b.lis.reconnects.Load() == 0 {
		t.Errorf("the listener connection was never lost (%d kills, %d reconnects): the test proved nothing", kills.Load(), b.lis.reconnects.Load())
	}
}

// TestLostNotifications drops every NOTIFY of instance A (as if A crashed right after its
// commits): B's subscribers still hear of every commit, through B's poll.
func TestLostNotifications(t *testing.T) {
	fastListener(t)
	testHookDropNotify.Store(true)
	defer testHookDropNotify.Store(false)
	u := pgtest.Schema(t)
	a, b := openURL(t, u), openURL(t, u)
	const id, total = "S-lost", 60
	createSession(t, a, id)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- follower(ctx, b, id, total) }()
	for i := 0; i < total; i += 6 {
		if _, err := a.Append(ctx, id, storetest.Batch(t, id, fmt.Sprintf("b%d", i), 6), store.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if a.notifier.sent.Load() != 0 {
		t.Errorf("A sent %d notifications; the hook should have dropped them", a.notifier.sent.Load())
	}
}

// TestDroppedConnectionsWhileAppending terminates the store's connections again and again
// while writers append, each retrying a failed batch with the same idempotency keys until it is
// acknowledged. Afterwards every acknowledged event is in the log exactly once, at the sequence
// it was acknowledged with, and the sequences are gap-free.
func TestDroppedConnectionsWhileAppending(t *testing.T) {
	fastListener(t)
	app := fmt.Sprintf("sessiond-drop-%d", rand.Int63())
	u := pgtest.Schema(t) + "&application_name=" + app
	st := openURL(t, u)
	const id = "S-drop"
	createSession(t, st, id)
	stop := terminator(t, 25*time.Millisecond,
		`SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE $1 AND pid <> pg_backend_pid()) t`, app+"%")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const writers, batches, size = 4, 40, 5
	acked := make([]map[string]int64, writers)
	var failures atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		acked[w] = map[string]int64{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < batches; i++ {
				batch := storetest.Batch(t, id, fmt.Sprintf("w%d-b%d", w, i), size)
				for attempt := 0; ; attempt++ {
					res, err := st.Append(ctx, id, batch, store.AppendOptions{})
					if err == nil {
						for j, r := range res {
							acked[w][batch[j].IdempotencyKey] = r.Sequence
						}
						break
					}
					failures.Add(1)
					// Only failures of the connection are expected; retry those.
					if errors.As(err, new(*store.ConflictError)) || errors.As(err, new(*store.SequenceConflictError)) || attempt > 100 {
						errs <- fmt.Errorf("writer %d batch %d: %w", w, i, err)
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	killed := stop()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	log, err := readLog(ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != writers*batches*size {
		t.Errorf("log holds %d events, want %d", len(log), writers*batches*size)
	}
	seen := map[string]bool{}
	for i, e := range log {
		if e.Sequence != int64(i) {
			t.Fatalf("event %d has sequence %d: not gap-free", i, e.Sequence)
		}
		if seen[e.IdempotencyKey] {
			t.Errorf("key %s stored twice", e.IdempotencyKey)
		}
		seen[e.IdempotencyKey] = true
	}
	for w := range acked {
		for key, seq := range acked[w] {
			if seq >= int64(len(log)) || log[seq].IdempotencyKey != key {
				t.Errorf("key %s was acknowledged at sequence %d, which the log does not hold", key, seq)
			}
		}
	}
	t.Logf("%d backends terminated; %d appends failed and were retried by the writers", killed, failures.Load())
	if killed == 0 {
		t.Error("no backend was terminated: the test proved nothing")
	}
}

func readLog(ctx context.Context, st store.Store, id string) ([]store.StoredEvent, error) {
	var out []store.StoredEvent
	after := int64(-1)
	for {
		page, err := st.ReadEvents(ctx, id, after, 0)
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			return out, nil
		}
		out = append(out, page...)
		after = page[len(page)-1].Sequence
	}
}

// TestNoLeaks opens and closes stores many times, with listener reconnects in between, and
// checks that goroutines and server connections return to where they were.
func TestNoLeaks(t *testing.T) {
	fastListener(t)
	app := fmt.Sprintf("sessiond-leak-%d", rand.Int63())
	u := pgtest.Schema(t) + "&application_name=" + app
	admin := pgtest.Admin(t)
	ctx := context.Background()
	warm := openURL(t, u) // the first Open migrates; pgx's own lazy goroutines start here
	createSession(t, warm, "S-leak")
	warm.Close()
	runtime.GC()
	before := runtime.NumGoroutine()
	for i := 0; i < 15; i++ {
		st, err := Open(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		cancel := st.Subscribe(func(store.Commit) {})
		if _, err := st.Append(ctx, "S-leak", storetest.Batch(t, "S-leak", fmt.Sprintf("c%d", i), 2), store.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 { // force a listener reconnect
			est := st.lis.established.Load()
			if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, int64(st.lis.pid.Load())); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for st.lis.established.Load() == est && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if st.lis.established.Load() == est {
				t.Fatal("the listener did not reconnect")
			}
		}
		cancel()
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	var after int
	for {
		runtime.GC()
		after = runtime.NumGoroutine()
		if after <= before || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if after > before {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines: %d before, %d after 15 Open/Close cycles\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
	var conns int
	for {
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE $1`, app+"%").Scan(&conns); err != nil {
			t.Fatal(err)
		}
		if conns == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if conns != 0 {
		t.Errorf("%d server connections of closed stores remain", conns)
	}
}

// TestConcurrentOpen starts several instances on one fresh schema at once: the migrations are
// applied once and every Open succeeds.
func TestConcurrentOpen(t *testing.T) {
	u, schema := pgtest.NewSchema(t)
	const n = 8
	var wg sync.WaitGroup
	stores := make([]*Store, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = Open(context.Background(), u)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Open %d: %v", i, errs[i])
			continue
		}
		stores[i].Close()
	}
	admin := pgtest.Admin(t)
	var versions []int
	rows, err := admin.Query(context.Background(), `SELECT version FROM `+schema+`.schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		versions = append(versions, v)
	}
	ms, _ := migrations()
	if len(versions) != len(ms) {
		t.Errorf("schema_migrations holds %v, want each of the %d migrations once", versions, len(ms))
	}
}

// TestKeyPayload checks the listener's handling of the payload sent for a session id too long
// for NOTIFY ("k <lastSeq> <sk>"): contract session ids never are, so the test sends it itself.
func TestKeyPayload(t *testing.T) {
	u := pgtest.Schema(t)
	st := openURL(t, u)
	createSession(t, st, "S-key")
	sk, err := st.sessionKey(context.Background(), "S-key")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan store.Commit, 4)
	defer st.Subscribe(func(c store.Commit) { got <- c })()
	admin := pgtest.Admin(t)
	if _, err := admin.Exec(context.Background(), `SELECT pg_notify($1, $2)`, st.channel, commitPayload(strings.Repeat("x", 8000), sk, 4)); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-got:
		if c.SessionID != "S-key" || c.LastSequence != 4 || c.Events != nil {
			t.Errorf("commit = %+v, want S-key at 4", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no commit reported for a k payload")
	}
}

func TestOpenErrors(t *testing.T) {
	base := pgtest.BaseURL(t)
	newer, schema := pgtest.NewSchema(t)
	st := openURL(t, newer)
	st.Close()
	admin := pgtest.Admin(t)
	if _, err := admin.Exec(context.Background(), `INSERT INTO `+schema+`.schema_migrations (version, name) VALUES (999, '999_future.sql')`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, url, want string
	}{
		{"missing schema", pgtest.WithSearchPath(t, base, "sessiond_no_such_schema"), `search_path "sessiond_no_such_schema" exists; create it (CREATE SCHEMA`},
		{"newer schema", newer, "run a newer sessiond"},
		{"bad URL", "postgres://%zz", "parse the database URL"},
		{"unreachable", "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2", "connect"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := Open(context.Background(), c.url)
			if err == nil {
				st.Close()
				t.Fatalf("Open succeeded")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
		})
	}
}

// TestOpenWithoutCreatePrivilege opens a migrated schema as a role that may only read and
// write its tables (no CREATE), as docs/deploy.md promises.
func TestOpenWithoutCreatePrivilege(t *testing.T) {
	u, schema := pgtest.NewSchema(t)
	st := openURL(t, u)
	createSession(t, st, "S-priv")
	st.Close()
	admin := pgtest.Admin(t)
	ctx := context.Background()
	role := fmt.Sprintf("sessiond_test_role_%d", rand.Int63())
	q := pgx.Identifier{schema}.Sanitize()
	r := pgx.Identifier{role}.Sanitize()
	for _, stmt := range []string{
		"CREATE ROLE " + r + " LOGIN",
		"GRANT USAGE ON SCHEMA " + q + " TO " + r,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA " + q + " TO " + r,
		"GRANT USAGE ON ALL SEQUENCES IN SCHEMA " + q + " TO " + r,
	} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() {
		admin.Exec(context.Background(), "DROP OWNED BY "+r)
		admin.Exec(context.Background(), "DROP ROLE "+r)
	})
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.User = url.User(role)
	st = openURL(t, pu.String())
	if _, err := st.Append(ctx, "S-priv", storetest.Batch(t, "S-priv", "k", 2), store.AppendOptions{}); err != nil {
		t.Fatalf("Append as a role without CREATE: %v", err)
	}
}
