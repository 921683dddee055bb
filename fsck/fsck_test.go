package fsck_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/fsck"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
	"github.com/sessiond/sessiond/store/sqlite"
)

// driver is one storage driver as the tests use it: open a store, then (closed) corrupt it
// with SQL and open its inspector.
type driver struct {
	name    string
	open    func(t *testing.T) store.Store
	exec    func(t *testing.T, sql string) // runs SQL on the closed store's database
	inspect func(t *testing.T) store.Inspector
	// dataSQL rewrites the expression of a bytes column (events.data) through a text
	// replace: SQLite's replace works on BLOBs, PostgreSQL's needs a conversion.
	replaceData func(col, from, to string) string
	replaceJSON func(col, from, to string) string
	// setLast is the SQL that moves a session's recorded last sequence (on PostgreSQL it
	// lives in session_heads, migration 0009).
	setLast func(id string, last int64) string
	// bytes is the SQL literal of b.
	bytes func(b []byte) string
}

func sqliteDriver(t *testing.T) *driver {
	dir := t.TempDir()
	return &driver{
		name: "sqlite",
		open: func(t *testing.T) store.Store {
			st, err := sqlite.Open(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		exec: func(t *testing.T, q string) {
			db, err := sql.Open("sqlite", filepath.Join(dir, sqlite.DBFile))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			// A session's newest events may be in event_tail (store/sqlite/tail.go): a
			// statement that changes rows of events changes those of event_tail too.
			qs := []string{q}
			if strings.HasPrefix(q, "DELETE FROM events ") || strings.HasPrefix(q, "UPDATE events ") {
				qs = append(qs, strings.Replace(q, " events ", " event_tail ", 1))
			}
			for _, q := range qs {
				if _, err := db.Exec(q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
		},
		inspect: func(t *testing.T) store.Inspector {
			in, err := sqlite.OpenInspector(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { in.Close() })
			return in
		},
		replaceData: func(col, from, to string) string {
			return fmt.Sprintf("CAST(replace(CAST(%s AS TEXT), '%s', '%s') AS BLOB)", col, from, to)
		},
		replaceJSON: func(col, from, to string) string { return fmt.Sprintf("replace(%s, '%s', '%s')", col, from, to) },
		setLast: func(id string, last int64) string {
			return fmt.Sprintf("UPDATE sessions SET last_seq = %d WHERE id = '%s'", last, id)
		},
		bytes: func(b []byte) string { return fmt.Sprintf("X'%x'", b) },
	}
}

func postgresDriver(t *testing.T) *driver {
	url := pgtest.Schema(t)
	return &driver{
		name: "postgres",
		open: func(t *testing.T) store.Store {
			st, err := postgres.Open(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		exec: func(t *testing.T, q string) {
			conn, err := pgx.Connect(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			if _, err := conn.Exec(context.Background(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		},
		inspect: func(t *testing.T) store.Inspector {
			in, err := postgres.OpenInspector(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { in.Close() })
			return in
		},
		replaceData: func(col, from, to string) string {
			return fmt.Sprintf("convert_to(replace(convert_from(%s, 'UTF8'), '%s', '%s'), 'UTF8')", col, from, to)
		},
		replaceJSON: func(col, from, to string) string {
			return fmt.Sprintf("replace(%s::text, '%s', '%s')::json", col, from, to)
		},
		setLast: func(id string, last int64) string {
			return fmt.Sprintf("UPDATE session_heads SET last_seq = %d WHERE sk = (SELECT sk FROM sessions WHERE id = '%s')", last, id)
		},
		bytes: func(b []byte) string { return fmt.Sprintf(`'\x%x'::bytea`, b) },
	}
}

func drivers(t *testing.T, fn func(t *testing.T, d *driver)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, sqliteDriver(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, postgresDriver(t)) })
}

// fixture fills a store with the sessions the tests corrupt, each a few events long with a
// run: S-run (a stop command accepted: a command result), S-gap, S-edit, S-last, and S-arch,
// archived and compacted into archiveDir.
func fixture(t *testing.T, st store.Store, archiveDir string) {
	t.Helper()
	ctx := context.Background()
	svc := session.New(st, session.Options{})
	defer svc.Close()
	for _, id := range []string{"S-run", "S-gap", "S-edit", "S-last", "S-arch"} {
		sess := &store.Session{
			Record:   contract.SessionRecord{SchemaVersion: 1, SessionID: id, AgentID: "a", Role: "implementer", Status: "running", StartedAt: "2026-03-01T12:00:00Z"},
			Snapshot: contract.Snapshot{Mode: "work", ModelID: "m"},
		}
		if err := st.CreateSession(ctx, sess); err != nil {
			t.Fatal(err)
		}
		var evs []*contract.EncodedEvent
		for i, raw := range []string{
			`"eventType":"message","payload":{"messageId":"u1","role":"user","operation":"append","parts":["go"]}`,
			`"eventType":"status","runId":"r1","sourceMessageId":"u1","payload":{"status":"running","startedAt":"2026-03-01T12:00:01Z"}`,
			`"eventType":"message","runId":"r1","payload":{"messageId":"a1","role":"assistant","operation":"append","parts":["hello"],"status":"streaming"}`,
			`"eventType":"message","runId":"r1","payload":{"messageId":"a1","role":"assistant","operation":"append","parts":[" world"],"status":"completed"}`,
		} {
			doc := fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"e%d","sessionId":%q,"sequence":0,"idempotencyKey":"k%d","occurredAt":"2026-03-01T12:00:00Z",%s}`, i, id, i, raw)
			ev, err := contract.CheckEvent([]byte(doc), contract.Limits{})
			if err != nil {
				t.Fatalf("fixture event %s: %v", doc, err)
			}
			evs = append(evs, ev)
		}
		if _, err := st.Append(ctx, id, evs, store.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := &contract.Command{Contract: "AgentSessionCommand", CommandID: "c1", SessionID: "S-run", RunID: "r1",
		IdempotencyKey: "ck1", ExpectedSequence: 3, IssuedAt: "2026-03-01T12:05:00Z", CommandType: "stop",
		Payload: &contract.StopCommand{}}
	res, err := svc.Execute(ctx, "S-run", c, session.ExecOptions{})
	if err != nil || res.Outcome != "accepted" {
		t.Fatalf("stop command: %+v, %v", res, err)
	}
	if _, err := svc.Archive(ctx, "S-arch", session.ArchiveOptions{Dir: archiveDir, Compact: true}); err != nil {
		t.Fatal(err)
	}
}

// fixtureStore fills a store of d with the fixture, closes it, and returns the archive
// directory of its archived session.
func fixtureStore(t *testing.T, d *driver) string {
	t.Helper()
	archiveDir := t.TempDir()
	st := d.open(t)
	fixture(t, st, archiveDir)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return archiveDir
}

func check(t *testing.T, in store.Inspector, archiveDir string) *fsck.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := fsck.Check(ctx, in, fsck.Options{ArchiveDir: archiveDir})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return rep
}

// TestCheckFindsCorruption builds a store, checks it clean, corrupts it on purpose (a row
// deleted, an event altered, a run projection edited, a last sequence moved, an archive byte
// flipped) and expects each finding, with its session and sequence, on both drivers.
func TestCheckFindsCorruption(t *testing.T) {
	drivers(t, func(t *testing.T, d *driver) {
		archiveDir := fixtureStore(t, d)
		rep := check(t, d.inspect(t), archiveDir)
		if !rep.Clean() {
			t.Fatalf("a fresh store has findings:\n%s", findings(rep))
		}
		if rep.Sessions != 5 || rep.Events != 4*4+1 || rep.Archives != 1 {
			t.Fatalf("checked %+v; want 5 sessions, 17 events (S-arch's are compacted), 1 archive", rep.Progress)
		}

		sk := func(id string) string { return fmt.Sprintf("(SELECT sk FROM sessions WHERE id = '%s')", id) }
		d.exec(t, "DELETE FROM events WHERE sk = "+sk("S-gap")+" AND seq = 2")
		d.exec(t, "UPDATE events SET data = "+d.replaceData("data", `"role":"assistant"`, `"role":"robot"`)+" WHERE sk = "+sk("S-edit")+" AND seq = 3")
		d.exec(t, "UPDATE events SET data = "+d.replaceData("data", `"parts":["hello"]`, `"parts":["HELLO"],"extra":1`)+" WHERE sk = "+sk("S-edit")+" AND seq = 2")
		d.exec(t, "UPDATE runs SET data = "+d.replaceJSON("data", "2026-03-01T12:00:01Z", "2026-03-01T11:00:00Z")+" WHERE sk = "+sk("S-run"))
		d.exec(t, d.setLast("S-last", 6))
		d.exec(t, "INSERT INTO usage_days (day, sk, usage_events, input_tokens, output_tokens, total_tokens, runs_completed, runs_failed, runs_stopped, run_ms, tool_calls, tool_failures, tool_denied) VALUES (20500, "+sk("S-run")+", 1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0)")
		names, _ := filepath.Glob(filepath.Join(archiveDir, "*", "RC-*.json"))
		if len(names) != 1 {
			t.Fatalf("archives %v; want one", names)
		}
		data, err := os.ReadFile(names[0])
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.Index(data, []byte(`"parts":["hello"]`))
		data[i+len(`"parts":["h`)] ^= 0x20 // hello -> hEllo: still JSON, checksum broken
		if err := os.WriteFile(names[0], data, 0o600); err != nil {
			t.Fatal(err)
		}

		rep = check(t, d.inspect(t), archiveDir)
		two, three, four := int64(2), int64(3), int64(4)
		want := []struct {
			check, session string
			seq            *int64
			says           string
		}{
			{fsck.CheckArchive, "", nil, "checksum mismatch"},
			{fsck.CheckArchive, "S-arch", nil, "its only copy"},
			{fsck.CheckSequence, "S-gap", &two, "sequence 2 is missing"},
			{fsck.CheckEvent, "S-edit", &two, "breaks the contract"},
			{fsck.CheckEvent, "S-edit", &three, "breaks the contract"},
			{fsck.CheckChain, "S-edit", &three, "does not hold between sequences 0 and 3"},
			{fsck.CheckSequence, "S-last", &four, "last sequence is 6 but the log ends at 3"},
			{fsck.CheckRuns, "S-run", nil, `run "r1"'s projection is`},
			{fsck.CheckUsage, "S-run", nil, "usage rollup holds day rows [2026-02-16"},
		}
		if len(rep.Findings) != len(want) {
			t.Errorf("%d findings; want %d:\n%s", len(rep.Findings), len(want), findings(rep))
		}
		for _, w := range want {
			found := false
			for _, f := range rep.Findings {
				if f.Check == w.check && f.SessionID == w.session && (w.seq == nil) == (f.Sequence == nil) &&
					(w.seq == nil || *w.seq == *f.Sequence) && strings.Contains(f.Message, w.says) {
					found = true
				}
			}
			if !found {
				t.Errorf("no %s finding for session %q (sequence %v) saying %q in:\n%s", w.check, w.session, w.seq, w.says, findings(rep))
			}
		}
	})
}

func findings(rep *fsck.Report) string {
	var b strings.Builder
	for _, f := range rep.Findings {
		b.WriteString("  " + f.String() + "\n")
	}
	return b.String()
}

// otherSQLite writes an SQLite database of another program at path.
func otherSQLite(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE songs (title TEXT); INSERT INTO songs VALUES ('la')`); err != nil {
		t.Fatal(err)
	}
}

// keepAppending appends messages to the session until stop is closed.
func keepAppending(st store.Store, id string, stop chan struct{}) error {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		doc := fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"bg%d","sessionId":%q,"sequence":0,"idempotencyKey":"bgk%d","occurredAt":"2026-03-01T12:00:00Z","eventType":"message","payload":{"messageId":"m%d","role":"user","operation":"append","parts":["x"]}}`, i, id, i, i)
		ev, err := contract.CheckEvent([]byte(doc), contract.Limits{})
		if err != nil {
			return err
		}
		if _, err := st.Append(context.Background(), id, []*contract.EncodedEvent{ev}, store.AppendOptions{}); err != nil {
			return err
		}
	}
}

// TestCheckEnqueuedRunClean: a run enqueued behind the active one (the multitask strategies
// enqueue and interrupt) is a clean state, not a second active run.
func TestCheckEnqueuedRunClean(t *testing.T) {
	drivers(t, func(t *testing.T, d *driver) {
		ctx := context.Background()
		st := d.open(t)
		sess := &store.Session{
			Record:   contract.SessionRecord{SchemaVersion: 1, SessionID: "S-q", AgentID: "a", Role: "implementer", Status: "running", StartedAt: "2026-03-01T12:00:00Z"},
			Snapshot: contract.Snapshot{Mode: "work", ModelID: "m"},
		}
		if err := st.CreateSession(ctx, sess); err != nil {
			t.Fatal(err)
		}
		for i, batch := range [][]string{
			{`"eventType":"message","payload":{"messageId":"u1","role":"user","operation":"append","parts":["go"]}`,
				`"eventType":"status","runId":"r1","sourceMessageId":"u1","payload":{"status":"running","startedAt":"2026-03-01T12:00:01Z"}`},
			{`"eventType":"message","payload":{"messageId":"u2","role":"user","operation":"append","parts":["then this"]}`,
				`"eventType":"status","runId":"r2","sourceMessageId":"u2","payload":{"status":"queued"}`},
		} {
			var evs []*contract.EncodedEvent
			for j, raw := range batch {
				doc := fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"e%d%d","sessionId":"S-q","sequence":0,"idempotencyKey":"k%d%d","occurredAt":"2026-03-01T12:00:00Z",%s}`, i, j, i, j, raw)
				ev, err := contract.CheckEvent([]byte(doc), contract.Limits{})
				if err != nil {
					t.Fatal(err)
				}
				evs = append(evs, ev)
			}
			if _, err := st.Append(ctx, "S-q", evs, store.AppendOptions{Enqueue: true}); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if rep := check(t, d.inspect(t), "-"); !rep.Clean() {
			t.Fatalf("a run enqueued behind the active one is reported:\n%s", findings(rep))
		}
	})
}

// TestCheckFindsCutTail: a log that lost its newest acknowledged events (the rows of its last
// two sequences deleted) is reported, naming the session and the lost sequences, on both
// drivers. Before, SQLite derived a session's last sequence from the event rows, so fsck
// compared the rows with themselves and said clean; the session's head (session_heads) is now
// written in the commit of each append.
func TestCheckFindsCutTail(t *testing.T) {
	drivers(t, func(t *testing.T, d *driver) {
		archiveDir := fixtureStore(t, d)
		d.exec(t, "DELETE FROM events WHERE sk = (SELECT sk FROM sessions WHERE id = 'S-last') AND seq >= 2")
		rep := check(t, d.inspect(t), archiveDir)
		if len(rep.Findings) != 1 {
			t.Fatalf("%d findings; want 1:\n%s", len(rep.Findings), findings(rep))
		}
		f := rep.Findings[0]
		if f.Check != fsck.CheckSequence || f.SessionID != "S-last" || f.Sequence == nil || *f.Sequence != 2 ||
			!strings.Contains(f.Message, "last sequence is 3 but the log ends at 1: sequences 2 to 3 are missing") {
			t.Errorf("finding: %s", findings(rep))
		}
	})
}

// storedEvents reads session id's events as stored, with their chain hashes.
func storedEvents(t *testing.T, d *driver, id string) []store.StoredEvent {
	t.Helper()
	in := d.inspect(t)
	defer in.Close()
	var out []store.StoredEvent
	err := in.InspectSession(context.Background(), id, func(raw *store.RawSession) error {
		return raw.Events(func(e *store.StoredEvent) error {
			c := *e
			c.Data, c.Hash = bytes.Clone(e.Data), bytes.Clone(e.Hash)
			out = append(out, c)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// longSession appends a session S-long of 40 message events to the fixture's store (its hashes
// stored with sequences 15 and 31, store.ChainMarked, and its head at 39) and closes it.
func longSession(t *testing.T, d *driver) {
	t.Helper()
	st := d.open(t)
	ctx := context.Background()
	if err := st.CreateSession(ctx, &store.Session{
		Record:   contract.SessionRecord{SchemaVersion: 1, SessionID: "S-long", AgentID: "a", Role: "implementer", Status: "running", StartedAt: "2026-03-01T12:00:00Z"},
		Snapshot: contract.Snapshot{Mode: "work", ModelID: "m"},
	}); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		doc := fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"e%d","sessionId":"S-long","sequence":0,"idempotencyKey":"k%d","occurredAt":"2026-03-01T12:00:00Z","eventType":"message","payload":{"messageId":"m%d","role":"user","operation":"append","parts":["hello"]}}`, i, i, i)
		ev, err := contract.CheckEvent([]byte(doc), contract.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(ctx, "S-long", []*contract.EncodedEvent{ev}, store.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCheckFindsRewrittenEvent: an event rewritten into another valid, canonical event with the
// same ids and columns (its text "hello" made "HELLO") is reported, on both drivers: in a short
// log by the session's head, in a long one by the next stored hash, naming the 16 sequences
// it is among. Before the chain, fsck said clean.
func TestCheckFindsRewrittenEvent(t *testing.T) {
	drivers(t, func(t *testing.T, d *driver) {
		archiveDir := fixtureStore(t, d)
		longSession(t, d)
		rewrite := func(id string, seq int) {
			d.exec(t, "UPDATE events SET data = "+d.replaceData("data", `"parts":["hello"]`, `"parts":["HELLO"]`)+fmt.Sprintf(" WHERE sk = (SELECT sk FROM sessions WHERE id = '%s') AND seq = %d", id, seq))
		}
		rewrite("S-edit", 2)
		rewrite("S-long", 20)
		rep := check(t, d.inspect(t), archiveDir)
		if len(rep.Findings) != 2 {
			t.Fatalf("%d findings; want 2:\n%s", len(rep.Findings), findings(rep))
		}
		for i, w := range []struct {
			id   string
			seq  int64
			says string
		}{{"S-edit", 3, "does not hold between sequences 0 and 3"}, {"S-long", 31, "does not hold between sequences 16 and 31"}} {
			f := rep.Findings[i]
			if f.Check != fsck.CheckChain || f.SessionID != w.id || f.Sequence == nil || *f.Sequence != w.seq || !strings.Contains(f.Message, w.says) {
				t.Errorf("finding %s; want chain of %s at %d saying %q", f, w.id, w.seq, w.says)
			}
		}
	})
}

// TestCheckFindsBrokenChain: a broken chain, on both drivers: a stored hash replaced by another
// event's is reported once, at its sequence (the events after it still chain to the next
// stored hash from what they hash to), and a session's head replaced by another hash at the
// head.
func TestCheckFindsBrokenChain(t *testing.T) {
	drivers(t, func(t *testing.T, d *driver) {
		archiveDir := fixtureStore(t, d)
		longSession(t, d)
		long := "(SELECT sk FROM sessions WHERE id = 'S-long')"
		evs := storedEvents(t, d, "S-long")
		d.exec(t, "UPDATE events SET hash = "+d.bytes(evs[31].Hash)+" WHERE sk = "+long+" AND seq = 15")
		d.exec(t, "UPDATE session_heads SET head_hash = "+d.bytes(bytes.Repeat([]byte{7}, 32))+" WHERE sk = (SELECT sk FROM sessions WHERE id = 'S-gap')")
		rep := check(t, d.inspect(t), archiveDir)
		if len(rep.Findings) != 2 {
			t.Fatalf("%d findings; want 2:\n%s", len(rep.Findings), findings(rep))
		}
		for i, w := range []struct {
			id   string
			seq  int64
			says string
		}{{"S-gap", 3, "but the session's head says 0707070707070707"}, {"S-long", 15, "does not hold between sequences 0 and 15"}} {
			f := rep.Findings[i]
			if f.Check != fsck.CheckChain || f.SessionID != w.id || f.Sequence == nil || *f.Sequence != w.seq || !strings.Contains(f.Message, w.says) {
				t.Errorf("finding %s; want chain of %s at %d saying %q", f, w.id, w.seq, w.says)
			}
		}
	})
}

// TestCheckSequenceStoredTwice: on a log never compacted, a sequence stored twice (a row of
// events copied into event_tail, as a move interrupted by hand could leave it) is reported as
// stored twice, not as "at or before its compaction point".
func TestCheckSequenceStoredTwice(t *testing.T) {
	d := sqliteDriver(t)
	archiveDir := fixtureStore(t, d)
	// The row is in events or still in event_tail (store/sqlite/tail.go): copy it to the other.
	const cols = "rid, sk, seq, gen, event_id, idem_key, event_type, run_id, data"
	const where = " WHERE sk = (SELECT sk FROM sessions WHERE id = 'S-gap') AND seq = 1"
	d.exec(t, "INSERT INTO event_tail (pos, "+cols+") SELECT (SELECT coalesce(max(pos), 0) + 1 FROM event_tail), "+cols+" FROM events"+where)
	d.exec(t, "INSERT INTO events ("+cols+") SELECT "+cols+" FROM event_tail"+where+" AND rid NOT IN (SELECT rid FROM events)")
	rep := check(t, d.inspect(t), archiveDir)
	var msgs []string
	for _, f := range rep.Findings {
		if f.SessionID == "S-gap" && f.Check == fsck.CheckSequence {
			msgs = append(msgs, f.Message)
		}
	}
	if all := strings.Join(msgs, "\n"); !strings.Contains(all, "holds sequence 1 twice") || strings.Contains(all, "compaction point") {
		t.Errorf("findings:\n%s", findings(rep))
	}
}

// TestCheckFindsDamagedWAL: 40 acknowledged single appends, the data directory copied as a
// SIGKILL leaves it (the database and its write-ahead log, never checkpointed), one byte of a
// middle WAL frame flipped: SQLite silently drops every frame after it, acknowledged commits
// included, and the database looks sound; fsck reads the WAL itself and reports the loss. The
// copy without the flip is clean. Before, fsck said clean over the damaged copy.
func TestCheckFindsDamagedWAL(t *testing.T) {
	ctx := context.Background()
	live := t.TempDir()
	st, err := sqlite.Open(ctx, live)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sess := &store.Session{
		Record:   contract.SessionRecord{SchemaVersion: 1, SessionID: "S-wal", AgentID: "a", Role: "implementer", Status: "running", StartedAt: "2026-03-01T12:00:00Z"},
		Snapshot: contract.Snapshot{Mode: "work", ModelID: "m"},
	}
	if err := st.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		doc := fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"e%d","sessionId":"S-wal","sequence":0,"idempotencyKey":"k%d","occurredAt":"2026-03-01T12:00:00Z","eventType":"message","payload":{"messageId":"m%d","role":"user","operation":"append","parts":["%s"]}}`, i, i, i, strings.Repeat("x", 500))
		ev, err := contract.CheckEvent([]byte(doc), contract.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(ctx, "S-wal", []*contract.EncodedEvent{ev}, store.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// What a SIGKILL leaves: the files as they are now, the WAL not checkpointed.
	crashed := func(flip bool) string {
		dir := t.TempDir()
		for _, name := range []string{sqlite.DBFile, sqlite.DBFile + "-wal"} {
			data, err := os.ReadFile(filepath.Join(live, name))
			if err != nil {
				t.Fatal(err)
			}
			if name == sqlite.DBFile+"-wal" && flip {
				const header, frame = 32, 24 + 4096
				frames := (len(data) - header) / frame
				if frames < 20 {
					t.Fatalf("the WAL holds %d frames; the test needs the appends in it", frames)
				}
				data[header+(frames/2)*frame+24+100] ^= 0x01 // a byte of a middle frame's page
			}
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	inspect := func(dir string) *fsck.Report {
		in, err := sqlite.OpenInspector(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		return check(t, in, "")
	}
	if rep := inspect(crashed(false)); !rep.Clean() {
		t.Fatalf("the undamaged copy has findings:\n%s", findings(rep))
	}
	rep := inspect(crashed(true))
	if len(rep.Findings) != 1 || rep.Findings[0].Check != fsck.CheckDatabase ||
		!strings.Contains(rep.Findings[0].Message, "fails its checksum") || !strings.Contains(rep.Findings[0].Message, "possibly lost") {
		t.Fatalf("findings over the damaged WAL:\n%s", findings(rep))
	}
	t.Log(rep.Findings[0].Message)
}
