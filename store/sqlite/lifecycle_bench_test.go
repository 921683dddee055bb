package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
)

// Sweeper benchmarks: a store of sweepSessions running sessions whose heartbeats are one
// second apart (session i last beat at sweepBase + i s), built once per process with bulk
// inserts. A sweep at time T with a TTL finds the sessions whose heartbeat is before T-TTL.
const sweepSessions = 1_000_000

var sweepBase = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

var (
	sweepOnce sync.Once
	sweepDir  string
	sweepErr  error
)

// sweepStore returns a copy-on-first-use directory with sweepSessions sessions.
func sweepStore(b *testing.B) string {
	sweepOnce.Do(func() {
		sweepDir, sweepErr = os.MkdirTemp("", "sessiond-sweep-bench-")
		if sweepErr != nil {
			return
		}
		bigDirs["sweep"] = sweepDir
		start := time.Now()
		sweepErr = bulkSessions(sweepDir, sweepSessions)
		b.Logf("built %d sessions in %s", sweepSessions, time.Since(start).Round(time.Millisecond))
	})
	if sweepErr != nil {
		b.Fatal(sweepErr)
	}
	return sweepDir
}

// bulkSessions creates a store in dir with n running sessions, inserted through one
// transaction on a plain connection (the store's migrations first, through Open).
func bulkSessions(dir string, n int) error {
	s, err := Open(context.Background(), dir)
	if err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		return err
	}
	db, err := sql.Open("sqlite", dsn(filepath.Join(dir, DBFile), roleWriter))
	if err != nil {
		return err
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	stmt, err := tx.Prepare(`INSERT INTO sessions (id, status, agent_id, project, record, snapshot) VALUES (?, 'running', 'agent-1', '', ?, ?)`)
	if err != nil {
		return err
	}
	const snapshot = `{"mode":"work","modelId":"model-1","capabilities":{"tools":true}}`
	for i := range n {
		id := fmt.Sprintf("S-%08d", i)
		hb := contract.FormatTime(sweepBase.Add(time.Duration(i) * time.Second))
		rec := fmt.Sprintf(`{"schema_version":1,"session_id":%q,"agent_id":"agent-1","role":"implementer","status":"running","started_at":"2026-03-01T00:00:00.000Z","last_heartbeat_at":%q,"updated_at":"2026-03-01T00:00:00.000Z"}`, id, hb)
		if _, err := stmt.Exec(id, rec, snapshot); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	_, err = db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	return err
}

// BenchmarkSweepNothingExpired is one sweep over a store of a million live sessions of which
// none has expired: the cost of a sweep that finds nothing (an index probe).
func BenchmarkSweepNothingExpired(b *testing.B) {
	dir := sweepStore(b)
	s, err := Open(context.Background(), dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	svc := session.New(s, session.Options{Clock: session.ClockFunc(func() time.Time { return sweepBase.Add(-time.Hour) })})
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		res, err := svc.Sweep(ctx, session.SweepOptions{StaleAfter: 10 * time.Minute})
		if err != nil || res.Expired != 0 {
			b.Fatalf("Sweep = %+v, %v", res, err)
		}
	}
	b.ReportMetric(float64(sweepSessions)*float64(b.N)/b.Elapsed().Seconds(), "sessions-checked/s")
}

// BenchmarkSweepExpire sweeps a million-session store where, per op, the next perOp sessions
// have expired: each op marks exactly perOp sessions stale (each a conditional update of its
// record, committed with fsync, several at once through the writer's group commit). It reports
// expired sessions handled per second.
func BenchmarkSweepExpire(b *testing.B) {
	const perOp = 1000
	dir := sweepStore(b)
	s, err := Open(context.Background(), dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	// Start after the sessions earlier runs of this benchmark (same process) marked stale.
	first, err := s.ExpiredSessions(ctx, sweepBase.Add(sweepSessions*time.Second), 1)
	if err != nil || len(first) == 0 {
		b.Fatalf("no live session left: %v", err)
	}
	next := first[0].Heartbeat
	var mu sync.Mutex
	now := next
	svc := session.New(s, session.Options{Clock: session.ClockFunc(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })})
	stale := 0
	b.ResetTimer()
	for b.Loop() {
		mu.Lock()
		now = now.Add(perOp * time.Second)
		mu.Unlock()
		res, err := svc.Sweep(ctx, session.SweepOptions{StaleAfter: time.Nanosecond, Batch: perOp})
		if err != nil || res.Stale != perOp {
			b.Fatalf("Sweep = %+v, %v; want %d stale", res, err, perOp)
		}
		stale += res.Stale
	}
	b.ReportMetric(float64(stale)/b.Elapsed().Seconds(), "sessions-expired/s")
}
