package peerbench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/internal/benchkit"
)

// syncCalls are the system calls that make data durable.
var syncCalls = []string{"fsync", "fdatasync", "sync_file_range", "msync", "syncfs", "sync"}

// Syncs checks that sys makes each append durable before it acknowledges it: one writer
// appends SyncEvents single events, one after the other (so no sync can serve two appends),
// while strace counts the sync system calls of every server process and thread. Figure: syncs
// per acknowledgement, at least 1 for a system that syncs before each ack. Needs strace (and
// the right to trace the server: root, or ptrace allowed).
func Syncs(ctx context.Context, sys System, sz Sizes) ([]Metric, error) {
	strace, err := benchkit.LookProgram("strace", "apt-get install strace")
	if err != nil {
		return nil, err
	}
	procs := sys.Servers()
	if len(procs) == 0 {
		return nil, fmt.Errorf("syncs: %s has no server process to trace", sys.Name())
	}
	sid := benchkit.SessionID("sync", runID.Add(1), 0)
	if err := sys.CreateSession(ctx, sid); err != nil {
		return nil, err
	}
	evs := benchkit.NewGenerator(benchkit.RandomIDs, 0).Batch(sid, sz.SyncEvents)
	// A first append outside the count: the log, its files and its indexes exist.
	if _, err := sys.Append(ctx, sid, benchkit.NewGenerator(benchkit.RandomIDs, 0).Batch(sid, 1)); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "peerbench-strace-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "counts")
	// --seccomp-bpf stops the tracees on the traced calls only, not on every call.
	args := []string{"-f", "--seccomp-bpf", "-c", "-o", out, "-e", "trace=" + strings.Join(syncCalls, ",")}
	var pids []int
	for _, p := range procs {
		for _, pid := range p.PIDs() {
			pids = append(pids, pid)
			args = append(args, "-p", strconv.Itoa(pid))
		}
	}
	cmd := exec.Command(strace, args...)
	stderr := filepath.Join(dir, "stderr")
	f, err := os.Create(stderr)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd.Stderr = f
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start strace: %w", err)
	}
	// Wait until strace says it attached to every process ("Process N attached with M
	// threads"), then a little more: a thread may still be stopping for it.
	for deadline := time.Now().Add(30 * time.Second); ; {
		b, _ := os.ReadFile(stderr)
		if strings.Count(string(b), " attached") >= len(pids) {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, fmt.Errorf("strace did not attach to %v within 30 s: %s", pids, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	for i := range evs {
		if _, err := sys.Append(ctx, sid, evs[i:i+1]); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, err
		}
	}
	cmd.Process.Signal(syscall.SIGINT) // detach and write the counts
	if err := cmd.Wait(); err != nil {
		b, _ := os.ReadFile(stderr)
		if _, ok := err.(*exec.ExitError); !ok {
			return nil, fmt.Errorf("strace: %v: %s", err, b)
		}
	}
	n, err := countSyncs(out)
	if err != nil {
		return nil, err
	}
	return []Metric{{"syncs per ack (1 writer)", float64(n) / float64(len(evs))}}, nil
}

// countSyncs adds up the calls column of strace -c's summary for the sync calls.
func countSyncs(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("strace's counts: %w", err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		// % time, seconds, usecs/call, calls, [errors,] syscall
		if len(fs) < 5 || !slices.Contains(syncCalls, fs[len(fs)-1]) {
			continue
		}
		c, err := strconv.Atoi(fs[3])
		if err != nil {
			return 0, fmt.Errorf("strace's counts: %q: %w", sc.Text(), err)
		}
		n += c
	}
	return n, sc.Err()
}
