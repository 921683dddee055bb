package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// TestNeedFindsAProgram: a program on PATH is found (sh is on every machine the tests run on).
func TestNeedFindsAProgram(t *testing.T) {
	if p := Need(t, "sh", "a shell", ""); filepath.Base(p) != "sh" {
		t.Errorf("Need(sh) = %q", p)
	}
}

// TestNpmPackagesUsesInstalledModules: a source directory whose node_modules is installed is
// linked, not installed again, and its package files are copied.
func TestNpmPackagesUsesInstalledModules(t *testing.T) {
	src := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json"} {
		if err := os.WriteFile(filepath.Join(src, f), []byte(`{"name":"x"}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(src, "node_modules", "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := NpmPackages(t, src)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "pkg")); err != nil {
		t.Errorf("node_modules not linked: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "package-lock.json")); err != nil || string(b) != `{"name":"x"}` {
		t.Errorf("package-lock.json not copied: %q, %v", b, err)
	}
}
