//go:build unix

package main

import "testing"

// TestOperationsTry runs docs/operations.md's "Try it" block as written: JSON logs, a request
// id sent and read back, the metrics and the OpenAPI document served.
func TestOperationsTry(t *testing.T) {
	doc := readDoc(t, "docs/operations.md")
	r := newDocRun(t, "docs/operations.md")
	for _, b := range mustSection(t, doc, "docs/operations.md", "## Try it") {
		for _, c := range b {
			r.run(c)
		}
	}
	r.finish()
}

// TestOperationsChecks runs docs/operations.md's fsck and retention blocks as written, in
// one directory: fsck beside a running server, then a second server with a retention
// policy, its dry run and its pass.
func TestOperationsChecks(t *testing.T) {
	doc := readDoc(t, "docs/operations.md")
	r := newDocRun(t, "docs/operations.md")
	for _, section := range []string{"## Consistency check", "## Retention"} {
		for _, b := range mustSection(t, doc, "docs/operations.md", section) {
			for _, c := range b {
				r.run(c)
			}
		}
	}
	r.finish()
}
