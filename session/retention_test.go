package session_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/sessiond/sessiond/archive"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/fsck"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
	"github.com/sessiond/sessiond/store/sqlite"
)

// retentionDrivers runs fn on a fresh store of each driver, with an inspector for fsck.
func retentionDrivers(t *testing.T, fn func(t *testing.T, st store.Store, inspect func() store.Inspector)) {
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		st, err := sqlite.Open(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		fn(t, st, func() store.Inspector {
			in, err := sqlite.OpenInspector(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			return in
		})
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.Schema(t)
		st, err := postgres.Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		fn(t, st, func() store.Inspector {
			in, err := postgres.OpenInspector(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			return in
		})
	})
}

// retentionSession stores a session with status and closed_at, and two events.
func retentionSession(t *testing.T, st store.Store, id, status, closedAt string) {
	t.Helper()
	ctx := context.Background()
	rec := contract.SessionRecord{SchemaVersion: 1, SessionID: id, AgentID: "a", Role: "implementer", Status: status, StartedAt: "2025-01-01T00:00:00Z"}
	if closedAt != "" {
		rec.ClosedAt = contract.Some(closedAt)
	}
	if err := st.CreateSession(ctx, &store.Session{Record: rec, Snapshot: contract.Snapshot{Mode: "work", ModelID: "m"}}); err != nil {
		t.Fatal(err)
	}
	var evs []*contract.EncodedEvent
	for i := range 2 {
		doc := fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"e%d","sessionId":%q,"sequence":0,"idempotencyKey":"k%d","occurredAt":"2025-01-01T00:00:00Z","eventType":"message","payload":{"messageId":"m%d","role":"user","operation":"append","parts":["hi"]}}`, i, id, i, i)
		ev, err := contract.CheckEvent([]byte(doc), contract.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if _, err := st.Append(ctx, id, evs, store.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
}

func archiveNames(as []session.RetentionArchive) []string {
	out := []string{}
	for _, a := range as {
		out = append(out, a.SessionID+":"+a.Reason)
	}
	sort.Strings(out)
	return out
}

// TestRetention applies a policy (archive sessions closed for 30 days, delete archives older
// than 60 days, then cap the directory at one byte) to a store holding every case: a session
// closed long ago (archived and compacted), one closed recently and a running one (left
// alone), an old archive of a session restored since (a spare copy: deleted), an old
// archive that is its compacted session's only copy, and an archive of a session that is not
// in the store (both kept). The dry run lists exactly what the pass then does; after it, every
// session's log is somewhere and fsck finds nothing.
func TestRetention(t *testing.T) {
	retentionDrivers(t, func(t *testing.T, st store.Store, inspect func() store.Inspector) {
		ctx := context.Background()
		dir := t.TempDir()
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		past := session.New(st, session.Options{Clock: session.ClockFunc(func() time.Time { return now.AddDate(0, 0, -100) })})
		defer past.Close()
		svc := session.New(st, session.Options{Clock: session.ClockFunc(func() time.Time { return now })})
		defer svc.Close()

		retentionSession(t, st, "S-closed-old", contract.SessionStatusClosed, "2026-01-01T00:00:00.000Z")
		retentionSession(t, st, "S-closed-new", contract.SessionStatusClosed, "2026-02-25T00:00:00.000Z")
		retentionSession(t, st, "S-running", contract.SessionStatusRunning, "")
		retentionSession(t, st, "S-spare", contract.SessionStatusPaused, "")
		retentionSession(t, st, "S-last", contract.SessionStatusPaused, "")
		// Closed long ago, archived, and restored today: it stays in the store for now (its log is
		// there again, so its old archive is a spare copy).
		retentionSession(t, st, "S-reopened", contract.SessionStatusClosed, "2025-06-01T00:00:00.000Z")
		reopened, err := past.Archive(ctx, "S-reopened", session.ArchiveOptions{Dir: dir, Compact: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Restore(ctx, dir, session.RestoreRequest{Name: reopened.Name}); err != nil {
			t.Fatal(err)
		}
		spare, err := past.Archive(ctx, "S-spare", session.ArchiveOptions{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := past.Restore(ctx, dir, session.RestoreRequest{Name: spare.Name}); err != nil {
			t.Fatal(err)
		}
		if _, err := past.Archive(ctx, "S-last", session.ArchiveOptions{Dir: dir, Compact: true}); err != nil {
			t.Fatal(err)
		}
		// An archive of a session of another store: its only copy is this file.
		other, err := sqlite.Open(ctx, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		retentionSession(t, other, "S-elsewhere", contract.SessionStatusPaused, "")
		elsewhere, err := session.New(other, session.Options{Clock: session.ClockFunc(func() time.Time { return now.AddDate(0, 0, -90) })}).Archive(ctx, "S-elsewhere", session.ArchiveOptions{Dir: t.TempDir()})
		other.Close()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.SaveArchive(dir, elsewhere.Path); err != nil {
			t.Fatal(err)
		}

		policy := session.RetentionPolicy{ArchiveClosedAfter: 30 * 24 * time.Hour, DeleteArchivesAfter: 60 * 24 * time.Hour}
		dry, err := session.PlanRetention(ctx, st, dir, policy, now)
		if err != nil {
			t.Fatal(err)
		}
		if len(dry.Archive) != 1 || dry.Archive[0].SessionID != "S-closed-old" {
			t.Errorf("dry run archives %+v; want S-closed-old alone", dry.Archive)
		}
		if got, want := fmt.Sprint(archiveNames(dry.Delete)), "[S-reopened:age S-spare:age]"; got != want {
			t.Errorf("dry run deletes %s; want %s", got, want)
		}
		if got, want := fmt.Sprint(archiveNames(dry.Kept)), "[S-elsewhere:last-copy S-last:last-copy]"; got != want {
			t.Errorf("dry run keeps %s; want %s", got, want)
		}
		if _, err := os.Stat(spare.Path); err != nil {
			t.Fatalf("the dry run deleted %s: %v", spare.Path, err)
		}

		res, err := svc.ApplyRetention(ctx, dir, policy)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Errors) != 0 || len(res.Archive) != 1 || fmt.Sprint(archiveNames(res.Delete)) != "[S-reopened:age S-spare:age]" ||
			fmt.Sprint(archiveNames(res.Kept)) != "[S-elsewhere:last-copy S-last:last-copy]" {
			t.Fatalf("the pass did %+v; want what the dry run said", res)
		}
		if _, err := os.Stat(spare.Path); !os.IsNotExist(err) {
			t.Errorf("%s is still there after the pass: %v", spare.Path, err)
		}
		lc, err := st.Lifecycle(ctx, "S-closed-old")
		if err != nil || lc.CompactedThrough == nil || *lc.CompactedThrough != 1 {
			t.Errorf("S-closed-old: lifecycle %+v, %v; want archived and compacted through 1", lc, err)
		}

		// The cap: everything that is not a last copy goes; the last copies stay, even over it.
		res, err = svc.ApplyRetention(ctx, dir, session.RetentionPolicy{MaxArchiveBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Delete) != 0 || len(res.Kept) != 3 || res.ArchiveBytesAfter <= 1 {
			t.Errorf("the cap did %+v; want nothing deleted, three last copies kept", res)
		}
		assertEveryLogSomewhere(t, st, dir)

		in := inspect()
		defer in.Close()
		rep, err := fsck.Check(ctx, in, fsck.Options{ArchiveDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Clean() {
			t.Errorf("fsck after retention: %+v", rep.Findings)
		}
	})
}

// assertEveryLogSomewhere fails unless each session's whole log is in the store or in a
// verified archive of dir, and the orphan archive is still there.
func assertEveryLogSomewhere(t *testing.T, st store.Store, dir string) {
	t.Helper()
	ctx := context.Background()
	sessions, _, err := st.ListSessions(ctx, store.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions {
		id := s.Record.SessionID
		lc, err := st.Lifecycle(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if lc.CompactedThrough == nil {
			continue
		}
		path, err := archive.Find(dir, lc.LastArchiveName)
		if err != nil {
			t.Errorf("session %s is compacted and its archive %s is gone: %v", id, lc.LastArchiveName, err)
			continue
		}
		data, _ := os.ReadFile(path)
		if c, _, err := archive.Decode(data); err != nil || c.LastSequence < *lc.CompactedThrough {
			t.Errorf("session %s: archive %s does not hold its log: %v", id, path, err)
		}
	}
	list, err := archive.List(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range list {
		found = found || a.SessionID == "S-elsewhere"
	}
	if !found {
		t.Error("the archive of S-elsewhere, a session not in the store, was deleted")
	}
}
