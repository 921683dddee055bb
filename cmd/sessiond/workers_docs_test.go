//go:build unix

package main

import "testing"

// TestWorkersWalkThrough runs the walk-through of docs/runtime.md's "Workers and leases"
// section (a claim, the lease checks of appends, a renewal and the run resource), then its
// multitask part, on the same server.
func TestWorkersWalkThrough(t *testing.T) {
	doc := readDoc(t, "docs/runtime.md")
	r := newDocRun(t, "docs/runtime.md")
	for _, heading := range []string{"## 6. Workers and leases", "### Multitask: a person's message while a run works"} {
		for _, b := range mustSection(t, doc, "docs/runtime.md", heading) {
			for _, c := range b {
				r.run(c)
			}
		}
	}
	r.finish()
}
