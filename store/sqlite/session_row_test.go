package sqlite

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// TestAppendHeartbeatResolution: an append writes its heartbeat on the session row only when it
// is the session's first, revives a stale session, or is heartbeatResolution past the stored
// one; what is stored survives a reopen (nothing of it is held only in memory), so the stored
// heartbeat is never more than heartbeatResolution older than the latest acknowledged append's,
// and the sweeper's query (ExpiredSessions) reads that value after a restart.
func TestAppendHeartbeatResolution(t *testing.T) {
	ctx := context.Background()
	const id = "S-hb"
	dir, st := openWithSession(t, id)
	defer func() { st.Close() }()
	var err error
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	n := 0
	appendAt := func(hb time.Time) {
		t.Helper()
		n++
		ev := storetest.TerminalEvent(t, id, "k-"+hb.Format(time.RFC3339Nano)+"-"+string(rune('a'+n)), "x")
		if _, err := st.Append(ctx, id, []*contract.EncodedEvent{ev}, store.AppendOptions{Heartbeat: hb}); err != nil {
			t.Fatal(err)
		}
	}
	stored := func() (string, string) {
		t.Helper()
		s, err := st.GetSession(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return s.Record.LastHeartbeatAt.Get(), s.Record.Status
	}
	for i, step := range []struct {
		hb   time.Time
		want time.Time // the stored heartbeat after the append
	}{
		{t0, t0},                                                   // the first heartbeat
		{t0.Add(500 * time.Millisecond), t0},                       // within the resolution: not written
		{t0.Add(999 * time.Millisecond), t0},                       // still within
		{t0.Add(time.Second), t0.Add(time.Second)},                 // a full resolution later
		{t0.Add(1500 * time.Millisecond), t0.Add(time.Second)},     // within again
		{t0.Add(-time.Hour), t0.Add(time.Second)},                  // an older heartbeat never moves it back
		{t0.Add(3 * time.Second), t0.Add(3 * time.Second)},         // written
		{t0.Add(3100 * time.Millisecond), t0.Add(3 * time.Second)}, // within
	} {
		appendAt(step.hb)
		if got, _ := stored(); got != contract.FormatTime(step.want) {
			t.Fatalf("step %d: stored heartbeat %s after an append at %s, want %s", i, got, contract.FormatTime(step.hb), contract.FormatTime(step.want))
		}
	}

	// A stale session comes back to running with an append, whatever the stored heartbeat.
	if _, err := st.UpdateSession(ctx, id, func(s *store.Session) error {
		s.Record.Status = contract.SessionStatusStale
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	revive := t0.Add(3200 * time.Millisecond) // within the resolution of the stored one
	appendAt(revive)
	if got, status := stored(); got != contract.FormatTime(revive) || status != contract.SessionStatusRunning {
		t.Fatalf("after an append to a stale session: heartbeat %s, status %s; want %s, running", got, status, contract.FormatTime(revive))
	}
	appendAt(revive.Add(100 * time.Millisecond)) // acknowledged, within the resolution: not written

	// Reopen: the stored heartbeat is what the sweeper sees, at most the resolution behind.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = Open(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if got, _ := stored(); got != contract.FormatTime(revive) {
		t.Fatalf("after a reopen the stored heartbeat is %s, want %s", got, contract.FormatTime(revive))
	}
	exp, err := st.ExpiredSessions(ctx, revive.Add(time.Millisecond), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(exp) != 1 || exp[0].SessionID != id || !exp[0].Heartbeat.Equal(revive) {
		t.Fatalf("ExpiredSessions after a reopen = %+v, want %s with heartbeat %s", exp, id, revive)
	}
	if last, err := st.LastSequence(ctx, id); err != nil || last != int64(n-1) {
		t.Fatalf("LastSequence after a reopen = %d, %v; want %d", last, err, n-1)
	}
}

// TestLastSequenceAfterCompaction: the session row no longer follows every append, so the last
// sequence is read from the log's end (lastSeqExpr); a compaction that removes the whole log
// leaves it on the session row, and the next append takes the next sequence, also after a
// reopen.
func TestLastSequenceAfterCompaction(t *testing.T) {
	ctx := context.Background()
	const id = "S-compact"
	dir, st := openWithSession(t, id)
	defer func() { st.Close() }()
	var err error
	if _, err := st.Append(ctx, id, storetest.Batch(t, id, "a", 3), store.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CompactEvents(ctx, id, 2); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		if last, err := st.LastSequence(ctx, id); err != nil || last != 2 {
			t.Fatalf("round %d: LastSequence after compacting the whole log = %d, %v; want 2", round, last, err)
		}
		if s, err := st.GetSession(ctx, id); err != nil || s.LastSequence != 2 {
			t.Fatalf("round %d: GetSession after compacting the whole log: %v, %v; want last sequence 2", round, s, err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if st, err = Open(ctx, dir); err != nil {
			t.Fatal(err)
		}
	}
	res, err := st.Append(ctx, id, storetest.Batch(t, id, "b", 1), store.AppendOptions{})
	if err != nil || len(res) != 1 || res[0].Sequence != 3 {
		t.Fatalf("append after the compaction = %+v, %v; want sequence 3", res, err)
	}
}

// TestEventQueryPlans: every read of the events table is a range or a point of its integer key
// (rid = sk * 2^32 + seq), never a scan of the table, and every read of event_tail goes through
// its index on rid; a range read reads one after the other, without a sort or a merge
// (inBothTables: each arm in key order).
func TestEventQueryPlans(t *testing.T) {
	st, err := Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, tc := range []struct {
		name string
		q    string
		args []any
	}{
		{"read", qReadEvents, []any{1, -1, 10}},
		{"read the bytes", qReadEventsData, []any{1, -1, 10}},
		{"event at a sequence", qEventAt, []any{1, 5}},
		{"key at a sequence", qKeyAt, []any{1, 5}},
		{"last sequence", `SELECT ` + lastSeqExpr + ` FROM sessions WHERE id = ?`, []any{"S-1"}},
		{"lookup by key", eventByGen("event_keys", "idem_key"), []any{1, "k", 0, true, 0}},
		{"lookup by id", eventByGen("event_ids", "event_id"), []any{1, "k", 0, true, 0}},
		{"seal's keys", qSealKeys, []any{1, 0, 0, 15}},
		{"seal's ids", qSealIDs, []any{1, 0, 0, 15}},
	} {
		all := queryPlan(t, st, tc.q, tc.args...)
		if strings.Contains(all, "SCAN events") || strings.Contains(all, "SCAN event_tail") || strings.Contains(all, "SCAN e ") || strings.HasSuffix(all, "SCAN e") ||
			!strings.Contains(all, "SEARCH events USING INTEGER PRIMARY KEY") && !strings.Contains(all, "SEARCH e USING INTEGER PRIMARY KEY") ||
			!strings.Contains(all, "INDEX event_tail_rid") {
			t.Errorf("%s: plan %q, want the events table searched by its integer key and event_tail by its index on rid", tc.name, all)
		}
		if strings.HasPrefix(tc.name, "read") && (strings.Contains(all, "TEMP B-TREE") || strings.Contains(all, "MERGE") ||
			strings.Index(all, "SEARCH events") > strings.Index(all, "SEARCH event_tail")) {
			t.Errorf("%s: plan %q, want events then event_tail, each searched in key order", tc.name, all)
		}
	}
}

// openWithSession opens a store in a new directory with one session, id.
func openWithSession(t *testing.T, id string) (string, *Store) {
	t.Helper()
	dir := t.TempDir()
	st, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateSession(context.Background(), storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
		st.Close()
		t.Fatal(err)
	}
	return dir, st
}

// queryPlan returns the details of SQLite's plan for q on the read pool, joined with "; ".
func queryPlan(t *testing.T, st *Store, q string, args ...any) string {
	t.Helper()
	rows, err := st.rdb.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}
