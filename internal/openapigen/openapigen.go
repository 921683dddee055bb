// Package openapigen generates api/openapi.json, the OpenAPI 3.1 description of the HTTP API,
// from the operations table below, the Go types the server encodes and the contract's schema
// tables. The server's tests validate every request and response they make against the
// generated document (server/openapi_test.go), so the table cannot drift from the server.
package openapigen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/search"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/web"
	"github.com/sessiond/sessiond/wire"
)

// Path is where the document lives, relative to the repository root.
const Path = "api/openapi.json"

// RegenerateCommand rewrites the document from the tables.
const RegenerateCommand = "go test ./internal/openapigen/ -run TestOpenAPIDocument -update"

// param is a query parameter or header of an operation.
type param struct {
	name, in, desc string
	schema         obj
}

// body is a request body: its schema per media type, in the order the route table lists them.
type body struct {
	media    []string
	schema   []any // one per media type: a reflect.Type, an obj, or a func(*schemas) obj
	optional bool  // an empty body is accepted
	desc     string
}

// answer is a success response.
type answer struct {
	status int
	desc   string
	media  string // default application/json
	// negotiated are other media types the answer has when the Accept header asks for them,
	// with the same schema.
	negotiated []string
	// negotiatedSchemas are other media types the answer may have, each with its own schema.
	negotiatedSchemas map[string]any
	schema            any // reflect.Type, obj, or func(*schemas) obj
	// progress: the answer may also be a progress stream (Accept: application/x-ndjson).
	progress bool
	// line is the schema of each data line of a stream (x-sessiond-line): an obj, or a
	// func(*schemas) obj.
	line any
	// headers are the answer's headers beyond X-Request-Id (which every answer has).
	headers obj
}

// operation is one endpoint of the document.
type operation struct {
	pattern string // as in the server's route table: "METHOD /path"
	id      string // operationId
	summary string
	params  []param
	body    *body
	answers []answer
	// errors lists the error codes the operation answers beyond the ones every operation
	// may answer (MALFORMED, INTERNAL, UNAVAILABLE, HEADERS_TOO_LARGE) and the ones its shape
	// implies (a body: TOO_LARGE, UNSUPPORTED_MEDIA_TYPE, CONTRACT_VIOLATION, OVERLOADED,
	// REQUEST_TIMEOUT; a session in the path: SESSION_NOT_FOUND).
	errors []contract.ErrorCode
	// resultErrors: the error statuses may carry an AgentSessionCommandResult instead of the
	// error envelope (commands).
	resultErrors []contract.ErrorCode
	// public: the operation needs no credential even on a server with authentication
	// (docs/security.md); every other one may answer UNAUTHENTICATED, FORBIDDEN and
	// RATE_LIMITED.
	public bool
}

func typ[T any]() reflect.Type { return reflect.TypeFor[T]() }

var (
	intParam = func(min, max int64) obj { return obj{"type": "integer", "minimum": min, "maximum": max} }
	strParam = obj{"type": "string"}
)

