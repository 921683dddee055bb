//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBridgesDoc runs docs/bridges.md's curl walk-through (the AI SDK chat, its resume and
// history, and an AG-UI run) with examples/echoagent, in the repository's root as the page
// says (examples/ is a link to the checkout's).
func TestBridgesDoc(t *testing.T) {
	needTool(t, "curl", "docs/bridges.md's examples")
	doc := readDoc(t, "docs/bridges.md")
	if !strings.Contains(doc, "From the repository's root, with the example worker") {
		t.Fatal("docs/bridges.md no longer says where its example runs; say it, and update this test")
	}
	r := newDocRun(t, "docs/bridges.md")
	if err := os.Symlink(filepath.Join(r.repo, "examples"), filepath.Join(r.dir, "examples")); err != nil {
		t.Fatal(err)
	}
	runDoc(t, r, doc)
}
