package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// sqliteShell returns the path of the sqlite3 shell; the test is skipped without one, unless it
// runs under CI=true (.ci/run installs it), where that fails it.
func sqliteShell(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("sqlite3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no sqlite3 shell under CI=true (.ci/run installs it): %v", err)
		}
		t.Skipf("no sqlite3 shell: %v", err)
	}
	return path
}

// shell runs sql in the sqlite3 shell on the store's database in dir and returns its output.
func shell(t *testing.T, sqlite3, dir, sql string) string {
	t.Helper()
	out, err := exec.Command(sqlite3, filepath.Join(dir, DBFile), sql).CombinedOutput()
	if err != nil {
		t.Fatalf("sqlite3 %q: %v\n%s", sql, err, out)
	}
	return strings.TrimSpace(string(out))
}

// liveSessions creates, in st, a running and a paused session (the ones the heartbeat index
// holds) and a closed one, and queues a run in the running one (runs' queued_ms, the change
// triggers).
func liveSessions(t *testing.T, st store.Store) {
	t.Helper()
	ctx := context.Background()
	for id, status := range map[string]string{"S-running": "running", "S-paused": "paused", "S-closed": "closed"} {
		if err := st.CreateSession(ctx, storetest.NewSession(id, storetest.SessionSpec{Status: status})); err != nil {
			t.Fatal(err)
		}
	}
	queued := storetest.RunStatusEvent(t, "S-running", "k-r1", "r1", "m1", "queued")
	if _, err := st.Append(ctx, "S-running", []*contract.EncodedEvent{queued}, store.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestSchemaWorksInTheSQLiteShell: the stock sqlite3 shell (Debian 12's is 3.40.1, older than
// the 3.42 unixepoch(…, 'subsec') needs) finds a store with running and paused sessions sound in
// PRAGMA integrity_check, and can update their rows by hand (the heartbeat index's generated
// column and the change triggers evaluate), with the values the store computes. Before
// migration 0012, integrity_check reported "row N missing from index
// sessions_live_heartbeat" for every running or paused session, and the update failed.
func TestSchemaWorksInTheSQLiteShell(t *testing.T) {
	sqlite3 := sqliteShell(t)
	t.Logf("sqlite3 %s", shell(t, sqlite3, t.TempDir(), "SELECT sqlite_version()"))
	dir := t.TempDir()
	st := openAt(t, dir)
	liveSessions(t, st)
	if got := shell(t, sqlite3, dir, "PRAGMA integrity_check"); got != "ok" {
		t.Fatalf("PRAGMA integrity_check on a live store: %s", got)
	}
	// A repair by hand: a heartbeat rewritten, a status changed (a change trigger fires).
	shell(t, sqlite3, dir, `UPDATE sessions SET record = json_set(record, '$.last_heartbeat_at', '2026-01-01T00:00:00.5Z') WHERE id = 'S-running';
		UPDATE sessions SET status = 'running' WHERE id = 'S-paused';
		UPDATE runs SET status = 'failed' WHERE run_id = 'r1'`)
	if got := shell(t, sqlite3, dir, "PRAGMA integrity_check"); got != "ok" {
		t.Fatalf("PRAGMA integrity_check after the shell's updates: %s", got)
	}
	var hb int64
	var changes int
	if err := st.rdb.QueryRow(`SELECT heartbeat_ms, (SELECT count(*) FROM changes WHERE session_id = 'S-paused' AND kind = 'session.status' AND at_ms > 0)
		FROM sessions WHERE id = 'S-running'`).Scan(&hb, &changes); err != nil {
		t.Fatal(err)
	}
	if hb != 1767225600500 || changes != 1 {
		t.Errorf("after the shell's updates: heartbeat_ms %d (want 1767225600500), %d status changes of S-paused (want 1)", hb, changes)
	}
}

// TestJuliandayMigration: a database of schema version 11 (unixepoch(…, 'subsec') in the
// heartbeat column and the triggers) with live sessions is migrated on Open: no schema object
// uses unixepoch any more, every heartbeat_ms is what it was, and the sqlite3 shell finds the
// database sound.
func TestJuliandayMigration(t *testing.T) {
	sqlite3 := sqliteShell(t)
	ctx := context.Background()
	dir := t.TempDir()
	db, exec := databaseAtVersion(t, dir, 11)
	for i, rec := range []struct{ id, status, heartbeat string }{
		{"S-a", "running", "2026-03-01T12:00:00.123Z"},
		{"S-b", "paused", "2026-03-01T12:00:01Z"},
		{"S-c", "running", ""},
	} {
		sess := storetest.NewSession(rec.id, storetest.SessionSpec{Status: rec.status})
		if rec.heartbeat != "" {
			sess.Record.LastHeartbeatAt = contract.Some(rec.heartbeat)
		}
		row, err := store.EncodeSession(sess)
		if err != nil {
			t.Fatal(err)
		}
		exec(`INSERT INTO sessions (sk, id, status, agent_id, project, record, snapshot, last_seq) VALUES (?, ?, ?, 'agent-1', '', ?, ?, -1)`, i+1, rec.id, rec.status, row.Record, row.Snapshot)
	}
	before := heartbeats(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	st := openAt(t, dir)
	if after := heartbeats(t, st.rdb); strings.Count(after, "=") != 3 || after != before {
		t.Errorf("heartbeat_ms after the migration: %q, before: %q", after, before)
	}
	var n int
	if err := st.rdb.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE sql LIKE '%unixepoch%'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d schema objects still use unixepoch (%v)", n, err)
	}
	if got := shell(t, sqlite3, dir, "PRAGMA integrity_check"); got != "ok" {
		t.Errorf("PRAGMA integrity_check after the migration: %s", got)
	}
}

// heartbeats lists every session's heartbeat_ms, as "id=ms" in id order.
func heartbeats(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.Query(`SELECT id, heartbeat_ms FROM sessions ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		var ms int64
		if err := rows.Scan(&id, &ms); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s=%d", id, ms))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, " ")
}