// operations is the API, in the order of docs/api.md.
var operations = []operation{
	{pattern: "GET /healthz", id: "health", public: true, summary: "Liveness and readiness: 200 while serving, 503 once shutting down",
		answers: []answer{
			{status: 200, desc: "serving", schema: obj{"type": "object", "additionalProperties": false, "required": []any{"status", "store"},
				"properties": obj{"status": obj{"const": "ok"}, "store": obj{"type": "string", "description": "the store driver: sqlite or postgres"}}}},
			{status: 503, desc: "shutting down: take the instance out of rotation", schema: obj{"type": "object", "additionalProperties": false, "required": []any{"status"},
				"properties": obj{"status": obj{"const": "shutting-down"}}}},
		}},
	{pattern: "GET /readyz", id: "ready", public: true, summary: "Readiness for a load balancer: 200 while the store takes writes; when it cannot, 507 STORE_FULL (until space is freed), 503 STORE_UNAVAILABLE (the database cannot be reached) or 503 STORE_UNWRITABLE (it refuses writes); 503 UNAVAILABLE once shutting down",
		answers: []answer{
			{status: 200, desc: "ready: the store takes writes", schema: obj{"type": "object", "additionalProperties": false, "required": []any{"status", "store"},
				"properties": obj{"status": obj{"const": "ready"}, "store": obj{"type": "string", "description": "the store driver: sqlite or postgres"}}}},
		},
		errors: []contract.ErrorCode{contract.CodeStoreUnwritable, contract.CodeStoreFull, contract.CodeStoreUnavailable}},
	{pattern: "GET /{$}", id: "webUI", public: true, summary: "The web UI's page (docs/api.md, Web UI)",
		params: []param{{name: "If-None-Match", in: "header", desc: "the ETag of a copy the client has", schema: strParam}},
		answers: []answer{
			{status: 200, media: "text/html", desc: "the page", schema: obj{"type": "string"}, headers: assetHeaders},
			{status: 304, desc: "the client's copy (If-None-Match) is current", headers: obj{"ETag": etagHeader}},
		}},
	{pattern: "GET /ui/{file...}", id: "webUIFile", public: true, summary: "A file of the web UI: its scripts, styles, vendored libraries and policy table",
		params: []param{{name: "If-None-Match", in: "header", desc: "the ETag of a copy the client has", schema: strParam}},
		answers: []answer{
			{status: 200, media: "*/*", desc: "the file, with its ETag (application/json: policy.json, the policy table; every other file is a script, a style sheet or a text)", schema: obj{"type": "string"},
				negotiatedSchemas: map[string]any{"application/json": typ[web.Policy]()}, headers: assetHeaders},
			{status: 304, desc: "the client's copy (If-None-Match) is current", headers: obj{"ETag": etagHeader}},
		},
		errors: []contract.ErrorCode{contract.CodeNotFound}},
	{pattern: "GET /v1/openapi.json", id: "openapi", public: true, summary: "This document",
		answers: []answer{{status: 200, desc: "the OpenAPI 3.1 document", schema: obj{"type": "object"}}}},
	{pattern: "GET /metrics", id: "metrics", summary: "Prometheus metrics (docs/operations.md lists them)",
		answers: []answer{{status: 200, media: "text/plain", negotiated: []string{"application/openmetrics-text"}, schema: obj{"type": "string"},
			desc:    "the Prometheus text exposition format (version 0.0.4), or OpenMetrics (1.0.0) when the Accept header asks for application/openmetrics-text",
			headers: obj{"Content-Encoding": obj{"description": "gzip when the Accept-Encoding header allows it", "schema": obj{"const": "gzip"}}}}},
		errors: []contract.ErrorCode{contract.CodeNotConfigured}},
	{pattern: "POST /v1/sessions", id: "createSession", summary: "Create a session from record fields and a snapshot",
		body:    &body{media: []string{"application/json"}, schema: []any{typ[api.CreateSessionRequest]()}},
		answers: []answer{{status: 201, desc: "created", schema: typ[api.Session](), headers: obj{"Location": locationHeader("the session's URL: /v1/sessions/{id}")}}},
		errors:  []contract.ErrorCode{contract.CodeSessionExists}},
	{pattern: "GET /v1/sessions", id: "listSessions", summary: "List sessions, newest first, a page at a time",
		params: []param{
			{name: "status", in: "query", desc: "only sessions with this record status", schema: obj{"type": "string", "enum": anyList(contract.SessionStatuses)}},
			{name: "agent", in: "query", desc: "only sessions of this agent_id", schema: strParam},
			{name: "project", in: "query", desc: "only sessions of this project", schema: strParam},
			{name: "after", in: "query", desc: "the cursor of the previous page (its next)", schema: strParam},
			{name: "limit", in: "query", desc: "page size (default 100)", schema: intParam(1, 1000)},
			{name: "If-None-Match", in: "header", desc: "the ETag of the page the client has", schema: strParam},
		},
		answers: []answer{
			{status: 200, desc: "one page, with its ETag", schema: typ[api.SessionList](), headers: obj{"ETag": etagHeader, "Cache-Control": cacheControl("no-cache")}},
			{status: 304, desc: "the page is unchanged since the ETag given in If-None-Match", headers: obj{"ETag": etagHeader, "Cache-Control": cacheControl("no-cache")}},
		}},
	{pattern: "GET /v1/usage", id: "getUsage", summary: "Usage analytics: tokens, runs and tool calls of the sessions the caller may see, per UTC day range, grouped and filtered (docs/api.md, Usage)",
		params: []param{
			{name: "from", in: "query", desc: "the first UTC day counted, YYYY-MM-DD (default: 29 days before to)", schema: obj{"type": "string", "format": "date"}},
			{name: "to", in: "query", desc: "the last UTC day counted, YYYY-MM-DD, inclusive (default: today); at most 366 days from from", schema: obj{"type": "string", "format": "date"}},
			{name: "by", in: "query", desc: "dimensions to group by, comma-separated: project, agent, model, session, day (default: none, one total)", schema: obj{"type": "string", "pattern": `^(project|agent|model|session|day)(,(project|agent|model|session|day))*$`}},
			{name: "project", in: "query", desc: "only sessions of this project (a credential of one project counts only its own)", schema: strParam},
			{name: "agent", in: "query", desc: "only sessions of this agent_id", schema: strParam},
			{name: "model", in: "query", desc: "only sessions whose snapshot's modelId is this", schema: strParam},
			{name: "sessionId", in: "query", desc: "only this session (one the caller may not see counts nothing, as a missing one)", schema: strParam},
			{name: "limit", in: "query", desc: "at most this many groups (default 1000)", schema: intParam(1, 10000)},
		},
		answers: []answer{{status: 200, desc: "the groups, the total and the tools called", schema: typ[api.UsageResponse]()}}},
	{pattern: "GET /v1/sessions/{id}", id: "getSession", summary: "The session resource",
		answers: []answer{{status: 200, desc: "the session", schema: typ[api.Session]()}}},
	{pattern: "PATCH /v1/sessions/{id}", id: "patchSession", summary: "Change the record's lifecycle fields or replace the snapshot",
		body:    &body{media: []string{"application/json"}, schema: []any{typ[api.PatchSessionRequest]()}},
		answers: []answer{{status: 200, desc: "the session as it now is", schema: typ[api.Session]()}},
		errors:  []contract.ErrorCode{contract.CodeInvalidState}},
	{pattern: "POST /v1/sessions/{id}/events", id: "appendEvents", summary: "Append one event, a JSON array of events, or NDJSON, all or nothing",
		params: []param{{name: "expectedSequence", in: "query", desc: "append only if the log's last sequence is this (-1: empty log)", schema: intParam(-1, contract.MaxSafeInteger)},
			{name: "multitask", in: "query", desc: "what a run the batch queues does while another run is active: reject, enqueue (queued behind it) or interrupt (stop it, then queue); default: the session's (PATCH multitask), else reject", schema: obj{"type": "string", "enum": anyList(contract.MultitaskStrategies)}},
			{name: "Sessiond-Lease", in: "header", desc: "<leaseId>:<token> of the lease held on the events' run (docs/runtime.md, Workers and leases)", schema: strParam}},
		body: &body{media: []string{"application/json", "application/x-ndjson", "application/ndjson"}, schema: []any{
			func(s *schemas) obj {
				return obj{"oneOf": []any{s.contractEvent(), obj{"type": "array", "items": s.contractEvent()}}}
			},
			nil, // NDJSON: one AgentSessionEvent per line
			nil,
		}, desc: "application/x-ndjson and application/ndjson: one AgentSessionEvent per line"},
		answers: []answer{
			{status: 201, desc: "at least one event was added", schema: typ[api.AppendResponse]()},
			{status: 200, desc: "every event was a duplicate of one already stored", schema: typ[api.AppendResponse]()},
		},
		errors: []contract.ErrorCode{contract.CodeSequenceConflict, contract.CodeIdempotencyConflict, contract.CodeEventIDConflict,
			contract.CodeSessionMismatch, contract.CodeInvalidTransition, contract.CodeInvalidState, contract.CodeLeaseLost, contract.CodeLeaseRequired}},
	{pattern: "GET /v1/sessions/{id}/events", id: "readEvents", summary: "Read the log in order",
		params: []param{
			{name: "after", in: "query", desc: "only events with a greater sequence (default -1)", schema: intParam(-1, contract.MaxSafeInteger)},
			{name: "limit", in: "query", desc: "at most this many events (default 1000)", schema: intParam(1, 10000)},
		},
		answers: []answer{{status: 200, desc: "events in sequence order", schema: typ[api.EventPage]()}}},
	{pattern: "GET /v1/sessions/{id}/events/stream", id: "streamEvents", summary: "Server-sent events: the log from a cursor, then live",
		params: []param{
			{name: "after", in: "query", desc: "start after this sequence (default -1: the whole log)", schema: intParam(-1, contract.MaxSafeInteger)},
			{name: "tail", in: "query", desc: "true: only events appended from now on", schema: obj{"type": "string", "enum": []any{"true", "false", "1", "0"}}},
			{name: "token", in: "query", desc: "a stream token of this session (POST /v1/sessions/{id}/stream-token), for an EventSource, which cannot send an Authorization header; no other credential is taken in the URL", schema: strParam},
			{name: "Last-Event-ID", in: "header", desc: "resume after this sequence (EventSource sends it on reconnect); wins over after and tail", schema: obj{"type": "string", "pattern": `^-?[0-9]+$`}},
		},
		answers: []answer{{status: 200, media: "text/event-stream", schema: obj{"type": "string"}, desc: sseDescription, headers: sseHeaders,
			// Each block's data: an event, or the final stream.error's error envelope.
			line: obj{"oneOf": []any{ref("AgentSessionEvent"), obj{"type": "object", "additionalProperties": false, "required": []any{"code", "message"},
				"properties": obj{"code": streamErrorCode, "message": obj{"type": "string"}}}}}}}},
	{pattern: "GET /v1/sessions/{id}/events/export", id: "exportEvents", summary: "The log from a cursor to its end, streamed as NDJSON: one stored event per line",
		params: []param{
			{name: "after", in: "query", desc: "start after this sequence (default -1: the whole log)", schema: intParam(-1, contract.MaxSafeInteger)},
			{name: "Last-Event-ID", in: "header", desc: "start after this sequence, as the event stream's; wins over after", schema: obj{"type": "string", "pattern": `^-?[0-9]+$`}},
		},
		answers: []answer{{status: 200, media: "application/x-ndjson", schema: obj{"type": "string"},
			desc:    "every event after the starting point up to the log's last sequence when the read began (Sessiond-Last-Sequence), in sequence order, each line the AgentSessionEvent exactly as stored (the bytes the paged read and the stream carry). A body cut short (the connection dropped, the store failed part way) ends without the chunked encoding's final chunk; resume with after = the last sequence received",
			line:    ref("AgentSessionEvent"),
			headers: obj{"Cache-Control": cacheControl("no-store"), api.LastSequenceHeader: obj{"description": "the log's last sequence when the read began (-1: empty): the sequence of the body's last line, unless the starting point is past it", "required": true, "schema": obj{"type": "string", "pattern": `^-?[0-9]+$`}}}}}},
	{pattern: "GET /v1/events/stream", id: "streamChanges", summary: "Server-sent events: session-level changes across sessions (the change feed), from a cursor, then live",
		params: []param{
			{name: "project", in: "query", desc: "only changes of sessions of this project", schema: strParam},
			{name: "agent", in: "query", desc: "only changes of sessions of this agent_id", schema: strParam},
			{name: "after", in: "query", desc: "start after this change number (0: from the first; default: only changes from now on)", schema: intParam(0, contract.MaxSafeInteger)},
			{name: "Last-Event-ID", in: "header", desc: "resume after this change number (EventSource sends it on reconnect); wins over after", schema: obj{"type": "string", "pattern": `^[0-9]+$`}},
		},
		answers: []answer{{status: 200, media: "text/event-stream", schema: obj{"type": "string"}, headers: sseHeaders,
			desc: "blocks named change.<kind> with the change number as id (docs/api.md, The change feed), and a final stream.error block",
			line: func(s *schemas) obj {
				return obj{"oneOf": []any{s.inline(typ[store.Change]()), obj{"type": "object", "additionalProperties": false, "required": []any{"code", "message"},
					"properties": obj{"code": streamErrorCode, "message": obj{"type": "string"}}}}}
			}}}},
	{pattern: "GET /v1/search", id: "search", summary: "Full-text search over the events of every session of the caller's project (docs/search.md)",
		params: []param{
			{name: "q", in: "query", desc: `words (all must match), "quoted phrases", word* prefixes; a word with punctuation is the phrase of its words`, schema: obj{"type": "string", "maxLength": search.MaxQueryBytes}},
			{name: "contains", in: "query", desc: "a substring of a path or a tool input (a command), case-insensitive", schema: obj{"type": "string", "minLength": search.MinContains, "maxLength": search.MaxContains}},
			{name: "project", in: "query", desc: "only sessions of this project (a key of one project: its own, the default)", schema: strParam},
			{name: "agent", in: "query", desc: "only sessions of this agent_id", schema: strParam},
			{name: "role", in: "query", desc: "only sessions with this role", schema: strParam},
			{name: "status", in: "query", desc: "only sessions with this status now", schema: obj{"type": "string", "enum": anyList(contract.SessionStatuses)}},
			{name: "kind", in: "query", desc: "only events of this eventType", schema: obj{"type": "string", "enum": anyList(contract.EventTypes)}},
			{name: "runStatus", in: "query", desc: "only events of runs with this status now", schema: obj{"type": "string", "enum": anyList(contract.RunStatuses)}},
			{name: "tool", in: "query", desc: "only tool events of this tool name", schema: strParam},
			{name: "code", in: "query", desc: "only error events and steering errors with this error code", schema: strParam},
			{name: "from", in: "query", desc: "only events that occurred at or after this time (RFC 3339)", schema: obj{"type": "string", "format": "date-time"}},
			{name: "to", in: "query", desc: "only events that occurred before this time (RFC 3339)", schema: obj{"type": "string", "format": "date-time"}},
			{name: "order", in: "query", desc: "recent (default, newest first) or relevance (best first among the newest 1,000 matches)", schema: obj{"type": "string", "enum": anyList(search.Orders)}},
			{name: "limit", in: "query", desc: "at most this many results (default 20)", schema: intParam(1, search.MaxLimit)},
			{name: "cursor", in: "query", desc: "the next value of the previous page, with the same query", schema: strParam},
		},
		answers: []answer{{status: 200, desc: "one page of results", schema: typ[api.SearchResponse]()}},
		errors:  []contract.ErrorCode{contract.CodeNotConfigured}},
	{pattern: "GET /v1/sessions/{id}/runs", id: "listRuns", summary: "The session's runs (the projection of its status events)",
		answers: []answer{{status: 200, desc: "every run, oldest first", schema: typ[api.RunList]()}}},
	{pattern: "GET /v1/sessions/{id}/runs/{runId}", id: "getRun", summary: "One run",
		answers: []answer{{status: 200, desc: "the run, its attempt, fencing token and lease", schema: typ[api.RunResource]()}},
		errors:  []contract.ErrorCode{contract.CodeRunNotFound}},
	{pattern: "POST /v1/sessions/{id}/commands", id: "executeCommand", summary: "Execute an AgentSessionCommand; answers its AgentSessionCommandResult",
		params: []param{{name: "wait", in: "query", desc: "stop only: wait up to this duration (Go syntax, 0s to 5m0s) for the run to stop", schema: obj{"type": "string", "pattern": `^[0-9.]+(ns|us|µs|ms|s|m|h)([0-9.]+(ns|us|µs|ms|s|m|h))*$`}}},
		body:   &body{media: []string{"application/json"}, schema: []any{func(s *schemas) obj { return s.contractCommand() }}},
		answers: []answer{
			{status: 200, desc: "accepted, or a duplicate of a command already executed", schema: typ[contract.CommandResult]()},
		},
		errors: []contract.ErrorCode{contract.CodeSessionMismatch},
		resultErrors: []contract.ErrorCode{contract.CodeActiveRunNotFound, contract.CodeRunAlreadyFinished, contract.CodeStopTimeout,
			contract.CodeCommandNotSupported, contract.CodeCapabilityUnavailable, contract.CodeTargetEventNotFound,
			contract.CodeTargetEventNotRetryable, contract.CodeApprovalNotFound, contract.CodeApprovalAlreadyResolved,
			contract.CodeSourceThreadNotFound, contract.CodeSourceMessageNotFound, contract.CodeSourceRunNotFound,
			contract.CodeSourceLineageInvalid, contract.CodeActiveBranchNotFound, contract.CodeCommandExecutionFailed}},
	{pattern: "GET /v1/sessions/{id}/view", id: "getView", summary: "The view model: snapshot, status, runs and events",
		answers: []answer{{status: 200, desc: "the view model", schema: typ[contract.ViewModel]()}}},
	{pattern: "GET /v1/sessions/{id}/transcript", id: "getTranscript", summary: "The log folded into messages, tools, tasks and the rest",
		answers: []answer{{status: 200, desc: "the transcript", schema: typ[wire.Transcript]()}}},
	{pattern: "POST /v1/sessions/{id}/continuations", id: "continueSession", summary: "Start a new thread from a message of the session",
		body: &body{media: []string{"application/json"}, schema: []any{typ[contract.ContinuationRequest]()}},
		answers: []answer{
			{status: 201, desc: "a new thread", schema: typ[contract.ContinuationResult]()},
			{status: 200, desc: "a repeat of the same request (duplicate true)", schema: typ[contract.ContinuationResult]()},
		},
		errors: []contract.ErrorCode{contract.CodeSourceThreadNotFound, contract.CodeSourceMessageNotFound, contract.CodeSourceRunNotFound,
			contract.CodeSourceLineageInvalid, contract.CodeIdempotencyConflict, contract.CodeInvalidState, contract.CodeSessionExists}},
	{pattern: "GET /v1/sessions/{id}/lineage", id: "getLineage", summary: "Where the session was forked from, and its forks",
		answers: []answer{{status: 200, desc: "the lineage tree", schema: typ[wire.Lineage]()}}},
	{pattern: "POST /v1/sessions/{id}/chat", id: "chat", summary: "The Vercel AI SDK's chat (useChat's DefaultChatTransport): a new user message queues a run, approvals answered in the client are approval commands; answers the run's UI message stream (docs/bridges.md)",
		body: &body{media: []string{"application/json"}, schema: []any{chatRequestSchema}},
		answers: []answer{{status: 200, media: "text/event-stream", schema: obj{"type": "string"}, headers: aiSDKStreamHeaders,
			desc: `the AI SDK UI message stream (protocol v1, header x-vercel-ai-ui-message-stream: v1): "data: <chunk>" blocks, from "start" to "finish", then "data: [DONE]"`}},
		errors: bridgeErrors},
	{pattern: "GET /v1/sessions/{id}/chat", id: "chatHistory", summary: "The chat's UIMessages, folded from the log (docs/bridges.md)",
		answers: []answer{{status: 200, desc: "the messages, oldest first: the user's as sent, one assistant message per run", schema: messagesSchema("a UIMessage: id, role, parts")}}},
	{pattern: "GET /v1/sessions/{id}/chat/{chatId}/stream", id: "chatResume", summary: "Resume the chat's stream (the AI SDK's reconnectToStream): the active run replayed from its start, then live",
		answers: []answer{
			{status: 200, media: "text/event-stream", schema: obj{"type": "string"}, headers: aiSDKStreamHeaders, desc: "the active run's UI message stream, replayed from its start, then live"},
			{status: 204, desc: "no run is active"},
		},
		errors: []contract.ErrorCode{contract.CodeNotFound}},
	{pattern: "POST /v1/sessions/{id}/chat/stop", id: "chatStop", summary: "Stop the session's active run (the stop command); answers its AgentSessionCommandResult",
		answers:      []answer{{status: 200, desc: "the stop was accepted, or a duplicate", schema: typ[contract.CommandResult]()}},
		errors:       []contract.ErrorCode{contract.CodeActiveRunNotFound},
		resultErrors: []contract.ErrorCode{contract.CodeActiveRunNotFound, contract.CodeRunAlreadyFinished, contract.CodeCommandExecutionFailed}},
	{pattern: "POST /v1/sessions/{id}/agui", id: "agui", summary: "AG-UI (HttpAgent): a RunAgentInput; its new user message queues a run, resume[] answers approvals; answers the run as AG-UI events (docs/bridges.md)",
		body: &body{media: []string{"application/json"}, schema: []any{runAgentInputSchema}},
		answers: []answer{{status: 200, media: "text/event-stream", schema: obj{"type": "string"}, headers: sseHeaders,
			desc: `AG-UI events as "data: <event>" blocks: RUN_STARTED, MESSAGES_SNAPSHOT, the run's events, then RUN_FINISHED or RUN_ERROR`}},
		errors: bridgeErrors},
	{pattern: "GET /v1/sessions/{id}/agui/messages", id: "aguiMessages", summary: "The session's AG-UI messages, folded from the log (docs/bridges.md)",
		answers: []answer{{status: 200, desc: "the messages, as MESSAGES_SNAPSHOT carries them", schema: messagesSchema("an AG-UI message: id, role, content, toolCalls, toolCallId")}}},
	{pattern: "POST /v1/sessions/{id}/heartbeat", id: "heartbeat", summary: "Record that the session's agent is alive",
		answers: []answer{{status: 200, desc: "the session", schema: typ[api.Session]()}},
		errors:  []contract.ErrorCode{contract.CodeInvalidState}},
	{pattern: "POST /v1/sessions/{id}/assess", id: "assess", summary: "Estimate a task's duration from comparable past sessions",
		body:    &body{media: []string{"application/json"}, schema: []any{typ[wire.AssessRequest]()}, optional: true},
		answers: []answer{{status: 200, desc: "the assessment", schema: typ[wire.Assessment]()}}},
	{pattern: "POST /v1/sessions/{id}/warm", id: "warm", summary: "Open the session's work window",
		body:    &body{media: []string{"application/json"}, schema: []any{typ[api.WarmRequest]()}, optional: true},
		answers: []answer{{status: 200, desc: "the window", schema: typ[wire.Window]()}},
		errors:  []contract.ErrorCode{contract.CodeInvalidState}},
	{pattern: "POST /v1/sessions/{id}/archive", id: "archiveSession", summary: "Write the session to an archive file, optionally compacting its log",
		params:  []param{acceptProgress},
		body:    &body{media: []string{"application/json"}, schema: []any{typ[api.ArchiveRequest]()}, optional: true},
		answers: []answer{{status: 200, desc: "the archive written and the session as it now is", schema: typ[api.ArchiveResponse](), progress: true}},
		errors:  []contract.ErrorCode{contract.CodeInvalidState, contract.CodeSessionMoved, contract.CodeNotConfigured, contract.CodeArchiveInvalid}},
	{pattern: "GET /v1/sessions/{id}/status", id: "getStatus", summary: "Liveness, age, archive recency and a recommendation",
		answers: []answer{{status: 200, desc: "the status report", schema: typ[wire.StatusReport]()}}},
	{pattern: "GET /v1/archives", id: "listArchives", summary: "The archive directory's archives, newest first",
		params:  []param{{name: "project", in: "query", desc: `only this project's archives ("-" for sessions without one)`, schema: strParam}},
		answers: []answer{{status: 200, desc: "the archives", schema: typ[api.ArchiveList]()}},
		errors:  []contract.ErrorCode{contract.CodeNotConfigured}},
	{pattern: "POST /v1/archives", id: "saveArchive", summary: "Store an archive file copied from another host, after verifying it",
		body:    &body{media: []string{"application/json"}, schema: []any{obj{"type": "object", "description": "an archive file, as archive writes it"}}},
		answers: []answer{{status: 201, desc: "stored", schema: typ[wire.ArchiveInfo]()}},
		errors:  []contract.ErrorCode{contract.CodeNotConfigured, contract.CodeArchiveInvalid}},
	{pattern: "POST /v1/archives/restore", id: "restoreArchive", summary: "Bring a session back from an archive",
		params:  []param{acceptProgress},
		body:    &body{media: []string{"application/json"}, schema: []any{typ[api.RestoreRequest]()}, optional: true},
		answers: []answer{{status: 200, desc: "restored", schema: typ[api.RestoreResponse](), progress: true}},
		errors:  []contract.ErrorCode{contract.CodeNotConfigured, contract.CodeArchiveInvalid, contract.CodeArchiveNotFound, contract.CodeRestoreConflict}},
	{pattern: "POST /v1/runs/claim", id: "claimRun", summary: "Claim the oldest queued run that matches, with a lease (long-polls up to wait)",
		body: &body{media: []string{"application/json"}, schema: []any{typ[wire.ClaimRequest]()}, optional: true},
		answers: []answer{
			{status: 200, desc: "a run, its lease and its attempt", schema: typ[wire.Claim]()},
			{status: 204, desc: "no run matched within wait"},
		}},
	{pattern: "POST /v1/sessions/{id}/runs/{runId}/lease", id: "renewLease", summary: "Renew the lease held on a run",
		body:    &body{media: []string{"application/json"}, schema: []any{typ[wire.LeaseRequest]()}},
		answers: []answer{{status: 200, desc: "the renewed lease", schema: typ[wire.Lease]()}},
		errors:  []contract.ErrorCode{contract.CodeRunNotFound, contract.CodeLeaseLost}},
	{pattern: "POST /v1/sessions/{id}/runs/{runId}/lease/release", id: "releaseLease", summary: "Give up the lease held on a run",
		body:    &body{media: []string{"application/json"}, schema: []any{typ[wire.LeaseRequest]()}},
		answers: []answer{{status: 204, desc: "released"}},
		errors:  []contract.ErrorCode{contract.CodeRunNotFound, contract.CodeLeaseLost}},
	{pattern: "POST /v1/sessions/{id}/stream-token", id: "createStreamToken", summary: "A short-lived read-only token for this session's event stream, for a browser's EventSource (docs/security.md)",
		answers: []answer{{status: 201, desc: "the token, its expiry and the stream URL that carries it", schema: typ[wire.StreamToken]()}}},
	{pattern: "POST /v1/login", id: "login", summary: "Set the web UI's login cookie from the key in the Authorization header (docs/security.md)",
		answers: []answer{{status: 200, desc: "who the cookie acts as (no cookie on a server without authentication)", schema: typ[wire.Whoami](),
			headers: obj{"Set-Cookie": obj{"description": "sessiond_login=<token>; Path=/; HttpOnly; SameSite=Strict (Secure over TLS or with --cookie-secure); absent on a server without authentication", "schema": strParam}}}}},
	{pattern: "POST /v1/logout", id: "logout", summary: "Clear the web UI's login cookie", public: true,
		answers: []answer{{status: 204, desc: "cleared", headers: obj{"Set-Cookie": obj{"description": "sessiond_login=; Max-Age=0: the browser drops the cookie", "required": true, "schema": strParam}}}}},
	{pattern: "GET /v1/whoami", id: "whoami", summary: "Who the request's credential acts as",
		answers: []answer{{status: 200, desc: "the subject, project and scopes", schema: typ[wire.Whoami]()}}},
	{pattern: "GET /v1/keys", id: "listKeys", summary: "List the API keys (of the caller's project, or all for a key of every project)",
		answers: []answer{{status: 200, desc: "the keys, oldest first, without their secrets", schema: typ[wire.KeyList]()}}},
	{pattern: "POST /v1/keys", id: "createKey", summary: "Make an API key; its secret is in this answer only",
		body:    &body{media: []string{"application/json"}, schema: []any{typ[wire.CreateKeyRequest]()}},
		answers: []answer{{status: 201, desc: "the key and its secret", schema: typ[wire.CreatedKey](), headers: obj{"Location": locationHeader("the key's URL: /v1/keys/{keyId}")}}}},
	{pattern: "GET /v1/keys/{keyId}", id: "getKey", summary: "One API key, without its secret",
		answers: []answer{{status: 200, desc: "the key", schema: typ[wire.Key]()}},
		errors:  []contract.ErrorCode{contract.CodeKeyNotFound}},
	{pattern: "POST /v1/keys/{keyId}/revoke", id: "revokeKey", summary: "Revoke an API key: it and the keys derived from it stop working",
		answers: []answer{{status: 200, desc: "the revoked key", schema: typ[wire.Key]()}},
		errors:  []contract.ErrorCode{contract.CodeKeyNotFound}},
	{pattern: "POST /v1/sweep", id: "sweep", summary: "Mark silent sessions stale now (the background sweeper does it every --sweep-interval)",
		answers: []answer{{status: 200, desc: "what the sweep did", schema: typ[wire.SweepResult]()}}},
}

