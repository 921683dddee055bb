// Package web is sessiond's web UI: a page that lists sessions and shows one live, built from
// static files embedded in the binary (go:embed), so no Node and no build step are needed to
// build or run sessiond.
//
// Files:
//   - embed.go: the embedded assets and the handlers that serve them (GET / and GET /ui/…),
//     with their content types, ETags and the page's Content-Security-Policy.
//   - policy.go: the command policy table (contract.PolicyOf) as JSON for the page
//     (/ui/policy.json), so the page gates its controls by the same table as the server.
//   - static/: the page (index.html, app.js and its modules, app.css) and static/vendor/,
//     the vendored libraries, each listed with its version and checksum in
//     static/vendor/VENDOR.md (vendor_test.go recomputes the checksums).
//
// The page talks to the API of the same origin only (docs/api.md); it renders untrusted
// event content through marked and DOMPurify (messages) or as text.
package web
