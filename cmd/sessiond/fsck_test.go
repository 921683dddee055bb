package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
	"github.com/sessiond/sessiond/store/sqlite"
)

// TestFsckCommand runs sessiond fsck on a clean store (exit 0), the same store with an event
// row deleted (exit 1, the finding in the JSON report with its session and sequence), a
// foreign file (exit 2, could not check, the file unchanged), and a bad flag (exit 2).
func TestFsckCommand(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := st.CreateSession(ctx, &store.Session{
		Record:   contract.SessionRecord{SchemaVersion: 1, SessionID: "S-1", AgentID: "a", Role: "implementer", Status: "running", StartedAt: "2026-03-01T12:00:00Z"},
		Snapshot: contract.Snapshot{Mode: "work", ModelID: "m"},
	}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		doc := fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"e%d","sessionId":"S-1","sequence":0,"idempotencyKey":"k%d","occurredAt":"2026-03-01T12:00:00Z","eventType":"message","payload":{"messageId":"m%d","role":"user","operation":"append","parts":["hi"]}}`, i, i, i)
		ev, err := contract.CheckEvent([]byte(doc), contract.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(ctx, "S-1", []*contract.EncodedEvent{ev}, store.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	fsckRun := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(append([]string{"fsck"}, args...), nil, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	code, out, errOut := fsckRun("--data", dir)
	if code != 0 || !strings.Contains(out, "checked 1 sessions, 3 events and 0 archives (") || !strings.Contains(out, ": clean") {
		t.Fatalf("clean store: exit %d\n%s%s", code, out, errOut)
	}

	db, err := sql.Open("sqlite", filepath.Join(dir, sqlite.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	// Sequence 1 is in events or, an event of a small append, in event_tail
	// (store/sqlite/tail.go).
	for _, table := range []string{"events", "event_tail"} {
		if _, err := db.Exec(`DELETE FROM ` + table + ` WHERE seq = 1`); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	code, out, errOut = fsckRun("--data", dir, "--json")
	var rep struct {
		Driver   string
		Clean    bool
		Findings []struct {
			Check, SessionID string
			Sequence         *int64
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json printed %q: %v (stderr %s)", out, err, errOut)
	}
	if code != 1 || rep.Clean || rep.Driver != "sqlite" || len(rep.Findings) != 1 || rep.Findings[0].Check != "sequence" ||
		rep.Findings[0].SessionID != "S-1" || rep.Findings[0].Sequence == nil || *rep.Findings[0].Sequence != 1 {
		t.Fatalf("a deleted row: exit %d, report %+v\n%s", code, rep, out)
	}

	foreign := t.TempDir()
	path := filepath.Join(foreign, sqlite.DBFile)
	if err := os.WriteFile(path, []byte("not a database\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = fsckRun("--data", foreign)
	if b, _ := os.ReadFile(path); code != 2 || !strings.Contains(errOut, "could not check") || string(b) != "not a database\n" {
		t.Fatalf("a foreign file: exit %d, file %q\n%s", code, b, errOut)
	}
	if code, _, errOut = fsckRun("--store", "mysql://x"); code != 2 || !strings.Contains(errOut, "not a PostgreSQL URL") {
		t.Fatalf("--store mysql://x: exit %d\n%s", code, errOut)
	}
}

// TestFsckCommandPostgres runs sessiond fsck --store on a PostgreSQL schema: clean (exit 0),
// then with a session's last sequence moved (exit 1), and on a schema without sessiond's
// tables (exit 2).
func TestFsckCommandPostgres(t *testing.T) {
	url := pgtest.Schema(t)
	st, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateSession(context.Background(), &store.Session{
		Record:   contract.SessionRecord{SchemaVersion: 1, SessionID: "S-pg", AgentID: "a", Role: "implementer", Status: "running", StartedAt: "2026-03-01T12:00:00Z"},
		Snapshot: contract.Snapshot{Mode: "work", ModelID: "m"},
	}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	var out, errOut bytes.Buffer
	if code := run([]string{"fsck", "--store", url, "--archive-dir", "-"}, nil, &out, &errOut); code != 0 || !strings.Contains(out.String(), "postgres") || !strings.Contains(out.String(), ": clean") {
		t.Fatalf("clean schema: exit %d\n%s%s", code, &out, &errOut)
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `UPDATE session_heads SET last_seq = 2 WHERE sk = (SELECT sk FROM sessions WHERE id = 'S-pg')`); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run([]string{"fsck", "--store", url, "--archive-dir", "-"}, nil, &out, &errOut); code != 1 || !strings.Contains(out.String(), "session S-pg sequence 0: sequence:") {
		t.Fatalf("last_seq moved: exit %d\n%s%s", code, &out, &errOut)
	}
	empty := pgtest.Schema(t)
	errOut.Reset()
	if code := run([]string{"fsck", "--store", empty}, nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "no sessiond tables") {
		t.Fatalf("an empty schema: exit %d\n%s", code, &errOut)
	}
}

// FuzzRetentionFlags: the age and size flag values never panic, refuse negatives, and what
// they accept prints back as a value they accept again, equal.
func FuzzRetentionFlags(f *testing.F) {
	for _, s := range []string{"30d", "36h", "0", "1ms", "-1d", "50GB", "10GiB", "123", "9223372036854775807TiB", "d", "GB", " 5MB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var d time.Duration
		if err := (ageValue{&d}).Set(s); err == nil {
			if d < 0 {
				t.Fatalf("age %q accepted as %v", s, d)
			}
			var back time.Duration
			if err := (ageValue{&back}).Set(ageValue{&d}.String()); err != nil || back != d {
				t.Fatalf("age %q = %v prints %q, which reads back as %v, %v", s, d, ageValue{&d}.String(), back, err)
			}
		}
		var n int64
		if err := (bytesValue{&n}).Set(s); err == nil {
			if n < 0 {
				t.Fatalf("size %q accepted as %d", s, n)
			}
			var back int64
			if err := (bytesValue{&back}).Set(bytesValue{&n}.String()); err != nil || back != n {
				t.Fatalf("size %q = %d reads back as %d, %v", s, n, back, err)
			}
		}
	})
}