// requestIDParam and requestIDHeader: every request may carry an id, and every answer carries
// the request's id (the client's when fit, else a new one); the server's log lines of the
// request carry it too.
var (
	requestIDParam = param{name: "X-Request-Id", in: "header", desc: "the request's id for the server's logs (1 to 128 of A-Z a-z 0-9 . _ : -); another value is replaced by a new id",
		schema: obj{"type": "string"}}
	requestIDHeader = obj{"X-Request-Id": obj{"description": "the request's id: the client's X-Request-Id when fit, else a new one", "required": true,
		"schema": obj{"type": "string", "minLength": 1, "maxLength": 128, "pattern": `^[A-Za-z0-9._:-]+$`}}}
)

// Headers answers carry, declared where they are sent.
var (
	etagHeader = obj{"description": "the answer's entity tag: send it back in If-None-Match to get 304 while it is unchanged", "required": true,
		"schema": obj{"type": "string"}}
	sseHeaders = obj{
		"Cache-Control":     cacheControl("no-store"),
		"X-Accel-Buffering": obj{"description": "no: a reverse proxy (nginx) must pass the stream through unbuffered", "required": true, "schema": obj{"const": "no"}},
	}
	aiSDKStreamHeaders = obj{
		"Cache-Control":                 cacheControl("no-store"),
		"X-Accel-Buffering":             sseHeaders["X-Accel-Buffering"],
		"x-vercel-ai-ui-message-stream": obj{"description": "the AI SDK's UI message stream protocol version", "required": true, "schema": obj{"const": "v1"}},
	}
	// assetHeaders are the web UI's files': revalidated on every load, never sniffed, under the
	// page's Content-Security-Policy.
	assetHeaders = obj{
		"ETag":                    etagHeader,
		"Cache-Control":           cacheControl("no-cache"),
		"Referrer-Policy":         obj{"description": "no-referrer: the page leaks no URL to other origins", "required": true, "schema": obj{"const": "no-referrer"}},
		"Content-Security-Policy": obj{"description": "scripts and styles from this server only (the import map by its hash), images from it or data: URLs, connections to it only", "required": true, "schema": obj{"type": "string"}},
	}
)

