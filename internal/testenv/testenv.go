package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Need returns the path of the program name. Without it the test is skipped, or fails under
// CI=true; why says what the test needs it for, and install how to get it (may be empty).
func Need(t testing.TB, name, why, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	hint := ""
	if install != "" {
		hint = "; " + install
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not installed and CI=true requires it (%s)%s", name, why, hint)
	}
	t.Skipf("%s is not installed (%s)%s; under CI=true this fails", name, why, hint)
	return ""
}

// NpmPackages returns a new temporary directory holding the package.json and
// package-lock.json of src (a testdata directory) and their node_modules: src's own when
// `npm ci --prefix src` was run (.ci/run does it), else installed there by npm ci from the
// lockfile. Scripts a test writes into the directory resolve the pinned packages.
func NpmPackages(t testing.TB, src string) string {
	t.Helper()
	src, err := filepath.Abs(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Stat(filepath.Join(src, "node_modules")); err == nil && fi.IsDir() {
		if err := os.Symlink(filepath.Join(src, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	npm := Need(t, "npm", "it installs the pinned packages of "+src, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--prefer-offline")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	return dir
}

// ProcessCPU is the user and system CPU time this process has used so far (0 if the system
// does not say): benchmarks report CPU per operation from its differences, a figure a loaded
// machine sways less than wall time.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
