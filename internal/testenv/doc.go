// Package testenv holds what the project's tests need from the machine they run on: programs
// such as curl, node or chromium, and npm packages pinned by a lockfile. A test that lacks one
// is skipped on a developer's machine and fails under CI=true, where everything must run.
// It also reads the process's CPU time for benchmarks that report CPU per operation, and runs
// a built sessiond binary as a server for tests that drive it from other languages ([Serve]).
// Only tests import it.
package testenv
