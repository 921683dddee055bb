//go:build unix

package main

import "testing"

// TestWorkersWalkThrough runs the walk-through of docs/runtime.md's "Workers and leases"
// section: a claim, the lease checks of appends, a renewal and the run resource.
func TestWorkersWalkThrough(t *testing.T) {
	doc := readDoc(t, "docs/runtime.md")
	r := newDocRun(t, "docs/runtime.md")
	for _, b := range mustSection(t, doc, "docs/runtime.md", "## 6. Workers and leases") {
		for _, c := range b {
			r.run(c)
		}
	}
	r.finish()
}
