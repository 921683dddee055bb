// Package interop tests sessiond's protocol bridges (docs/bridges.md) with the real,
// unmodified npm clients: the Vercel AI SDK (ai) and AG-UI (@ag-ui/client, @ag-ui/core),
// pinned by package-lock.json in this directory. interop_test.go builds and starts the real
// sessiond binary and the example worker (examples/echoagent), then runs the Node test files
// (*.test.mjs) with node --test against them. The package has no Go code of its own.
package interop
