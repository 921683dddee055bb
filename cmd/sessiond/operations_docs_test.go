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
