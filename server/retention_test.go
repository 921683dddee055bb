package server_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
)

// TestRetentionPass: a server with a retention policy archives (and compacts) a session
// closed long ago at its next pass, and counts it in the metrics; a session closed just now
// stays.
func TestRetentionPass(t *testing.T) {
	dir := t.TempDir()
	b := setup(t, server.Options{}, session.Options{ArchiveDir: dir, RetentionInterval: 20 * time.Millisecond,
		Retention: session.RetentionPolicy{ArchiveClosedAfter: 24 * time.Hour, DeleteArchivesAfter: 48 * time.Hour}})
	for id, closedAt := range map[string]string{"S-old": "2020-01-01T00:00:00.000Z", "S-new": contract.FormatTime(time.Now())} {
		b.createSession(t, id)
		if _, err := b.st.UpdateSession(context.Background(), id, func(s *store.Session) error {
			s.Record.Status = contract.SessionStatusClosed
			s.Record.ClosedAt = contract.Some(closedAt)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	m := b.srv.Metrics()
	for deadline := time.Now().Add(10 * time.Second); metricValue(t, m, "sessiond_retention_actions_total", "action", "archived") < 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no retention pass archived S-old within 10 s")
		}
	}
	for id, want := range map[string]string{"S-old": contract.SessionStatusArchived, "S-new": contract.SessionStatusClosed} {
		s, err := b.st.GetSession(context.Background(), id)
		if err != nil || s.Record.Status != want {
			t.Errorf("%s: %+v, %v; want status %s", id, s, err, want)
		}
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*", "RC-*.json"))
	if len(names) != 1 {
		t.Fatalf("archives %v; want S-old's", names)
	}
	fi, _ := os.Stat(names[0])
	for deadline := time.Now().Add(5 * time.Second); metricValue(t, m, "sessiond_archive_bytes") != float64(fi.Size()); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sessiond_archive_bytes = %v; want %d", metricValue(t, m, "sessiond_archive_bytes"), fi.Size())
		}
	}
	if metricValue(t, m, "sessiond_retention_passes_total", "result", "error") != 0 || metricValue(t, m, "sessiond_retention_actions_total", "action", "deleted") != 0 {
		t.Error("a retention pass failed or deleted something")
	}
}
