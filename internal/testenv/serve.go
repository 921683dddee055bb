package testenv

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"sync"
	"testing"
)

// Serve runs the sessiond binary bin as "serve --addr 127.0.0.1:0" with args, waits for its
// first line ("sessiond listening on URL") and returns the URL and the server's log (its
// stderr); the process is killed when the test ends.
func Serve(t testing.TB, bin string, args ...string) (string, *SyncBuffer) {
	t.Helper()
	return StartServe(t, exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...))
}

// StartServe starts cmd, a "sessiond serve" not yet started (its Stdout and Stderr unset),
// waits for its first line ("sessiond listening on URL") and returns the URL and the server's
// log (its stderr); the process is killed when the test ends.
func StartServe(t testing.TB, cmd *exec.Cmd) (string, *SyncBuffer) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	log := &SyncBuffer{}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("sessiond did not start: %v\n%s", err, log.String())
	}
	var u string
	if _, err := fmt.Sscanf(line, "sessiond listening on %s", &u); err != nil {
		t.Fatalf("unexpected first line of sessiond serve: %q", line)
	}
	return u, log
}

// SyncBuffer is a bytes.Buffer safe for a writer goroutine (os/exec's copier) and a reader.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
