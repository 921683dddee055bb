package sqlite

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// logBuffer is an io.Writer for a test's logger, safe for the store's goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitLogged waits (up to 10s) until the log holds want, and fails the test otherwise.
func waitLogged(t *testing.T, b *logBuffer, want string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if strings.Contains(b.String(), want) {
			return
		}
	}
	t.Fatalf("the log does not say %q; it holds:\n%s", want, b.String())
}

// TestBackgroundFailuresAreLogged: what the store's background work cannot return to a caller
// reaches the logger given to Open: a failed sync (once, as the store refuses everything after
// it) and a failed checkpoint.
func TestBackgroundFailuresAreLogged(t *testing.T) {
	for _, tc := range []struct {
		name    string
		breakIt func(t *testing.T, st *Store)
		want    string
		level   string
	}{
		{"sync", func(t *testing.T, st *Store) {
			hook := func() error { return errors.New("injected I/O error") }
			st.dur.beforeSync.Store(&hook)
			for i := range 2 {
				key := "key-" + string(rune('a'+i))
				if _, err := st.Append(context.Background(), "S-log", []*contract.EncodedEvent{storetest.EventWithID(t, "S-log", "ev-"+key, key, "x")}, store.AppendOptions{}); err == nil {
					t.Fatal("append with a failing sync succeeded")
				}
			}
		}, "syncing the WAL failed", "level=ERROR"},
		{"checkpoint", func(t *testing.T, st *Store) {
			if err := st.cdb.Close(); err != nil {
				t.Fatal(err)
			}
			st.kickCheckpointer()
		}, "checkpoint failed", "level=WARN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logBuffer
			st, err := Open(context.Background(), t.TempDir(), Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.CreateSession(context.Background(), storetest.NewSession("S-log", storetest.SessionSpec{})); err != nil {
				t.Fatal(err)
			}
			if s := logs.String(); s != "" {
				t.Fatalf("a healthy store logged:\n%s", s)
			}
			tc.breakIt(t, st)
			waitLogged(t, &logs, tc.want)
			line := logs.String()
			if !strings.Contains(line, tc.level) || !strings.Contains(line, st.dir) {
				t.Errorf("log %q: want %s and the data directory %s", line, tc.level, st.dir)
			}
			if tc.name == "sync" && strings.Count(line, tc.want) != 1 {
				t.Errorf("the failed sync was logged %d times, want once:\n%s", strings.Count(line, tc.want), line)
			}
		})
	}
}

// TestOpenTakesOneOptions: Open refuses more than one Options rather than pick one.
func TestOpenTakesOneOptions(t *testing.T) {
	_, err := Open(context.Background(), t.TempDir(), Options{}, Options{})
	if err == nil || !strings.Contains(err.Error(), "at most one Options") {
		t.Fatalf("Open with two Options: %v; want a refusal", err)
	}
}