func cacheControl(v string) obj {
	return obj{"description": v, "required": true, "schema": obj{"const": v}}
}

func locationHeader(desc string) obj {
	return obj{"description": desc, "required": true, "schema": obj{"type": "string"}}
}

// withRequestID returns the headers of an answer: X-Request-Id and extra.
func withRequestID(extra obj) obj {
	out := obj{}
	maps.Copy(out, requestIDHeader)
	maps.Copy(out, extra)
	return out
}

// errorHeaders are the headers of the error answers with status st and these codes.
func errorHeaders(st int, codes []string) obj {
	h := obj{}
	for _, c := range codes {
		if contract.RetryFor(contract.ErrorCode(c)).AfterSeconds > 0 || c == string(contract.CodeRateLimited) {
			h["Retry-After"] = obj{"description": "seconds to wait before retrying (" + strings.Join(retryable(codes), ", ") + ")", "schema": obj{"type": "string", "pattern": "^[0-9]+$"}}
		}
	}
	switch st {
	case 401:
		h["WWW-Authenticate"] = obj{"description": `the challenge of RFC 6750: Bearer realm="sessiond", with error="invalid_request" (a malformed credential) or error="invalid_token" (one refused)`, "schema": strParam}
	case 405:
		h["Allow"] = obj{"description": "the methods the path takes, comma-separated", "required": true, "schema": strParam}
	}
	return withRequestID(h)
}

