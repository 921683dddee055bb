// Package postgres is the PostgreSQL storage driver of sessiond, for running several sessiond
// instances against one database (pgx v5 with a connection pool). It passes the same
// conformance suite as the SQLite driver (store/storetest).
//
// # Schema and migrations
//
// The store lives in the connection's current schema (the first schema of search_path; set it
// with search_path=... in the URL to give sessiond a schema of its own). Open applies the
// embedded migrations in one transaction under a transaction-scoped advisory lock
// (pg_advisory_xact_lock) keyed by the schema, and records them in schema_migrations, so
// several instances may start at once: one migrates, the others wait and find nothing to do.
//
// # Appends
//
// An append locks its session's row, assigns the next sequences, writes the batch with one
// multi-row INSERT, updates the run projection and the session's last sequence, and sends a
// NOTIFY, all in one transaction; see Store.Append for why row locking gives gap-free reads
// where a global sequence would not. Appends to one session serialize on that lock, through
// every instance; appends to different sessions run in parallel.
//
// # Cross-instance fan-out
//
// Each append's transaction sends NOTIFY on the schema's channel (sessiond_commits, or
// sessiond_commits:<schema> outside "public") with the payload "c <lastSeq> <sessionID>": a
// wake-up only, well under PostgreSQL's 8000-byte payload limit (a session id too long for it
// is sent as its internal key, "k <lastSeq> <sk>", and looked up). PostgreSQL delivers it to
// listeners only if the transaction commits, in commit order. Every Store keeps one dedicated
// connection that LISTENs on the channel and reports each notification to Subscribe's
// callbacks as a store.Commit{SessionID, LastSequence}; subscribers read the events from the
// table (Capabilities().CommitCarriesEvents is false). A commit made through this Store is also
// reported directly by the appending goroutine before Append returns; whichever report comes
// first is delivered and the later one dropped, so per session the sequences a callback sees
// strictly increase.
//
// # A lost listener connection never leaves a silent gap
//
// Notifications sent while no connection listens are lost, so the listener keeps a watermark:
// a snapshot (pg_current_snapshot()) such that every append visible in it has been reported.
// Every second it runs SELECT pg_current_snapshot(), pg_notify(channel, marker) on its own
// connection; when its own marker comes back, every append visible in that snapshot committed
// before the marker's transaction and, notifications being delivered in commit order, was
// reported before the marker arrived: the snapshot becomes the watermark. Each session row
// records the transaction id of its last append (commit_xid). When the connection fails (or a
// marker does not come back within 5 seconds, which catches a silently dead connection) the
// listener reconnects with backoff (50 ms doubling to 5 s, with jitter), LISTENs, and then
// reports every session whose commit_xid is not visible in the watermark (an index range scan
// from the snapshot's xmin): every append that committed while nobody listened is among them,
// and every later one is notified to the new connection. Subscribers therefore see, after a
// reconnect, one Commit with the current last sequence for each session that moved, and never
// wait for events that are already committed. Until the listener has reconnected, remote
// commits are reported late, not lost; local commits are reported at once all along.
//
// # Connections
//
// Each Store uses a pool of at most pool_max_conns connections (default DefaultMaxConns, set in
// the URL) plus one listener connection. The listener needs a real session (LISTEN): point it
// at PostgreSQL directly or at a pooler in session mode, not in transaction mode.
package postgres
