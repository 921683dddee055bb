package sqlite

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

const (
	crashDirEnv  = "SESSIOND_CRASH_DIR"
	crashIterEnv = "SESSIOND_CRASH_ITER"
	crashSession = "S-crash"
	crashBatch   = 4 // events per batch
	crashWriters = 4 // concurrent appenders in the child
)

// TestCrash kills a process that is appending, for real (SIGKILL at random moments), many
// times, while the tail moves into events, and checks after each kill that the reopened store holds every acknowledged event at
// its acknowledged sequence, that sequences are gap-free, that no key is stored twice and that
// no batch is half there. The child is this test binary running TestCrashChild.
func TestCrash(t *testing.T) {
	iterations := 20
	if testing.Short() {
		iterations = 6
	}
	dir := t.TempDir()
	// Batches of 4 small events go to event_tail; with a tail of 16 rows a move pass (2 rows a
	// commit) is under way most of the time, so kills land in every step of it (tail.go).
	setTailRows(t, dir, 16)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	acked := map[string]int64{} // key -> acknowledged sequence, over all iterations
	for it := 0; it < iterations; it++ {
		lines := runCrashChild(t, dir, it, time.Duration(20+rng.Intn(181))*time.Millisecond)
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) != 3 || f[0] != "ack" {
				continue
			}
			seq, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatalf("child printed %q", l)
			}
			acked[f[2]] = seq
		}
		checkCrashedStore(t, dir, it, acked)
	}
	if len(acked) == 0 {
		t.Fatal("no append was acknowledged in any iteration; the test proved nothing")
	}
	t.Logf("%d iterations, %d acknowledged events checked", iterations, len(acked))
}

// runCrashChild starts the child, lets it append for d after it reports ready, kills it with
// SIGKILL and returns the complete lines it printed.
func runCrashChild(t *testing.T, dir string, it int, d time.Duration) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashIterEnv+"="+strconv.Itoa(it))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	var lines []string
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := bufio.NewReader(out)
		once := sync.Once{}
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return // a line cut by the kill has no '\n' and is dropped
			}
			if strings.HasPrefix(l, "ready") {
				once.Do(func() { close(ready) })
			}
			lines = append(lines, strings.TrimSpace(l))
		}
	}()
	select {
	case <-ready:
	case <-done:
		cmd.Wait()
		t.Fatalf("iteration %d: child exited before it was ready", it)
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("iteration %d: child not ready after 20s", it)
	}
	time.Sleep(d)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill child: %v", err)
	}
	<-done
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("iteration %d: child ended with %v, want killed by SIGKILL", it, err)
	}
	return lines
}

func checkCrashedStore(t *testing.T, dir string, it int, acked map[string]int64) {
	t.Helper()
	ctx := context.Background()
	st, err := Open(ctx, dir)
	if err != nil {
		t.Fatalf("iteration %d: reopen after kill: %v", it, err)
	}
	defer st.Close()
	var log []store.StoredEvent
	for after := int64(-1); ; {
		page, err := st.ReadEvents(ctx, crashSession, after, 0)
		if errors.Is(err, store.ErrSessionNotFound) && len(acked) == 0 {
			return // killed before the session was created
		}
		if err != nil {
			t.Fatalf("iteration %d: read: %v", it, err)
		}
		if len(page) == 0 {
			break
		}
		log = append(log, page...)
		after = page[len(page)-1].Sequence
	}
	bySeq := map[string]int64{}
	batches := map[string][]int64{}
	for i, e := range log {
		if e.Sequence != int64(i) {
			t.Fatalf("iteration %d: event %d has sequence %d: a gap", it, i, e.Sequence)
		}
		if _, dup := bySeq[e.IdempotencyKey]; dup {
			t.Fatalf("iteration %d: key %s stored twice", it, e.IdempotencyKey)
		}
		bySeq[e.IdempotencyKey] = e.Sequence
		ev, err := contract.CheckEvent(e.Data, contract.Limits{})
		if err != nil || ev.Sequence != e.Sequence || ev.IdempotencyKey != e.IdempotencyKey {
			t.Fatalf("iteration %d: stored event %d is damaged: %v %s", it, i, err, e.Data)
		}
		b, _, _ := strings.Cut(e.IdempotencyKey, "/")
		batches[b] = append(batches[b], e.Sequence)
	}
	for b, seqs := range batches {
		if len(seqs) != crashBatch || seqs[crashBatch-1]-seqs[0] != crashBatch-1 {
			t.Fatalf("iteration %d: batch %s is stored as sequences %v; want %d consecutive", it, b, seqs, crashBatch)
		}
	}
	for key, seq := range acked {
		got, ok := bySeq[key]
		if !ok {
			t.Fatalf("iteration %d: acknowledged event %s (sequence %d) is lost", it, key, seq)
		}
		if got != seq {
			t.Fatalf("iteration %d: acknowledged event %s had sequence %d, now %d", it, key, seq, got)
		}
	}
	if n, err := st.LastSequence(ctx, crashSession); err != nil || n != int64(len(log))-1 {
		t.Fatalf("iteration %d: LastSequence = %d, %v; the log ends at %d", it, n, err, len(log)-1)
	}
}

// TestCrashChild is the process TestCrash kills: it appends batches from several goroutines
// until it dies, printing "ack <sequence> <key>" for each event once Append has returned.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process of TestCrash; runs only when TestCrash starts it")
	}
	it := os.Getenv(crashIterEnv)
	ctx := context.Background()
	st, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateSession(ctx, storetest.NewSession(crashSession, storetest.SessionSpec{})); err != nil && !errors.Is(err, store.ErrSessionExists) {
		t.Fatal(err)
	}
	var mu sync.Mutex
	os.Stdout.WriteString("ready\n")
	var wg sync.WaitGroup
	for g := 0; g < crashWriters; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for b := 0; ; b++ {
				batch := make([]*contract.EncodedEvent, crashBatch)
				for i := range batch {
					key := fmt.Sprintf("i%s-g%d-b%d/%d", it, g, b, i)
					batch[i] = storetest.TerminalEvent(t, crashSession, key, strings.Repeat("output ", 1+i*20))
				}
				res, err := st.Append(ctx, crashSession, batch, store.AppendOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				var sb strings.Builder
				for i, r := range res {
					fmt.Fprintf(&sb, "ack %d %s\n", r.Sequence, batch[i].IdempotencyKey)
				}
				mu.Lock()
				os.Stdout.WriteString(sb.String())
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
}