func retryable(codes []string) []string {
	var out []string
	for _, c := range codes {
		if contract.RetryFor(contract.ErrorCode(c)).AfterSeconds > 0 || c == string(contract.CodeRateLimited) {
			out = append(out, c)
		}
	}
	return out
}

var acceptProgress = param{name: "Accept", in: "header", desc: "list application/x-ndjson to have the answer streamed as progress lines once the operation runs for the progress interval", schema: strParam}

const sseDescription = `A text/event-stream (server-sent events). The first block is "retry: 1000" and "id: <the starting cursor>"
without data. Each stored event is then one block:
"id: <sequence>", "event: ev.<eventType>" (ev.message, ev.status, ...), "data: <the AgentSessionEvent as stored, one line>".
Comment lines (": keep-alive") are sent every keep-alive interval. Just before the server ends a stream it sends one
"event: stream.error" block whose data is {"code":…,"message":…} with code SUBSCRIBER_TOO_SLOW, SHUTTING_DOWN,
STREAM_FAILED or CREDENTIAL_REVOKED (the key that opened the stream, or the key its login or stream token comes from,
was revoked or expired; reconnect with a valid credential) and a message naming the Last-Event-ID to resume with. Reconnect with Last-Event-ID to resume
without gap or repeat.`

const progressDescription = `With Accept: application/x-ndjson, once the operation has run for the progress interval the
answer is a stream of lines: {"progress":{"phase":…,"done":N,"total":M}} (ProgressLine), then one final line that is exactly
the ordinary answer body (the result, or an ErrorBody).`

