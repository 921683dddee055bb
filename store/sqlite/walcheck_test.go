package sqlite

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// TestCheckWAL damages a real write-ahead log (single appends, never checkpointed) in each of
// its frames in turn: a flipped byte is reported exactly when a commit frame of the log
// follows the damaged frame (SQLite then drops that commit), and a log cut in the middle of
// its last frame (a write torn by a crash, never acknowledged) or left whole is not.
func TestCheckWAL(t *testing.T) {
	dir := t.TempDir()
	st := openAt(t, dir)
	ctx := context.Background()
	if err := st.CreateSession(ctx, storetest.NewSession("S-w", storetest.SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		ev := storetest.EventWithID(t, "S-w", fmt.Sprintf("e%d", i), fmt.Sprintf("k%d", i), strings.Repeat("y", 300))
		if _, err := st.Append(ctx, "S-w", []*contract.EncodedEvent{ev}, store.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	wal, err := os.ReadFile(filepath.Join(dir, DBFile) + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	pageSize := int(binary.BigEndian.Uint32(wal[8:]))
	frameSize := walFrameHeaderSize + pageSize
	frames := (len(wal) - walHeaderSize) / frameSize
	lastCommit := -1
	for i := range frames {
		if binary.BigEndian.Uint32(wal[walHeaderSize+i*frameSize+4:]) != 0 {
			lastCommit = i
		}
	}
	if frames < 12 || lastCommit < 0 {
		t.Fatalf("the WAL holds %d frames, last commit %d: the appends are not in it", frames, lastCommit)
	}
	check := func(name string, data []byte) []string {
		t.Helper()
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := checkWAL(path)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := check("whole", wal); got != nil {
		t.Errorf("an undamaged WAL: %q", got)
	}
	if got := check("torn", wal[:len(wal)-pageSize/2]); got != nil {
		t.Errorf("a WAL cut in its last frame: %q", got)
	}
	for i := range frames {
		data := append([]byte(nil), wal...)
		data[walHeaderSize+i*frameSize+walFrameHeaderSize+7] ^= 0x10
		got := check(fmt.Sprintf("flip-%d", i), data)
		if want := i < lastCommit; (got != nil) != want || want && !strings.Contains(got[0], fmt.Sprintf("frame %d of %d fails its checksum", i+1, frames)) {
			t.Errorf("byte flipped in frame %d of %d (last commit frame %d): %q", i+1, frames, lastCommit+1, got)
		}
	}
}
