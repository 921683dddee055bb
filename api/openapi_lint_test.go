package api_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// need finds a program the test needs: without it the test is skipped, unless it runs in CI
// (CI=true), where it fails.
func need(t *testing.T, name, why string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed; CI must have it (%s)", name, why)
		}
		t.Skipf("%s is not installed (%s)", name, why)
	}
	return p
}

// redocly returns the Redocly CLI pinned by testdata/redocly/package-lock.json: the one `npm
// ci --prefix api/testdata/redocly` installed (.ci/run does), else a fresh install in a
// temporary directory.
func redocly(t *testing.T) string {
	t.Helper()
	need(t, "node", "Redocly CLI runs on Node")
	src, err := filepath.Abs("testdata/redocly")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(src, "node_modules", ".bin", "redocly")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	npm := need(t, "npm", "it installs the pinned Redocly CLI")
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--prefer-offline")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	return filepath.Join(dir, "node_modules", ".bin", "redocly")
}

// TestOpenAPILint lints api/openapi.json with Redocly CLI's recommended rules: no error and
// no warning.
func TestOpenAPILint(t *testing.T) {
	// Read here too, so that go test's cache knows the result depends on the file.
	if doc, err := os.ReadFile("openapi.json"); err != nil || len(doc) == 0 {
		t.Fatalf("read api/openapi.json: %v", err)
	}
	bin := redocly(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "lint", "--format=json", "openapi.json")
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var report struct {
		Totals struct {
			Errors, Warnings int
		} `json:"totals"`
		Problems []struct {
			RuleID  string `json:"ruleId"`
			Message string `json:"message"`
		} `json:"problems"`
	}
	if jerr := json.Unmarshal(out, &report); jerr != nil {
		t.Fatalf("redocly lint api/openapi.json: %v (%v)\n%s%s", err, jerr, out, stderr.String())
	}
	for _, p := range report.Problems {
		t.Errorf("redocly lint api/openapi.json: %s: %s", p.RuleID, p.Message)
	}
	if err != nil || report.Totals.Errors+report.Totals.Warnings > 0 {
		t.Fatalf("redocly lint api/openapi.json: %v, %d errors, %d warnings; regenerate the document with go test ./internal/openapigen/ -run TestOpenAPIDocument -update after fixing internal/openapigen", err, report.Totals.Errors, report.Totals.Warnings)
	}
}