func tagList() []any {
	out := make([]any, len(tags))
	for i, t := range tags {
		out[i] = obj{"name": t.name, "description": t.desc}
	}
	return out
}

func anyList(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// Operations returns the pattern ("METHOD /path") of every operation of the document, in
// order, for the tests that hold it to the server's route table.
func Operations() []string {
	out := make([]string, len(operations))
	for i, op := range operations {
		out[i] = op.pattern
	}
	return out
}

// Generate returns the document.
func Generate() ([]byte, error) {
	s := newSchemas()
	paths := obj{}
	for _, op := range operations {
		method, path, ok := strings.Cut(op.pattern, " ")
		if !ok {
			return nil, fmt.Errorf("operation %s: pattern is not METHOD /path", op.id)
		}
		path = DocPath(path)
		item, _ := paths[path].(obj)
		if item == nil {
			item = obj{}
			paths[path] = item
		}
		item[strings.ToLower(method)] = s.operation(op, path)
	}
	s.errorComponents()
	if s.err != nil {
		return nil, s.err
	}
	doc := obj{
		"openapi": "3.1.0",
		"info": obj{
			"title":       "sessiond HTTP API",
			"version":     "1",
			"description": "The v1 HTTP API of sessiond: sessions, their append-only event logs, live streams, runs, commands, forks and lifecycle. docs/api.md explains it; the contract's rules are in docs/reference.md. Generated by " + RegenerateCommand + "; do not edit by hand.",
			"license":     obj{"name": "See LICENSE in the repository", "identifier": "Apache-2.0"},
			"contact":     obj{"name": "the sessiond maintainers", "url": "https://github.com/sessiond/sessiond/issues"},
		},
		// Authentication is optional: a loopback server without --auth takes none (the empty
		// requirement); with --auth, an API key or OIDC token as a bearer token, or the web
		// UI's login cookie (docs/security.md). Public operations say security: [].
		"security": []any{obj{}, obj{"bearer": []any{}}, obj{"loginCookie": []any{}}},
		"servers":  []any{obj{"url": "http://127.0.0.1:7420", "description": "sessiond serve's default address"}},
		"tags":     tagList(),
		"paths":    paths,
		"components": obj{"schemas": s.defs, "securitySchemes": obj{
			"bearer":      obj{"type": "http", "scheme": "bearer", "description": "an API key (sk_<id>_<secret>, sessiond keys create) or, with --oidc-issuer, a JWT of the identity provider; a stream token (POST /v1/sessions/{id}/stream-token) also works in the stream's ?token="},
			"loginCookie": obj{"type": "apiKey", "in": "cookie", "name": "sessiond_login", "description": "the web UI's login cookie (POST /v1/login)"},
		}},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (s *schemas) schemaOf(v any) obj {
	switch x := v.(type) {
	case reflect.Type:
		return s.ofType(x)
	case obj:
		return x
	case func(*schemas) obj:
		return x(s)
	}
	s.fail(fmt.Errorf("schema %T is not a type, an object or a function", v))
	return obj{}
}

func (s *schemas) operation(op operation, path string) obj {
	d, ok := described[op.id]
	if !ok || d.desc == "" || !slices.ContainsFunc(tags, func(t struct{ name, desc string }) bool { return t.name == d.tag }) {
		s.fail(fmt.Errorf("operation %s has no description or no known tag: add it to described (internal/openapigen/described.go)", op.id))
	}
	out := obj{"operationId": op.id, "summary": op.summary, "description": d.desc, "tags": []any{d.tag}}
	if op.public {
		out["security"] = []any{}
	}
	var params []any
	for _, w := range wildcards(path) {
		switch w {
		case "file":
			params = append(params, obj{"name": w, "in": "path", "required": true, "description": "a file of the web UI, its path below /ui/ (it may hold /)",
				"schema": obj{"type": "string", "minLength": 1}})
			continue
		case "keyId":
			params = append(params, obj{"name": w, "in": "path", "required": true, "description": "an API key's public id (16 hex digits)",
				"schema": obj{"type": "string", "minLength": 1, "maxLength": 256}})
			continue
		case "runId":
			params = append(params, obj{"name": w, "in": "path", "required": true, "description": "a run id (1 to 256 characters)",
				"schema": obj{"type": "string", "minLength": 1, "maxLength": 256}})
		default:
			params = append(params, obj{"name": w, "in": "path", "required": true, "description": "a session id (1 to 256 characters)",
				"schema": obj{"type": "string", "minLength": 1, "maxLength": 256}})
		}
	}
	for _, p := range append(op.params, requestIDParam) {
		params = append(params, obj{"name": p.name, "in": p.in, "description": p.desc, "schema": p.schema})
	}
	if len(params) > 0 {
		out["parameters"] = params
	}
	if op.body != nil {
		content := obj{}
		for i, mt := range op.body.media {
			if op.body.schema[i] == nil {
				// No JSON Schema describes a stream of lines; the description does.
				content[mt] = obj{}
				continue
			}
			content[mt] = obj{"schema": s.schemaOf(op.body.schema[i])}
		}
		desc := "the request body; without a Content-Type it is taken as " + op.body.media[0]
		if op.body.optional {
			desc = "may be empty; without a Content-Type it is taken as " + op.body.media[0]
		}
		if op.body.desc != "" {
			desc += "; " + op.body.desc
		}
		out["requestBody"] = obj{"required": !op.body.optional, "description": desc, "content": content}
	}
	responses := obj{}
	for _, a := range op.answers {
		mt := a.media
		if mt == "" {
			mt = "application/json"
		}
		if a.schema == nil {
			// No body: 204 and 304.
			responses[strconv.Itoa(a.status)] = obj{"description": a.desc, "headers": withRequestID(a.headers)}
			continue
		}
		content := obj{mt: obj{"schema": s.schemaOf(a.schema)}}
		for _, other := range a.negotiated {
			content[other] = obj{"schema": s.schemaOf(a.schema)}
		}
		for other, sch := range a.negotiatedSchemas {
			content[other] = obj{"schema": s.schemaOf(sch)}
		}
		if a.line != nil {
			content[mt].(obj)["x-sessiond-line"] = s.schemaOf(a.line)
		}
		desc := a.desc
		if a.progress {
			// No JSON Schema describes a stream of lines; x-sessiond-line names each line's.
			content[api.ProgressMediaType] = obj{"x-sessiond-line": obj{"oneOf": []any{s.inline(typ[api.ProgressLine]()), s.schemaOf(a.schema), ref("ErrorBody")}}}
			desc += ". " + progressDescription
			h := obj{"Cache-Control": obj{"description": "no-store, on a progress stream", "schema": obj{"const": "no-store"}}}
			maps.Copy(h, a.headers)
			a.headers = h
		}
		responses[strconv.Itoa(a.status)] = obj{"description": desc, "content": content, "headers": withRequestID(a.headers)}
	}
	// Error responses, grouped by status; each lists its codes.
	// METHOD_NOT_ALLOWED: the operation's path with another method (the Allow header lists
	// the methods it takes).
	codes := []contract.ErrorCode{contract.CodeMalformed, contract.CodeInternal, contract.CodeUnavailable, contract.CodeHeadersTooLarge, contract.CodeMethodNotAllowed}
	if op.body != nil {
		codes = append(codes, contract.CodeTooLarge, contract.CodeUnsupportedMedia, contract.CodeContractViolation, contract.CodeOverloaded, contract.CodeRequestTimeout)
	}
	if slices.Contains(wildcards(path), "id") {
		codes = append(codes, contract.CodeSessionNotFound)
	}
	if !op.public {
		// Every route behind authentication reads or writes the store (the key's check
		// included), so each may find it full or unreachable, or lose a commit's answer.
		codes = append(codes, contract.CodeUnauthenticated, contract.CodeForbidden, contract.CodeRateLimited,
			contract.CodeStoreFull, contract.CodeStoreUnavailable, contract.CodeCommitUnknown)
	}
	codes = append(codes, op.errors...)
	// An answer's own status wins over a common error (health answers 503 itself).
	codes = slices.DeleteFunc(codes, func(c contract.ErrorCode) bool {
		_, taken := responses[strconv.Itoa(api.HTTPStatus(c))]
		return taken && !slices.Contains(op.errors, c)
	})
	byStatus := map[int][]string{}
	resultStatus := map[int]bool{}
	for _, c := range codes {
		byStatus[api.HTTPStatus(c)] = append(byStatus[api.HTTPStatus(c)], string(c))
	}
	for _, c := range op.resultErrors {
		st := api.HTTPStatus(c)
		byStatus[st] = append(byStatus[st], string(c))
		resultStatus[st] = true
	}
	statuses := make([]int, 0, len(byStatus))
	for st := range byStatus {
		statuses = append(statuses, st)
	}
	slices.Sort(statuses)
	for _, st := range statuses {
		cs := slices.Compact(slices.Sorted(slices.Values(byStatus[st])))
		sch := ref("ErrorBody")
		desc := "error: " + strings.Join(cs, ", ")
		if resultStatus[st] {
			sch = obj{"oneOf": []any{ref("ErrorBody"), s.ofType(typ[contract.CommandResult]())}}
			desc += " (a rejected or failed command answers its AgentSessionCommandResult with the status of its error code)"
		}
		if _, taken := responses[strconv.Itoa(st)]; taken {
			s.fail(fmt.Errorf("operation %s: status %d is both an answer and an error", op.id, st))
		}
		responses[strconv.Itoa(st)] = obj{"description": desc + "; see docs/api.md for what each code means",
			"content": obj{"application/json": obj{"schema": sch}}, "headers": errorHeaders(st, cs)}
	}
	out["responses"] = responses
	return out
}

// errorComponents adds the error envelope and the list of codes, with their meanings.
func (s *schemas) errorComponents() {
	var codes []any
	var meanings []string
	for _, c := range api.Codes() {
		codes = append(codes, string(c))
		meanings = append(meanings, fmt.Sprintf("%s (%d): %s", c, api.HTTPStatus(c), api.CodeMeaning(c)))
	}
	s.defs["ErrorCode"] = obj{"type": "string", "enum": codes, "description": strings.Join(meanings, "\n")}
	s.structRef(typ[api.ErrorBody]())
}

// streamErrorCode is the code of a stream's final block (never an HTTP status).
var streamErrorCode = obj{"type": "string", "enum": func() []any {
	var out []any
	for _, c := range contract.StreamErrorCodes {
		out = append(out, string(c))
	}
	return out
}()}

// inline returns the schema of an API struct written out in place rather than as a component:
// for shapes only an x-sessiond-line names, which no linter counts as a use of a component.
func (s *schemas) inline(t reflect.Type) obj {
	before := map[string]bool{}
	for name := range s.defs {
		before[name] = true
	}
	r := s.structRef(t)
	added := map[string]obj{}
	for name, def := range s.defs {
		if !before[name] {
			added[name] = def.(obj)
			delete(s.defs, name)
		}
	}
	for t, name := range s.names {
		if added[name] != nil {
			delete(s.names, t) // generated again, and inlined again, at the next use
		}
	}
	var expand func(v any) any
	expand = func(v any) any {
		switch x := v.(type) {
		case obj:
			if target, ok := x["$ref"].(string); ok {
				if def, ok := added[strings.TrimPrefix(target, "#/components/schemas/")]; ok {
					return expand(def)
				}
			}
			out := obj{}
			for k, e := range x {
				out[k] = expand(e)
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = expand(e)
			}
			return out
		}
		return v
	}
	return expand(r).(obj)
}

// wildcards returns the {names} of a path.
// DocPath is the document's path of a route pattern's path: net/http's "{$}" (the exact
// path) is dropped and a remainder wildcard "{name...}" becomes "{name}".
func DocPath(path string) string {
	path = strings.TrimSuffix(path, "{$}")
	return strings.ReplaceAll(path, "...}", "}")
}

func wildcards(path string) []string {
	var out []string
	for _, seg := range strings.Split(path, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			out = append(out, strings.Trim(seg, "{}"))
		}
	}
	return out
}

// bridgeErrors are the codes the bridges' POSTs answer beyond the usual ones: the run they
// would queue while another is active, a message id reused, and the refusals of the approval
// command that answers an approval.
var bridgeErrors = []contract.ErrorCode{contract.CodeInvalidState, contract.CodeInvalidTransition, contract.CodeIdempotencyConflict,
	contract.CodeEventIDConflict, contract.CodeApprovalNotFound, contract.CodeApprovalAlreadyResolved, contract.CodeCapabilityUnavailable,
	contract.CodeActiveRunNotFound, contract.CodeRunNotFound, contract.CodeRunAlreadyFinished, contract.CodeCommandExecutionFailed}

// chatRequestSchema is the body useChat's DefaultChatTransport posts.
var chatRequestSchema = obj{"type": "object", "additionalProperties": false, "required": []any{"id", "messages", "trigger"},
	"properties": obj{
		"id":        obj{"type": "string", "description": "the chat's id: the session's id"},
		"trigger":   obj{"type": "string", "enum": []any{"submit-message", "regenerate-message"}},
		"messageId": obj{"type": "string"},
		"messages": obj{"type": "array", "items": obj{"type": "object", "required": []any{"id", "role", "parts"},
			"properties":  obj{"id": obj{"type": "string"}, "role": obj{"type": "string"}, "parts": obj{"type": "array", "items": obj{}}, "metadata": obj{}},
			"description": "UIMessages; the last is the new user message, or the assistant's with approval responses"}},
	}}

// runAgentInputSchema is AG-UI's RunAgentInput.
var runAgentInputSchema = obj{"type": "object", "additionalProperties": false, "required": []any{"threadId", "runId", "messages"},
	"properties": obj{
		"threadId":        obj{"type": "string", "description": "the session's id"},
		"runId":           obj{"type": "string"},
		"protocolVersion": obj{"type": "string"},
		"parentRunId":     obj{"type": "string"},
		"state":           obj{},
		"messages": obj{"type": "array", "items": obj{"type": "object", "required": []any{"id", "role"},
			"properties": obj{"id": obj{"type": "string"}, "role": obj{"type": "string"}}}},
		"tools":          obj{"type": "array", "items": obj{}},
		"context":        obj{"type": "array", "items": obj{}},
		"forwardedProps": obj{},
		"resume": obj{"type": "array", "items": obj{"type": "object", "required": []any{"interruptId", "status"},
			"properties": obj{"interruptId": obj{"type": "string"}, "status": obj{"type": "string", "enum": []any{"resolved", "cancelled"}},
				"payload": obj{}, "metadata": obj{}}}},
	}}

// messagesSchema is {"messages": [...]} with items of the kind described.
func messagesSchema(item string) obj {
	return obj{"type": "object", "additionalProperties": false, "required": []any{"messages"},
		"properties": obj{"messages": obj{"type": "array", "items": obj{"type": "object", "required": []any{"id", "role"}, "description": item,
			"properties": obj{"id": obj{"type": "string"}, "role": obj{"type": "string"}}}}}}
}
