package session_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/archive"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/sqlite"
)

// The child process of the archive memory checks: it saves the archive file uploadEnv names
// into the directory dirEnv names, and prints how much its peak resident memory grew doing it.
const (
	uploadEnv = "ARCHIVE_MEMORY_UPLOAD"
	dirEnv    = "ARCHIVE_MEMORY_DIR"
)

// TestSaveArchiveChild is the child process of TestSaveArchiveBoundedMemory and
// BenchmarkSaveArchiveMemory (the test binary run again with uploadEnv set): it verifies and
// saves one uploaded archive with SaveArchive, as POST /v1/archives does, and prints the growth
// of its peak resident memory (VmHWM) across the call.
func TestSaveArchiveChild(t *testing.T) {
	upload := os.Getenv(uploadEnv)
	if upload == "" {
		t.Skip("the child process of the archive memory checks")
	}
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := session.New(st, session.Options{})
	before := vmHWM(t)
	info, err := svc.SaveArchive(os.Getenv(dirEnv), upload)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("saved %d bytes; hwm-growth-kib %d\n", info.Bytes, vmHWM(t)-before)
}

// vmHWM returns the process's peak resident memory in KiB.
func vmHWM(t testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM: %v", err)
			}
			return n
		}
	}
	t.Skip("no VmHWM in /proc/self/status")
	return 0
}

// saveInChild saves the archive at path in a new process and returns its peak memory growth.
func saveInChild(t testing.TB, path string) int64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestSaveArchiveChild$", "-test.v")
	cmd.Env = append(os.Environ(), uploadEnv+"="+path, dirEnv+"="+filepath.Join(filepath.Dir(path), "saved"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	_, rest, ok := bytes.Cut(out, []byte("hwm-growth-kib "))
	if !ok {
		t.Fatalf("child said no growth:\n%s", out)
	}
	n, err := strconv.ParseInt(string(bytes.Fields(rest)[0]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// writeBigArchive writes a valid archive file of at least size bytes into dir: a session of
// ~500-byte message events, in the format archive.Encode writes, streamed to disk so that
// making it does not take the memory it is meant to measure.
func writeBigArchive(t testing.TB, dir string, size int64) string {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const sid = "S-big"
	if err := st.CreateSession(ctx, &store.Session{
		Record:   contract.SessionRecord{SchemaVersion: 1, SessionID: sid, AgentID: "a", Role: "implementer", Status: "running", StartedAt: contract.FormatTime(t0)},
		Snapshot: contract.Snapshot{Mode: "work", ModelID: "m"},
	}); err != nil {
		t.Fatal(err)
	}
	svc := session.New(st, session.Options{Clock: session.ClockFunc(func() time.Time { return t0 })})
	res, err := svc.Archive(ctx, sid, session.ArchiveOptions{Dir: filepath.Join(t.TempDir(), "a")})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := archive.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	// The content as Encode writes it, with the events streamed in where "events":[] stands.
	c.Events = []json.RawMessage{}
	n := int(size / 650) // ~650 bytes an event as written
	c.LastSequence = int64(n - 1)
	text := strings.Repeat("the agent reads the flaky test and its logs ", 8)
	event := func(i int) []byte {
		return fmt.Appendf(nil, `{"contract":"AgentSessionEvent","eventId":"ev-%d","sessionId":%q,"sequence":%d,"idempotencyKey":"k-%d","occurredAt":"2026-03-01T12:00:00Z","eventType":"message","payload":{"messageId":"m-%d","role":"user","operation":"append","parts":[{"type":"text","text":%q}]}}`, i, sid, i, i, i, text)
	}
	// The chain's head over those events (archive version 2), in a pass of its own.
	chain := store.NewChainer(store.ChainGenesis)
	for i := range n {
		chain.Add(event(i))
	}
	last := chain.Head()
	c.ChainHead = hex.EncodeToString(last[:])
	var tmpl bytes.Buffer
	enc := json.NewEncoder(&tmpl)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		t.Fatal(err)
	}
	head, tail, ok := bytes.Cut(bytes.TrimSuffix(tmpl.Bytes(), []byte("\n")), []byte(`"events":[]`))
	if !ok {
		t.Fatal("no events member in the content")
	}
	contentPath := filepath.Join(dir, "content")
	cf, err := os.Create(contentPath)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.New()
	w := bufio.NewWriterSize(io.MultiWriter(cf, sum), 1<<20)
	w.Write(head)
	w.WriteString(`"events":[`)
	for i := range n {
		if i > 0 {
			w.WriteByte(',')
		}
		w.Write(event(i))
	}
	w.WriteByte(']')
	w.Write(tail)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	contentBytes, _ := cf.Seek(0, io.SeekCurrent)
	hb, err := json.Marshal(map[string]any{
		"format": archive.Format, "version": archive.Version, "sessionId": c.SessionID, "project": c.Project,
		"archivedAt": c.ArchivedAt, "checksum": "sha256:" + hex.EncodeToString(sum.Sum(nil)), "contentBytes": contentBytes,
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "upload.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write(hb[:len(hb)-1])
	f.WriteString(`,"content":`)
	if _, err := cf.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, cf); err != nil {
		t.Fatal(err)
	}
	cf.Close()
	os.Remove(contentPath)
	if _, err := f.WriteString("}\n"); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSaveArchiveBoundedMemory: an uploaded archive is verified and saved in memory that does
// not grow with its size (issue #31: a 60 MiB upload took 3.69 GB when the file was decoded
// whole). A 48 MiB archive may grow the saving process's peak memory by at most 64 MiB; the
// saved copy is the upload byte for byte.
func TestSaveArchiveBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 48 MiB archive: skipped with -short")
	}
	dir := t.TempDir()
	path := writeBigArchive(t, dir, 48<<20)
	growth := saveInChild(t, path)
	t.Logf("peak memory growth saving a %d MiB archive: %d KiB", fileSize(t, path)>>20, growth)
	if growth > 64<<10 {
		t.Errorf("saving the archive grew the peak memory by %d KiB; want at most 64 MiB", growth)
	}
	saved, _ := filepath.Glob(filepath.Join(dir, "saved", "*", "*.json"))
	if len(saved) != 1 {
		t.Fatalf("saved %v; want one file", saved)
	}
	a, _ := os.ReadFile(path)
	b, _ := os.ReadFile(saved[0])
	if !bytes.Equal(a, b) {
		t.Error("the saved archive differs from the upload")
	}
}

func fileSize(t testing.TB, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// BenchmarkSaveArchiveMemory verifies and saves a 256 MiB uploaded archive (the default
// --max-archive-bytes) in a child process, as POST /v1/archives does, and reports the growth of
// the child's peak resident memory (median over the ops) and the time per op.
//
//	go test ./session/ -run '^$' -bench SaveArchiveMemory -benchtime 3x
func BenchmarkSaveArchiveMemory(b *testing.B) {
	dir := b.TempDir()
	path := writeBigArchive(b, dir, 256<<20)
	var growth []int64
	for b.Loop() {
		growth = append(growth, saveInChild(b, path))
		os.RemoveAll(filepath.Join(dir, "saved"))
	}
	sort.Slice(growth, func(i, j int) bool { return growth[i] < growth[j] })
	b.ReportMetric(float64(growth[len(growth)/2])/1024, "peak-RSS-growth-MiB")
	b.ReportMetric(float64(fileSize(b, path))/(1<<20), "archive-MiB")
}
