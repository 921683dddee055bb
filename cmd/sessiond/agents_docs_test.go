//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/testenv"
)

// TestAgentsDoc runs docs/agents.md's blocks in order, as written, in a directory laid out as
// the repository's root: acp/testdata/sdk holds the test agent and the pinned ACP SDK (npm ci
// of its lockfile), importer/testdata is a link to the checkout's fixtures.
func TestAgentsDoc(t *testing.T) {
	testenv.Need(t, "node", "docs/agents.md records an agent written with the ACP SDK", "apt-get install nodejs")
	doc := readDoc(t, "docs/agents.md")
	if !strings.Contains(doc, "in the repository's root, after\n`npm ci --prefix acp/testdata/sdk`") {
		t.Fatal("docs/agents.md no longer says where its example runs; say it, and update this test")
	}
	r := newDocRun(t, "docs/agents.md")
	pkgs := testenv.NpmPackages(t, filepath.Join(r.repo, "acp", "testdata", "sdk"))
	sdk := filepath.Join(r.dir, "acp", "testdata", "sdk")
	if err := os.MkdirAll(sdk, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(pkgs, "node_modules"), filepath.Join(sdk, "node_modules")); err != nil {
		t.Fatal(err)
	}
	agent, err := os.ReadFile(filepath.Join(r.repo, "acp", "testdata", "sdk", "agent.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sdk, "agent.mjs"), agent, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(r.dir, "importer"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(r.repo, "importer", "testdata"), filepath.Join(r.dir, "importer", "testdata")); err != nil {
		t.Fatal(err)
	}
	runDoc(t, r, doc)
}
