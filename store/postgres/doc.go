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
// multi-row INSERT, updates the run projection and, in one update of the session's head, its
// last sequence, commit_xid and heartbeat, all in one transaction; see Store.Append for why row
// locking gives gap-free reads where a global sequence would not. Appends to one session
// serialize on that lock, through every instance; appends to different sessions run in
// parallel.
//
// The session's head (session_heads, migration 0009) is a narrow row of its own, next to the
// wide sessions row (record, snapshot, lineage and their indexes): what every append changes
// lives there, so an append locks the sessions row (FOR NO KEY UPDATE, the lock every writer of
// the session takes) without writing it, and writes a new version of a few columns with three
// index entries instead of the wide row with eight. The head holds the last sequence, the
// commit_xid the listener polls by, the heartbeat of the last append (RFC 3339 text) and the
// heartbeat the stale sweeper orders by, with whether the session is live. Reads show the
// head's heartbeat as the record's last_heartbeat_at; a trigger on the sessions row clears it
// whenever the record is written (a writer reads the record with the heartbeat merged in, so
// the record then holds it) and takes the record's heartbeat and status into the head. An
// append to a stale session that carries a heartbeat revives it in the sessions row (the
// locking path), as before. Since the locked row is no longer written, a statement that waited
// for the lock does not see the previous holder's head in its own snapshot: the head is read in
// a statement of its own after the lock is taken (or, in the one-statement append, updated
// from its latest version, which an UPDATE reads).
//
// Most appends are unconditional (store.Unconditional: no run status event, no lease to check,
// no key or eventId repeated within the batch): their outcome depends only on whether the
// session already stores one of their keys or eventIds. So is, nearly, an append fenced
// without a lease (the HTTP API's, without a lease header) whose events name runs: it is
// refused only when one of those runs holds a lease. Such an append is one statement in one
// round trip (direct.go; the fenced one also locks its runs' rows and checks their leases): it
// looks the batch's keys and eventIds up in the two unique indexes (a batch of more than 8
// events: its first key, and the others and the eventIds only when that one is stored, a batch
// sent again); when none is found it locks
// the session's row (SKIP LOCKED: it does not wait), writes the events with their sequences
// (their stored bytes are built in SQL around the sequence digits), updates the head, and
// commits. The inserts check the unique indexes (session, key) and (session, eventId) as they
// write their entries, so a new large batch costs one lookup, not one per key and eventId; a
// stored key or eventId that was not looked up fails the insert on its index. When the row is locked
// by another transaction, a key turns out to be stored, or an insert fails on a unique index,
// it writes nothing and the append takes the locking path: BEGIN, the row lock and the lookups
// of every key and eventId in one pipelined round trip, store.PlanAppend, then the writes and
// COMMIT in a second. A batch that is all duplicates (a retried append) is answered from the
// first statement's snapshot without taking the lock or writing anything. The statement of a
// batch of more than 8 events is prepared once per connection and sent with its parameters
// encoded in the binary format in one pass (directwire.go). The keys and eventIds
// compare as bytes (COLLATE "C", migration 0010), whatever the database's collation.
//
// Concurrent one-statement appends of small batches (at most 8 events) are committed together
// (group.go): an append that finds no group running leads one, and runs what is queued in one
// transaction, BEGIN, each append's statement, COMMIT, pipelined in one round trip; at most a
// quarter of the pool's connections lead groups at once, the appends that arrive meanwhile
// wait for the next group. Several sessions' appends then share one round trip, one commit and
// one flush of the WAL: with 64 writers of single events the server's CPU per event fell to a
// third and the throughput doubled (docs/benchmarks.md). Each statement still locks its own
// session's row and decides in its own snapshot; its answer is given once COMMIT succeeded.
// When one statement fails on the server (a key committed after its snapshot) the group rolls
// back whole, and every append of it whose statement wrote takes the locking path instead.
//
// # Cross-instance fan-out
//
// Every Store keeps one dedicated connection that LISTENs on the schema's channel
// (sessiond_commits, or sessiond_commits:<schema> outside "public": NOTIFY channels are per
// database) and reports what it hears to Subscribe's callbacks as store.Commit{SessionID,
// LastSequence}: a wake-up only; subscribers read the events from the table
// (Capabilities().CommitCarriesEvents is false). The payload is "c <lastSeq> <sessionID>", well
// under PostgreSQL's 8000-byte limit for contract session ids (at most 256 code points); an id
// too long for it would be sent as the session's internal key, "k <lastSeq> <sk>", and looked
// up.
//
// The NOTIFY is sent right after the append commits, not inside its transaction: PostgreSQL
// holds a database-wide lock from a notifying transaction's pre-commit until its commit is
// flushed, so in-transaction notifications serialize every append's WAL flush and defeat group
// commit (measured here: about 25,000 instead of 45,000 to 80,000 events/s for batches of 64;
// and with the one-statement append, 156 instead of 1,008 events/s for 64 writers of single
// events, see docs/benchmarks.md).
// A per-Store notifier goroutine sends the notifications of the commits that came in while it
// was busy in one transaction (one per session, with its highest sequence), without waiting for
// that transaction's flush. A commit made through this Store is also reported to the Store's
// own subscribers directly, before Append returns. Whichever report of a commit arrives first
// is delivered and a later, lower or equal one dropped, so per session the sequences a callback
// sees strictly increase (commits may be coalesced, never reordered).
//
// # A lost notification or listener connection never leaves a silent gap
//
// A notification can be lost: the appending process may die between its commit and its
// NOTIFY, and notifications sent while a listener's connection is down are not kept for it. So
// the listener also polls. Each session's head records the transaction id of its last append
// (commit_xid). Every second, and right after each (re)connection and LISTEN, the listener runs
// one statement that returns its own snapshot (pg_current_snapshot()) and every session whose
// commit_xid is not visible in the previous poll's snapshot: exactly the sessions with an append
// committed since then (an index range scan from that snapshot's xmin), whose current last
// sequence it reports. Every committed append is visible in some poll's snapshot and not in the
// one before, so it is reported by a notification within milliseconds or by a poll within a
// second of the commit, or of the listener's reconnection, whichever is later. A listener whose
// connection fails (a statement fails, or a poll takes more than 10 seconds) reconnects with
// backoff (50 ms doubling to 2 s, with jitter) and keeps the previous poll's snapshot, so the
// first poll after LISTEN covers the whole outage. Subscribers never wait for events that are
// already committed; remote commits are reported late during an outage, never lost.
//
// # Connections
//
// Each Store uses a pool of at most pool_max_conns connections (default DefaultMaxConns, set in
// the URL) plus one listener connection, and one probe connection to each server of the URL.
// The listener needs a real session (LISTEN): point it at PostgreSQL directly or at a pooler in
// session mode, not in transaction mode.
//
// # Failover
//
// A URL may name several servers (a primary and its standbys, with
// target_session_attrs=read-write). A server that dies refuses connections, and the next
// server takes them; a server that hangs is found only by a deadline, because its kernel still
// completes TCP handshakes and acknowledges keepalives. So every connection attempt has a
// deadline (connect_timeout, DefaultConnectTimeout by default), and each server is probed once
// a second (pg_is_in_recovery(), 2 s deadline, hosts.go): a server that does not answer has
// every socket the store holds to it closed at once, so that the statements waiting there fail
// now and are tried again elsewhere (an append with its idempotency keys: an attempt that may
// have committed is answered as a duplicate, or, if every attempt fails, with
// store.CommitUnknown), and new connections try it last. The server that answers as the
// primary (or that a new read-write connection reached) is tried first, so that a new
// connection does not first wait out its connect timeout on a frozen former primary. A group of
// appends gives its connection up after 10 s. Sockets have TCP keepalive and TCP_USER_TIMEOUT,
// which find a host that is gone. Open reads synchronous_commit and synchronous_standby_names
// and warns when an acknowledged event may not survive the primary's loss.
package postgres
