//go:build unix

package main

import "testing"

// TestOperationsDoc runs docs/operations.md's blocks as written, in order, in one directory:
// "Try it" (JSON logs, a request id sent and read back, the metrics and the OpenAPI document
// served), fsck beside that server, an export verified and an edited one refused, then a second server with a retention policy, its dry
// run and its pass.
func TestOperationsDoc(t *testing.T) {
	doc := readDoc(t, "docs/operations.md")
	r := newDocRun(t, "docs/operations.md")
	for _, section := range []string{"## Try it", "## Consistency check", "## Tamper evidence", "## Retention"} {
		for _, b := range mustSection(t, doc, "docs/operations.md", section) {
			for _, c := range b {
				r.run(c)
			}
		}
	}
	r.finish()
}
