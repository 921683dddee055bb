//go:build unix

package main

import "testing"

// TestChangeFeedDoc runs docs/api.md's example of the change feed as written (docs_test.go's
// rules): a server, a feed filtered by project replayed from the start, a session created in
// the project and its status changed.
func TestChangeFeedDoc(t *testing.T) {
	doc := readDoc(t, "docs/api.md")
	r := newDocRun(t, "docs/api.md")
	r.run(docCommand{text: "sessiond serve"}) // the server the page's examples run against
	for _, b := range mustSection(t, doc, "docs/api.md", "### `GET /v1/events/stream`: session-level changes across sessions") {
		for _, c := range b {
			r.run(c)
		}
	}
	r.finish()
}
