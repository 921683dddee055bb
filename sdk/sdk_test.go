package sdk

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testenv"
)

// sessiondBin is the sessiond binary the tests build once (TestMain), in buildDir.
var sessiondBin, buildDir string

func TestMain(m *testing.M) {
	flag.Parse()
	code := func() int {
		if testing.Short() {
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "sessiond-sdk")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		buildDir = dir
		build := exec.Command("go", "build", "-o", dir, "./cmd/sessiond")
		build.Dir = ".."
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build ./cmd/sessiond: %v\n%s", err, out)
			return 1
		}
		sessiondBin = filepath.Join(dir, "sessiond")
		return m.Run()
	}()
	os.Exit(code)
}

// serve runs "sessiond serve" on a free loopback port with a fresh data directory and returns
// its URL and its log; the process is killed when the test ends.
func serve(t *testing.T) (string, *testenv.SyncBuffer) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the real sessiond and the SDKs' runtimes: skipped with -short")
	}
	return testenv.Serve(t, sessiondBin, "--data", filepath.Join(t.TempDir(), "data"))
}

// run runs a program with SESSIOND_URL set, failing the test with its output and the
// server's log if it fails.
func run(t *testing.T, url string, log *testenv.SyncBuffer, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "SESSIOND_URL="+url), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s\nsessiond:\n%s", name, strings.Join(args, " "), err, out, log.String())
	}
	return string(out)
}

// snippets returns the bodies of the fenced blocks of docs/sdk.md in language lang.
func snippets(t *testing.T, lang string) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/sdk.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?ms)^```" + lang + "\n(.*?)^```\n")
	var out []string
	for _, m := range re.FindAllSubmatch(b, -1) {
		out = append(out, string(m[1]))
	}
	if len(out) == 0 {
		t.Fatalf("docs/sdk.md has no ```%s block", lang)
	}
	return out
}

// copyTree copies the files under src (relative to this directory) into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			if d.Name() == "node_modules" || d.Name() == "dist" || d.Name() == "__pycache__" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if rel == "package.json" || rel == "package-lock.json" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

var (
	tsOnce sync.Once
	tsDir  string
	tsErr  error
)

