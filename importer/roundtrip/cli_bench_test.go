//go:build linux

package roundtrip_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkImportCLI imports copies of the Claude Code fixture as a user does: `sessiond
// import --format claude-code DIR` into `sessiond serve` on SQLite, two processes of the binary
// built from this tree, which inherit the test's environment (GOGC, say). Each op imports a
// directory of 100 new files of 480 lines (as BenchmarkImport's copies) into the one server.
// It reports source lines per second of wall time, and the CPU time of each process per line.
func BenchmarkImportCLI(b *testing.B) {
	tc := benchFiles[1]
	if tc.format != "claude-code" {
		b.Fatalf("benchFiles[1] is %s", tc.format)
	}
	bin := buildSessiond(b)
	base, server := serveSessiond(b, bin)
	lines := 0
	var elapsed, serverCPU, clientCPU time.Duration
	for b.Loop() {
		b.StopTimer()
		dir := filepath.Join(b.TempDir(), "files")
		if err := os.Mkdir(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		benchCopies(b, dir, tc.file, tc.id, 100, tc.turns)
		cpu0 := procCPU(b, server.Process.Pid)
		var out, errOut bytes.Buffer
		cmd := exec.Command(bin, "import", "--server", base, "--format", tc.format, "--json", dir)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		b.StartTimer()
		start := time.Now()
		err := cmd.Run()
		elapsed += time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatalf("sessiond import: %v\n%s", err, errOut.Bytes())
		}
		serverCPU += procCPU(b, server.Process.Pid) - cpu0
		clientCPU += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		var sum struct {
			Lines, Accepted, Duplicate int
			Errors                     []string
		}
		if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
			b.Fatalf("sessiond import --json: %v\n%.300s", err, out.Bytes())
		}
		if sum.Lines != 100*480 || sum.Duplicate != 0 || sum.Accepted == 0 || len(sum.Errors) > 0 {
			b.Fatalf("import: %d lines, %d accepted, %d duplicate, errors %q", sum.Lines, sum.Accepted, sum.Duplicate, sum.Errors)
		}
		lines += sum.Lines
		b.StartTimer()
	}
	b.ReportMetric(float64(lines)/elapsed.Seconds(), "lines/s")
	b.ReportMetric(float64(serverCPU.Microseconds())/float64(lines), "server-cpu-µs/line")
	b.ReportMetric(float64(clientCPU.Microseconds())/float64(lines), "client-cpu-µs/line")
}

// buildSessiond builds cmd/sessiond into a temporary directory and returns the binary's path.
func buildSessiond(b *testing.B) string {
	b.Helper()
	mod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		b.Fatalf("go env GOMOD: %v", err)
	}
	bin := filepath.Join(b.TempDir(), "sessiond")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/sessiond")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(mod)))
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/sessiond: %v\n%s", err, out)
	}
	return bin
}

// serveSessiond starts `bin serve` on a free loopback port with its data in a temporary
// directory, waits until it answers, and returns its URL and process (stopped at the end).
func serveSessiond(b *testing.B, bin string) (string, *exec.Cmd) {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var logs bytes.Buffer
	cmd := exec.Command(bin, "serve", "--addr", addr, "--data", filepath.Join(b.TempDir(), "data"))
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	base := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/healthz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base, cmd
			}
		}
		select {
		case <-ctx.Done():
			b.Fatalf("sessiond serve did not answer at %s: %s", base, logs.Bytes())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// procCPU returns the user and system time process pid has used (/proc/<pid>/stat).
func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	var ticks int64
	for _, s := range f[11:13] { // utime, stime: fields 14 and 15 of stat
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatalf("/proc/%d/stat: %v", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}
