package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/internal/testenv"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// TestFullDisk fills a real file system: the append that finds no room fails with store.Full
// (never an unclassified error), Ready says so, checkpoints keep the WAL to a few MiB, and
// once space is freed Ready and appends recover without reopening the store; every event
// acknowledged before is still there.
func TestFullDisk(t *testing.T) {
	const fsSize, fillerSize = 16 << 20, 6 << 20
	dir := testenv.Tmpfs(t, fsSize)
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, fillerSize), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	st := openAt(t, data)
	ctx := context.Background()
	if err := st.CreateSession(ctx, storetest.NewSession("s1", storetest.SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	event := func(key string) []*contract.EncodedEvent {
		return []*contract.EncodedEvent{storetest.BigEvent(t, "s1", key, 20000)}
	}
	var (
		acked   int
		fullErr error
	)
	for i := 0; i < fsSize/20000+1; i++ {
		if _, err := st.Append(ctx, "s1", event(fmt.Sprint("k", i)), store.AppendOptions{}); err != nil {
			fullErr = err
			break
		}
		acked++
	}
	if why, ok := store.UnavailabilityOf(fullErr); !ok || why != store.Full {
		t.Fatalf("after %d appends, the append that filled the disk failed with %v, want a store.Full error", acked, fullErr)
	}
	if why, ok := store.UnavailabilityOf(st.Ready(ctx)); !ok || why != store.Full {
		t.Fatalf("Ready on a full disk = %v, want a store.Full error", st.Ready(ctx))
	}
	if _, wal := st.FileSizes(); wal > 8<<20 {
		t.Errorf("the WAL is %d bytes on a full disk, want it kept within 8 MiB by checkpoints", wal)
	}
	db, wal := st.FileSizes()
	t.Logf("full after %d appends: database %d bytes, WAL %d bytes", acked, db, wal)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for err := st.Ready(ctx); err != nil; err = st.Ready(ctx) {
		if time.Now().After(deadline) {
			t.Fatalf("Ready 30 s after freeing %d bytes: %v", fillerSize, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := st.Append(ctx, "s1", event("after"), store.AppendOptions{}); err != nil {
		t.Fatalf("append after freeing space: %v", err)
	}
	last, err := st.LastSequence(ctx, "s1")
	if err != nil || last != int64(acked) {
		t.Fatalf("LastSequence = %d, %v; want %d (every acknowledged event and the one after)", last, err, acked)
	}
}
