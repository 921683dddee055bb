//go:build linux

package roundtrip_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/benchkit"
)

// TestMain removes the sessiond binary BenchmarkImportCLI had built.
func TestMain(m *testing.M) {
	code := m.Run()
	benchkit.Cleanup()
	os.Exit(code)
}

// BenchmarkImportCLI imports copies of the Claude Code fixture as a user does: `sessiond
// import --format claude-code DIR` into `sessiond serve` on SQLite, two processes of the binary
// built from this tree (benchkit.Binary, benchkit.StartSessiond),
// which inherit the test's environment (GOGC, say). Each op imports a directory of 100 new
// files of 480 lines (as BenchmarkImport's copies) into the one server. It reports source
// lines per second of wall time, and the CPU time of each process per line.
func BenchmarkImportCLI(b *testing.B) {
	tc := benchFiles[1]
	if tc.format != "claude-code" {
		b.Fatalf("benchFiles[1] is %s", tc.format)
	}
	bin, err := benchkit.Binary()
	if err != nil {
		b.Fatal(err)
	}
	srv, err := benchkit.StartSessiond("")
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	server := srv.Procs[0]
	lines := 0
	var elapsed, serverCPU, clientCPU time.Duration
	for b.Loop() {
		b.StopTimer()
		dir := filepath.Join(b.TempDir(), "files")
		if err := os.Mkdir(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		benchCopies(b, dir, tc, 100)
		u0 := server.Usage()
		var out, errOut bytes.Buffer
		cmd := exec.Command(bin, "import", "--server", srv.URL, "--format", tc.format, "--json", dir)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		b.StartTimer()
		start := time.Now()
		err := cmd.Run()
		elapsed += time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatalf("sessiond import: %v\n%s", err, errOut.Bytes())
		}
		serverCPU += server.Usage().CPU - u0.CPU
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
