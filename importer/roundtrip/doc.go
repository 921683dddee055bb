// Package roundtrip holds the importer's end-to-end tests and benchmarks: real transcripts
// (the fixtures in importer/testdata) parsed, written through the HTTP API into a server on
// SQLite in the test's process, and read back.
//
// They live apart from package importer so that its fuzz tests build without the server and
// the SQLite driver: coverage-guided fuzzing instruments every package linked into the test
// binary. With the driver linked in, a 25-second fuzz run of the Claude Code parser managed
// about 3,600 executions, most of its time spent snapshotting coverage counters; without it,
// 21,000 to 125,000 in 20 seconds (its remaining pauses are the fuzzer minimizing large seeds).
package roundtrip
