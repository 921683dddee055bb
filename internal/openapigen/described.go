package openapigen

// tags are the document's groups of operations, in the order docs/api.md presents them; each
// operation belongs to exactly one (described below).
var tags = []struct{ name, desc string }{
	{"health", "Liveness and readiness probes for load balancers and orchestrators."},
	{"sessions", "Sessions: their records, snapshots and lifecycle fields."},
	{"events", "The append-only event log of a session: append, read, and follow live."},
	{"runs", "Runs (the projection of a session's status events) and the workers that claim them under leases."},
	{"commands", "Commands that steer a session: stop, steer, approve, retry, fork and the rest, safe under retries and races."},
	{"views", "Read models folded from the log: the view model, the transcript, the lineage."},
	{"search", "Full-text search over the events of every session of the caller's project, with filters (docs/search.md)."},
	{"bridges", "Protocol bridges for front ends: the Vercel AI SDK's chat and AG-UI."},
	{"lifecycle", "Heartbeats, work windows, assessments, staleness, archives and restores."},
	{"auth", "Credentials: API keys, the web UI's login cookie, stream tokens."},
	{"operations", "What an operator uses: metrics, this document, the web UI's files."},
}

// described holds each operation's tag and description, by operationId. The description
// says what the summary does not: what the operation promises under retries and races, who
// may call it, and where docs/api.md explains it. Generate fails on an operation missing here.
var described = map[string]struct{ tag, desc string }{
	"health": {"health", "Answers 200 while the process serves requests and 503 once it is shutting down, without touching the store. " +
		"Use it as a liveness probe; use /readyz to decide whether to route writes here (docs/api.md, Health)."},
	"ready": {"health", "Answers 200 only while the store takes writes. The error code says why it does not: the disk is full, the " +
		"database cannot be reached, or it refuses writes (a standby, a read-only connection). Retry-After says when to ask again."},
	"webUI": {"operations", "The single page of the web UI. It routes by the URL's fragment (#/s/ID), so every view is this document; " +
		"it is served with a Content-Security-Policy that allows only the server's own scripts and styles."},
	"webUIFile": {"operations", "A static file of the web UI, or /ui/policy.json, the policy table the page gates its controls by " +
		"(the same table the server judges commands by). Every file carries an ETag and is revalidated on each load."},
	"openapi": {"operations", "The OpenAPI 3.1 description of this API, generated from the server's operations table. " +
		"Every request and answer of the server's own tests is validated against it."},
	"metrics": {"operations", "The Prometheus metrics: requests, appends by origin and kind, refusals by code, streams, leases, " +
		"the store. docs/operations.md lists every series. sessiond serve always collects them; 501 NOT_CONFIGURED comes only from " +
		"an embedding program that built its server without metrics."},
	"createSession": {"sessions", "Creates a session from its record fields and its snapshot. Retrying with the same session id " +
		"answers 409 SESSION_EXISTS; the answer carries Location, the session's URL (docs/api.md, Sessions)."},
	"listSessions": {"sessions", "Lists the sessions the caller may see, newest first, filtered by status, agent and project, a page " +
		"at a time with an opaque cursor. The page has an ETag: a poller that sends If-None-Match gets 304 while nothing changed."},
	"getUsage": {"views", "Sums the usage rollup (kept in the commit of every append) over a range of UTC days: tokens as the usage " +
		"events carry them, runs and tool calls that ended, grouped by project, agent, model, session or day, and the tools called. " +
		"A key of one project counts its own sessions only; a sessionId it may not see counts nothing, as a missing one (docs/api.md, Usage)."},
	"getSession": {"sessions", "The session's record, snapshot, last sequence, current run, lineage, active branch, lifecycle and " +
		"staleness advice. Another project's session answers 404 SESSION_NOT_FOUND, exactly as a missing one."},
	"patchSession": {"sessions", "Changes the record's lifecycle fields (status, phase, gates) or replaces the snapshot. The record " +
		"status follows the contract's state machine; a transition it forbids answers 409 INVALID_STATE."},
	"appendEvents": {"events", "Appends one event, a JSON array or NDJSON, all or nothing: either every event is stored (201) or none " +
		"is. A retry of the same events (same ids and idempotency keys) answers 200 with every result duplicate and changes nothing. " +
		"expectedSequence makes the append conditional; Sessiond-Lease fences a worker's writes on its run (docs/api.md, Events)."},
	"readEvents": {"events", "A page of the log in sequence order, after a cursor. Events are returned exactly as stored; " +
		"read on from lastSequence."},
	"exportEvents": {"events", "The whole log from a cursor to its end in one streamed answer, for exports and replays: NDJSON, " +
		"each line an event exactly as stored, ending at Sessiond-Last-Sequence. A body cut short has no final chunk; " +
		"resume with after = the last sequence received (docs/api.md, Events)."},
	"streamEvents": {"events", "The log as server-sent events from a cursor, then live, without gap or repeat across reconnects " +
		"(Last-Event-ID). A browser's EventSource authenticates with a stream token in ?token= (docs/api.md, Live stream)."},
	"streamChanges": {"events", "Session-level changes (created, status, archived, restored, deleted, forked) across the sessions " +
		"the caller may see, as server-sent events with a resumable change number (docs/api.md, The change feed)."},
	"search": {"search", "Finds events by their text (message text, reasoning, titles, tool names, inputs and outputs, paths, " +
		"terminal output, tests, errors) across the sessions of the caller's project, with filters on the session, the event and " +
		"its run; newest first, or best first among the newest 1,000 matches; a page at a time with a cursor tied to its query. " +
		"The index is kept asynchronously: indexLagSeconds says how far behind it is (docs/search.md)."},
	"listRuns": {"runs", "Every run of the session, oldest first, as projected from its status events: status, attempt, " +
		"fencing token and lease holder."},
	"getRun": {"runs", "One run of the session: its status, attempt, fencing token and the lease held on it, if any."},
	"executeCommand": {"commands", "Executes one AgentSessionCommand under the policy table (capability, allowed run statuses, " +
		"sequence rule). A retry with the same idempotency key answers the first result and changes nothing; a refused or failed " +
		"command answers its AgentSessionCommandResult with the status of its error code (docs/api.md, Commands)."},
	"getView": {"views", "The view model of the contract: the snapshot, the record status, the runs and the events, folded from the log."},
	"getTranscript": {"views", "The log folded into messages (streamed deltas joined), reasoning, tool calls paired with results, " +
		"plan and tasks, diffs, terminals, tests, usage totals, errors and the summary."},
	"continueSession": {"commands", "Starts a new session (thread) from a message of this one, with its lineage recorded as data. " +
		"A repeat with the same idempotency key answers the same thread with duplicate true."},
	"getLineage": {"views", "The tree of forks around the session: where it was forked from and the sessions forked from it, " +
		"limited to the sessions the caller may see."},
	"chat": {"bridges", "The Vercel AI SDK's chat endpoint (useChat's DefaultChatTransport). A new user message is stored and queues " +
		"a run; approval responses are approval commands. Answers the run's UI message stream (docs/bridges.md)."},
	"chatHistory": {"bridges", "The chat's UIMessages folded from the log, to seed useChat's initial messages after a reload."},
	"chatResume": {"bridges", "Resumes the chat's stream after a reload (the AI SDK's reconnectToStream): the active run replayed " +
		"from its start, then live; 204 when no run is active."},
	"chatStop": {"bridges", "Stops the session's active run through the stop command, as the AI SDK's stop button does."},
	"agui": {"bridges", "AG-UI's HttpAgent endpoint: the RunAgentInput's new user message queues a run, resume[] answers pending " +
		"approvals; the answer is the run as AG-UI events (docs/bridges.md)."},
	"aguiMessages": {"bridges", "The session's messages as AG-UI's MESSAGES_SNAPSHOT carries them, folded from the log."},
	"heartbeat":    {"lifecycle", "Records that the session's agent is alive, so the sweeper does not mark it stale (docs/runtime.md)."},
	"assess": {"lifecycle", "Estimates a task's duration from comparable finished sessions (the same agent, role and mode, else the same " +
		"agent); says so when the history is too short for an estimate."},
	"warm": {"lifecycle", "Opens the session's work window (a bounded period of work); a second call answers the open window."},
	"archiveSession": {"lifecycle", "Writes the session to a verified archive file and marks it archived, optionally compacting its " +
		"log. Long archives report progress as NDJSON lines when asked (Accept: application/x-ndjson)."},
	"getStatus":    {"lifecycle", "Liveness, age, archive recency and a recommendation (ok, heartbeat, archive, restore) for the session."},
	"listArchives": {"lifecycle", "The archive directory's archives the caller may see, newest first."},
	"saveArchive": {"lifecycle", "Stores an archive file copied from another host after verifying its checksum and every event, " +
		"streamed to disk without holding it in memory."},
	"restoreArchive": {"lifecycle", "Brings a session back from an archive, verifying it first; a session that exists with other " +
		"content answers 409 RESTORE_CONFLICT. Long restores report progress as NDJSON lines when asked."},
	"claimRun": {"runs", "Claims the oldest queued run that matches, with a lease and a fencing token, long-polling up to wait. " +
		"A run is claimed by one worker at a time; a lapsed lease makes it claimable again (docs/runtime.md, Workers and leases)."},
	"renewLease": {"runs", "Extends the lease held on a run. A lease that expired or was taken over answers 409 LEASE_LOST: " +
		"the worker must stop writing for the run."},
	"releaseLease": {"runs", "Gives up the lease held on a run, so another worker may claim it at once (waiting claims are woken, " +
		"on every instance)."},
	"createStreamToken": {"auth", "A short-lived, read-only token for this session's event stream, for a browser's EventSource, " +
		"which cannot send an Authorization header (docs/security.md)."},
	"login": {"auth", "Sets the web UI's HttpOnly login cookie from the API key in the Authorization header, so the page never " +
		"holds the key (docs/security.md)."},
	"logout":   {"auth", "Clears the web UI's login cookie."},
	"whoami":   {"auth", "The subject, project and scopes of the request's credential."},
	"listKeys": {"auth", "The API keys of the caller's project (or of every project, for a key of every project), without secrets."},
	"createKey": {"auth", "Makes an API key with a project, scopes and an optional expiry; its secret is in this answer only. " +
		"The answer carries Location, the key's URL."},
	"getKey": {"auth", "One API key, without its secret; another project's key answers 404 KEY_NOT_FOUND."},
	"revokeKey": {"auth", "Revokes an API key: it, the keys derived from it (login cookies, stream tokens) and the streams they " +
		"opened stop working within a second."},
	"sweep": {"lifecycle", "Marks silent sessions stale now, and ends their stopping runs, as the background sweeper does every " +
		"--sweep-interval (docs/runtime.md)."},
}