// typescript compiles the TypeScript SDK, its tests and its test programs with the pinned tsc
// once per test binary, with the ts blocks of docs/sdk.md as more test files (they import the
// package by its name), and returns the package's directory (dist/ holds the output).
func typescript(t *testing.T) string {
	t.Helper()
	node := testenv.Need(t, "node", "it runs the TypeScript SDK's tests", "apt-get install nodejs npm")
	tsOnce.Do(func() {
		pkg := filepath.Join(buildDir, "typescript")
		if tsErr = os.MkdirAll(pkg, 0o755); tsErr != nil {
			return
		}
		for _, f := range []string{"package.json", "package-lock.json"} {
			b, err := os.ReadFile(filepath.Join("typescript", f))
			if err != nil {
				tsErr = err
				return
			}
			if tsErr = os.WriteFile(filepath.Join(pkg, f), b, 0o644); tsErr != nil {
				return
			}
		}
		mods, err := filepath.Abs(filepath.Join("typescript", "node_modules"))
		if err != nil {
			tsErr = err
			return
		}
		if _, err := os.Stat(mods); err == nil {
			if tsErr = os.Symlink(mods, filepath.Join(pkg, "node_modules")); tsErr != nil {
				return
			}
		} else {
			// Not installed in the repository (npm ci --prefix sdk/typescript): install the
			// pinned packages into the build directory.
			npm, err := exec.LookPath("npm")
			if err != nil {
				tsErr = fmt.Errorf("npm ci --prefix sdk/typescript first (no npm on PATH to install the pinned packages): %v", err)
				return
			}
			cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--prefer-offline")
			cmd.Dir = pkg
			if out, err := cmd.CombinedOutput(); err != nil {
				tsErr = fmt.Errorf("npm ci in %s: %v\n%s", pkg, err, out)
				return
			}
		}
		copyTree(t, "typescript", pkg)
		// The example worker, compiled beside the tests (it imports the package by its name).
		ex, err := os.ReadFile(filepath.Join("..", "examples", "aisdk-worker", "worker.ts"))
		if err != nil {
			tsErr = err
			return
		}
		if tsErr = os.MkdirAll(filepath.Join(pkg, "examples"), 0o755); tsErr != nil {
			return
		}
		if tsErr = os.WriteFile(filepath.Join(pkg, "examples", "aisdk-worker.ts"), ex, 0o644); tsErr != nil {
			return
		}
		for i, s := range snippets(t, "ts") {
			if tsErr = os.WriteFile(filepath.Join(pkg, "test", fmt.Sprintf("doc_%d.test.ts", i)), []byte(s), 0o644); tsErr != nil {
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "node_modules/typescript/bin/tsc", "-p", "tsconfig.test.json")
		cmd.Dir = pkg
		if out, err := cmd.CombinedOutput(); err != nil {
			tsErr = fmt.Errorf("tsc -p tsconfig.test.json: %v\n%s", err, out)
		}
		tsDir = pkg
	})
	if tsErr != nil {
		t.Fatal(tsErr)
	}
	return tsDir
}

// TestTypeScriptSDK runs the TypeScript SDK's tests (test/*.test.ts, compiled by typescript)
// with node --test against the real server: retried appends, follow across cut connections,
// the worker's lease and stop, fencing; the adapters with the real AI SDK, OpenAI Agents SDK and
// LangGraph.js, offline; and the ts blocks of docs/sdk.md.
func TestTypeScriptSDK(t *testing.T) {
	url, log := serve(t)
	node := testenv.Need(t, "node", "it runs the TypeScript SDK's tests", "apt-get install nodejs npm")
	pkg := typescript(t)
	out := run(t, url, log, pkg, nil, node, "--test", "--test-concurrency=1", "dist/test/")
	t.Logf("node --test:\n%s", out)
}

// pytest returns a python3 that has pytest (the one on PATH, else Debian's /usr/bin/python3
// with python3-pytest), or "" when none has: then the tests run under unittest, except under
// CI=true, where .ci/run installs python3-pytest and its absence fails the test.
func pytest(t *testing.T, py string) string {
	t.Helper()
	for _, c := range []string{py, "/usr/bin/python3"} {
		if exec.Command(c, "-m", "pytest", "--version").Run() == nil {
			return c
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("no python3 with pytest (%s, /usr/bin/python3): apt-get install python3-pytest", py)
	}
	t.Logf("no python3 with pytest (%s, /usr/bin/python3): running the tests with unittest (apt-get install python3-pytest)", py)
	return ""
}

// TestPythonSDK runs the Python SDK's tests with pytest (or python3 -m unittest without it)
// against the real server, then each python block of docs/sdk.md.
func TestPythonSDK(t *testing.T) {
	url, log := serve(t)
	py := testenv.Need(t, "python3", "it runs the Python SDK's tests", "apt-get install python3")
	dir, err := filepath.Abs("python")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PYTHONPATH=" + dir, "PYTHONDONTWRITEBYTECODE=1"}
	if withPytest := pytest(t, py); withPytest != "" {
		out := run(t, url, log, dir, env, withPytest, "-m", "pytest", "-p", "no:cacheprovider", "-v", "-s", "tests")
		t.Logf("%s -m pytest:\n%s", withPytest, out)
	} else {
		out := run(t, url, log, dir, env, py, "-m", "unittest", "discover", "-s", "tests", "-v")
		t.Logf("python3 -m unittest:\n%s", out)
	}
	for i, s := range snippets(t, "python") {
		t.Run(fmt.Sprintf("docs/sdk.md python block %d", i), func(t *testing.T) {
			run(t, url, log, t.TempDir(), env, py, "-c", s)
		})
	}
}
