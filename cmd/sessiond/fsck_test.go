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

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
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
	if _, err := db.Exec(`DELETE FROM events WHERE seq = 1`); err != nil {
		t.Fatal(err)
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
