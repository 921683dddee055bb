package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"
)

// Tmpfs mounts a tmpfs of size bytes on a new temporary directory, unmounted when the test
// ends, and returns the directory: a real file system a test can fill. It skips the test
// unless it runs as root on Linux (CI does), or when the mount fails.
func Tmpfs(t testing.TB, size int) string {
	t.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("needs root on Linux to mount a small tmpfs (CI runs as root)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}
