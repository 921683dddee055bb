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

	"github.com/sessiond/sessiond/internal/testenv"
)

// redocly returns the Redocly CLI pinned by testdata/redocly/package-lock.json (installed by
// `npm ci --prefix api/testdata/redocly` in .ci/run, else in a temporary directory).
func redocly(t *testing.T) string {
	t.Helper()
	testenv.Need(t, "node", "Redocly CLI runs on Node", "")
	return filepath.Join(testenv.NpmPackages(t, "testdata/redocly"), "node_modules", ".bin", "redocly")
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

// TestOpenAPISpectral lints api/openapi.json with Spectral's spectral:oas ruleset, pinned by
// testdata/spectral/package-lock.json (installed by `npm ci --prefix api/testdata/spectral` in
// .ci/run, else in a temporary directory): no result of any severity.
func TestOpenAPISpectral(t *testing.T) {
	if doc, err := os.ReadFile("openapi.json"); err != nil || len(doc) == 0 {
		t.Fatalf("read api/openapi.json: %v", err)
	}
	testenv.Need(t, "node", "Spectral runs on Node", "")
	bin := filepath.Join(testenv.NpmPackages(t, "testdata/spectral"), "node_modules", ".bin", "spectral")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "lint", "--ruleset", "testdata/spectral/ruleset.yaml", "--format", "json", "--quiet", "openapi.json")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var results []struct {
		Code     string   `json:"code"`
		Message  string   `json:"message"`
		Severity int      `json:"severity"`
		Path     []string `json:"path"`
	}
	if jerr := json.Unmarshal(out, &results); jerr != nil {
		t.Fatalf("spectral lint api/openapi.json: %v (%v)\n%s%s", err, jerr, out, stderr.String())
	}
	for _, r := range results {
		t.Errorf("spectral lint api/openapi.json: %s (severity %d) at %s: %s", r.Code, r.Severity, strings.Join(r.Path, "."), r.Message)
	}
	if err != nil || len(results) > 0 {
		t.Fatalf("spectral lint api/openapi.json: %v, %d results; regenerate the document with go test ./internal/openapigen/ -run TestOpenAPIDocument -update after fixing internal/openapigen", err, len(results))
	}
}
