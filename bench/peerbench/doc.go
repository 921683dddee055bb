// Package peerbench measures sessiond against the systems a team would otherwise build a
// session log on: Redis Streams, a plain PostgreSQL table and NATS JetStream (issue 20).
//
// Every system runs as its own process, started by the benchmark on a free loopback port in a
// temporary directory and stopped after it, one system at a time: sessiond (the real binary,
// built with go build) on SQLite and on PostgreSQL, redis-server with appendfsync always,
// a PostgreSQL cluster of its own (initdb, pg_ctl) with synchronous_commit on, and
// nats-server (built from the Go module proxy) with sync_interval always. Every system
// makes an append durable (fsynced) before it acknowledges it; the verification mode counts
// the syncs per acknowledgement with strace to check it.
//
// The same events go to every system: realistic ~475-byte agent events (testdata/events.jsonl,
// valid under the contract) with random UUIDv4 event ids and idempotency keys, or, for a
// second row, time-ordered UUIDv7 ones. The workloads are those of the table:
//
//   - W1: 8 clients append batches of 64 events to 8 sessions (events/s, bytes the server
//     wrote to storage per event, server CPU per event).
//   - W2: 64 writers append single events to 64 sessions (events/s, p99 of the append's
//     acknowledgement latency).
//   - W3: the 64 writers resend 20% of W2's events with the same keys and content
//     (duplicates/s; every one must be answered as a duplicate).
//   - W4: 200 live subscribers follow one session while one writer appends single events;
//     the p99 from the writer's acknowledgement (and from its send) to each delivery.
//   - W5: one client reads a 100,000-event session from the start, decoding every event it
//     reads into a structure by one rule for every system (DecodeEvent: encoding/json into
//     Decoded) (events/s). "W5 whole read" is each system's read of the whole session side by
//     side: sessiond's streamed read (GET /v1/sessions/{id}/events/export, NDJSON in one
//     answer) and the floor's, beside each peer's one read (the W5 figure itself), the same
//     client rule for all.
//
// One more column is not a peer but a floor: http-floor (the httpfloor command) serves the
// routes sessiond's client uses through Go's net/http, in memory, with no storage, no sync
// and no validation, doing the HTTP work sessiond's routes do and nothing else: the same
// request parsing (the query checked against the route's parameters, the media type, the
// body read whole), the same answers byte for byte in shape and size (X-Request-Id, the
// append's results, a page's events as stored with their sequences, the stream's opening block
// and event names, the export's NDJSON in chunks of 2,048 events). Its figures are what the
// requests cost through HTTP on both ends with this client on this machine, measured in the
// same run: a durable system answering the same requests over Go's HTTP/1.1 server does at
// least that work per request.
//
// The benchmarks are in peers_bench_test.go (BenchmarkPeers); after a run with -bench the
// test binary prints one table of medians, systems as columns and the ratios of sessiond to
// each peer (docs/benchmarks.md, "Against the peers", has the command and the figures).
// A system whose program is missing is skipped with a message saying what to install.
package peerbench
