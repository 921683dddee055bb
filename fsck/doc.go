// Package fsck is sessiond's consistency checker: it reads a store through the thin,
// read-only [store.Inspector] each driver provides, and an archive directory, and reports
// every way they break sessiond's invariants, with the session and the sequence concerned.
//
// Every rule lives here, once for both drivers: each session's log is gap-free from 0 (or from
// its compaction point) up to the session's last sequence; event ids and idempotency keys are
// unique in a log; every stored event passes the contract, is in canonical form, and agrees
// with the columns stored beside it; the run projection equals the fold of the log (the
// archive's events first, for a compacted log); stored command results are valid and name
// events of the log; the session record, snapshot, lineage and lifecycle state pass the
// contract and agree with each other; every archive file's checksum holds, and an archive
// that is the only copy of a compacted log is present and intact.
//
// It never writes. docs/operations.md describes the command (sessiond fsck) and each finding.
package fsck
