// Package session is the domain of sessiond: what may happen to a session and in what order,
// above the storage (package store) and below the HTTP API (package server). Its [Service]
// executes the contract's commands against a session's log, forks sessions, keeps each
// session's transcript as a projection of its log, and runs the lifecycle: heartbeats, the
// sweeper that marks silent sessions stale, the work window, status and assess, archive and
// restore.
//
// Files, by what they hold:
//
//   - service.go: the Service, the per-session lock and the live transcript it guards.
//   - commands.go: command execution (policy, decision, idempotent append, stop waits).
//   - fork.go: forks and continuations, and the lineage tree.
//   - transcript.go, decode.go: the fold of a log into a [Transcript] and the event decoding
//     it uses.
//   - runtime.go: the service's settings ([Options]), its [Clock], and its background work
//     (Start, Stop: the sweeper, the lease expirer, retention, each on the clock).
//   - lifecycle.go: lifecycle defaults, which statuses are live, and heartbeats.
//   - sweep.go: the sweeper (stale sessions, runs failed with HEARTBEAT_LOST).
//   - window.go: the work window (warm).
//   - status.go: where a session stands, with the archive_now recommendation.
//   - assess.go: the estimate of a task's work from history.
//   - archive.go, reactivate.go: archive and restore; the file format, names and directory
//     are package archive's.
//   - progress.go: progress reports of archive and restore.
//   - refusal.go: [RejectError], the one type of the domain's refusals, whose codes are the
//     constants of package contract.
//   - wire.go: the names of the answer shapes, which are defined in package wire.
//
// Concurrency: commands, forks, archive and restore of one session take that session's lock in
// this process; the store's conditional writes keep several processes (instances) correct, and
// a refused race is answered with a code that says to retry (SEQUENCE_CONFLICT,
// COMMAND_EXECUTION_FAILED, SESSION_MOVED).
package session
