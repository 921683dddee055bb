package contract

// The schemas of every contract object, in the small language of schema.go. The event schemas
// mirror testdata/agent-session-event.schema.json keyword for keyword (differential tests hold
// them to it); the others follow the contract's prose, which has no JSON Schema for them
// (docs/reference.md is generated from these tables).

func str() *schema                  { return &schema{typ: tString} }
func strMin(n int) *schema          { return &schema{typ: tString, minLen: n} }
func id() *schema                   { return &schema{typ: tString, minLen: 1, maxLen: 256} }
func timestamp() *schema            { return &schema{typ: tString, format: fTimestamp} }
func notBlank() *schema             { return &schema{typ: tString, format: fNotBlank} }
func enum(vals ...string) *schema   { return &schema{typ: tString, enum: vals} }
func constStr(s string) *schema     { return &schema{typ: tString, hasConst: true, constStr: s} }
func boolean() *schema              { return &schema{typ: tBool} }
func anyJSON() *schema              { return &schema{typ: tAny} }
func arrayOf(items *schema) *schema { return &schema{typ: tArray, items: items} }
func safeInt(min int64) *schema {
	return &schema{typ: tInteger, hasMin: true, min: min, hasMax: true, max: MaxSafeInteger}
}
func nonNegNumber() *schema { return &schema{typ: tNumber, hasMin: true} }

// freeObject is an object whose values are any JSON ("additionalProperties": __schema0).
func freeObject() *schema { return &schema{typ: tObject, open: anyJSON()} }

func req(name string, s *schema) prop { return prop{name: name, s: s, required: true} }
func opt(name string, s *schema) prop { return prop{name: name, s: s} }

// object is a closed object with the given fields.
func object(props ...prop) *schema { return &schema{typ: tObject, props: props} }

func nullable(s *schema) *schema { c := *s; c.nullable = true; return &c }

// Enumerations shared by several objects.
var (
	// RunStatuses are the statuses of a run, in the contract's order.
	RunStatuses = []string{RunStatusQueued, RunStatusRunning, RunStatusWaitingApproval, RunStatusStopping, RunStatusStopped, RunStatusCompleted, RunStatusFailed}
	// SessionRunStatuses are the values of a command result's sessionStatus and a view model's
	// status: the status of the session's current run, or StatusIdle before its first run
	// (the contract names no value for that case; sessiond documents "idle").
	SessionRunStatuses = append(append([]string(nil), RunStatuses...), StatusIdle)
	// CapabilityNames are the capability flags of a session snapshot.
	CapabilityNames = []string{
		"text", "reasoning", "plan", "tasks", "tools", "mcp", "shell", "fileChange", "skills",
		"approval", "artifacts", "usage", "resume", "diff", "workspaceFiles", "terminal",
		"testResults", "threadForking", "editAndRerun", "steering", "summary",
	}
)

// payloadSchemas maps each eventType to its payload schema.
var payloadSchemas = map[string]*schema{
	"message": object(
		req("messageId", id()),
		req("role", enum("user", "assistant", "system")),
		req("operation", enum("append", "replace")),
		req("parts", arrayOf(anyJSON())),
		opt("status", enum("streaming", "completed", "failed")),
	),
	"reasoning": object(
		req("reasoningId", id()),
		req("text", str()),
		req("status", enum("streaming", "completed")),
	),
	"plan": object(
		req("planId", id()),
		opt("title", str()),
		req("status", enum("pending", "running", "completed", "failed")),
		req("steps", arrayOf(object(
			req("id", id()),
			req("title", str()),
			req("status", enum("pending", "running", "completed", "failed", "skipped")),
		))),
	),
	"task": object(
		req("taskId", id()),
		req("title", str()),
		req("status", enum("pending", "running", "completed", "failed", "skipped")),
		opt("detail", str()),
	),
	"tool": object(
		req("toolCallId", id()),
		req("toolName", strMin(1)),
		req("status", enum("pending", "running", "completed", "failed", "denied")),
		opt("input", anyJSON()),
		opt("output", anyJSON()),
		opt("error", str()),
		opt("startedAt", timestamp()),
		opt("completedAt", timestamp()),
	),
	"approval": object(
		req("approvalId", id()),
		opt("toolCallId", id()),
		req("status", enum("requested", "approved", "rejected", "expired")),
		req("title", str()),
		opt("description", str()),
		opt("requestedAction", anyJSON()),
	),
	"status": object(
		req("status", enum(RunStatuses...)),
		opt("detail", str()),
		opt("startedAt", timestamp()),
		opt("stoppingRequestedAt", timestamp()),
		opt("stoppedAt", timestamp()),
		opt("completedAt", timestamp()),
		opt("failedAt", timestamp()),
		opt("durationMs", nonNegNumber()),
	),
	"artifact": object(
		req("artifactId", id()),
		req("name", strMin(1)),
		req("kind", enum("file", "image", "video", "audio", "web", "other")),
		req("status", enum("pending", "ready", "failed")),
		opt("mimeType", str()),
		opt("url", &schema{typ: tString, format: fURI}),
		opt("size", safeInt(0)),
		opt("sourceEventId", id()),
	),
	"usage": object(
		opt("inputTokens", safeInt(0)),
		opt("outputTokens", safeInt(0)),
		opt("totalTokens", safeInt(0)),
		opt("contextTokens", safeInt(0)),
		opt("contextWindow", &schema{typ: tInteger, hasMin: true, exclusiveMin: true, hasMax: true, max: MaxSafeInteger}),
	),
	"resume": object(
		req("resumable", boolean()),
		opt("state", freeObject()),
		opt("reason", str()),
	),
	"error": object(
		req("code", strMin(1)),
		req("message", str()),
		req("retryable", boolean()),
		opt("sourceEventId", id()),
		opt("details", freeObject()),
	),
	"diff": object(
		req("path", strMin(1)),
		req("status", enum("added", "modified", "deleted", "renamed")),
		opt("patch", str()),
	),
	"workspace-file": object(
		req("path", strMin(1)),
		req("operation", enum("upsert", "delete")),
		opt("mimeType", str()),
		opt("size", safeInt(0)),
	),
	"terminal": object(
		req("terminalId", id()),
		req("stream", enum("stdin", "stdout", "stderr", "status")),
		req("chunk", str()),
		opt("exitCode", safeInt(-MaxSafeInteger)),
	),
	"test-result": object(
		req("testId", id()),
		req("name", str()),
		req("status", enum("running", "passed", "failed", "skipped")),
		opt("durationMs", nonNegNumber()),
		opt("output", str()),
	),
	"steer": object(
		req("commandId", id()),
		req("targetRunId", id()),
		req("text", strMin(1)),
		req("status", enum("accepted", "applied", "failed")),
		opt("error", commandErrorSchema),
	),
	"summary": object(
		req("summaryId", id()),
		req("runId", id()),
		req("text", str()),
		req("highlights", arrayOf(str())),
		req("pendingItems", arrayOf(str())),
		req("status", enum("generating", "completed", "failed")),
	),
}

// StatusIdle is the session status reported before a session's first run.
const StatusIdle = "idle"

// EventTypes lists the 17 event types in the order of the event schema.
var EventTypes = []string{
	"message", "reasoning", "plan", "task", "tool", "approval", "status", "artifact", "usage",
	"resume", "error", "diff", "workspace-file", "terminal", "test-result", "steer", "summary",
}

var commandErrorSchema = object(
	req("code", enum(codeStrings(ErrorCodes)...)),
	req("message", str()),
	req("retryable", boolean()),
)

// eventHeader is the event envelope; "payload" is checked against payloadSchemas by eventType.
var eventHeader = object(
	req("contract", constStr("AgentSessionEvent")),
	req("eventId", id()),
	req("sessionId", id()),
	opt("runId", id()),
	opt("sourceMessageId", id()),
	req("sequence", safeInt(0)),
	req("idempotencyKey", id()),
	req("occurredAt", timestamp()),
	req("eventType", enum(EventTypes...)),
	req("payload", &schema{typ: tObject, open: anyJSON()}), // refined by eventType
)

var (
	lineageSchema = object(
		req("forkedFromThreadId", id()),
		req("forkedFromMessageId", id()),
		req("sourceRunId", id()),
	)
	inheritanceSchema = object(
		req("messages", enum("through-source-message", "exclude")),
		req("attachments", enum("inherit", "exclude")),
		req("summaries", enum("inherit", "exclude")),
		req("toolResults", enum("inherit", "exclude")),
		req("codeChanges", enum("inherit", "exclude")),
	)
	unavailableResourceSchema = object(
		req("messageId", id()),
		req("kind", enum("attachment", "tool-result", "code-change")),
		req("reason", enum("excluded", "unavailable", "unsupported")),
	)
	inheritedContextSchema = object(
		req("sourceThreadId", id()),
		req("sourceMessageId", id()),
		req("sourceRunId", id()),
		req("messages", &schema{typ: tArray, maxItems: 24, items: object(
			req("messageId", id()),
			req("role", enum("user", "assistant")),
			req("parts", &schema{typ: tArray, minItems: 1, items: anyJSON()}),
		)}),
		opt("summary", notBlank()),
		req("unavailableResources", arrayOf(unavailableResourceSchema)),
		req("capturedAt", timestamp()),
	)
	activeBranchSchema = object(
		req("branchId", id()),
		req("threadId", id()),
		req("sourceMessageId", id()),
		req("runId", id()),
		opt("lineage", lineageSchema),
		req("createdAt", timestamp()),
	)
	capabilitiesSchema = func() *schema {
		s := &schema{typ: tObject}
		for _, n := range CapabilityNames {
			s.props = append(s.props, opt(n, boolean()))
		}
		return s
	}()
	snapshotSchema = object(
		req("mode", enum("chat", "work")),
		req("modelId", notBlank()),
		req("capabilities", capabilitiesSchema),
		opt("permissionProfile", enum("approval-required", "auto-approve", "full-access")),
	)
	runSchema = object(
		req("runId", id()),
		req("sessionId", id()),
		req("sourceMessageId", id()),
		req("status", enum(RunStatuses...)),
		req("startedAt", timestamp()),
		opt("stoppingRequestedAt", timestamp()),
		opt("stoppedAt", timestamp()),
		opt("completedAt", timestamp()),
		opt("failedAt", timestamp()),
		opt("durationMs", nonNegNumber()),
	)
	continuationRequestSchema = object(
		req("idempotencyKey", id()),
		req("sourceMessageId", id()),
		req("sourceRunId", id()),
		req("inheritance", inheritanceSchema),
	)
	continuationResultSchema = object(
		req("idempotencyKey", id()),
		req("threadId", id()),
		req("lineage", lineageSchema),
		req("inheritance", inheritanceSchema),
		req("unavailableResources", arrayOf(unavailableResourceSchema)),
		req("duplicate", boolean()),
		req("createdAt", timestamp()),
	)
)

// commandPayloadSchemas maps each commandType to its payload schema.
var commandPayloadSchemas = map[string]*schema{
	"stop":          object(opt("reason", notBlank())),
	"resume":        object(opt("resumeEventId", id())),
	"retry":         object(req("sourceEventId", id())),
	"retry-summary": object(req("sourceEventId", id()), req("sourceRunId", id())),
	"approval": object(
		req("approvalId", id()),
		req("decision", enum("approved", "rejected")),
		opt("reason", notBlank()),
	),
	"fork": object(
		req("sourceThreadId", id()),
		req("sourceMessageId", id()),
		req("sourceRunId", id()),
		req("inheritance", inheritanceSchema),
	),
	"edit-and-rerun": object(
		req("sourceThreadId", id()),
		req("sourceMessageId", id()),
		req("sourceRunId", id()),
		req("replacementParts", &schema{typ: tArray, minItems: 1, items: anyJSON()}),
		req("inheritance", inheritanceSchema),
	),
	"steer": object(req("targetRunId", id()), req("text", notBlank())),
}

// CommandTypes lists the 8 command types of the contract.
var CommandTypes = []string{"stop", "resume", "retry", "retry-summary", "approval", "fork", "edit-and-rerun", "steer"}

var commandHeader = object(
	req("contract", constStr("AgentSessionCommand")),
	req("commandId", id()),
	req("sessionId", id()),
	opt("runId", id()),
	req("idempotencyKey", id()),
	req("expectedSequence", &schema{typ: tInteger, hasMin: true, min: -1, hasMax: true, max: MaxSafeInteger}),
	req("issuedAt", timestamp()),
	req("commandType", enum(CommandTypes...)),
	req("payload", &schema{typ: tObject, open: anyJSON()}), // refined by commandType
)

var commandResultSchema = object(
	req("contract", constStr("AgentSessionCommandResult")),
	req("commandId", id()),
	req("sessionId", id()),
	opt("runId", id()),
	req("idempotencyKey", id()),
	req("outcome", enum("accepted", "duplicate", "rejected", "failed")),
	req("sessionStatus", enum(SessionRunStatuses...)),
	opt("acceptedSequence", safeInt(0)),
	opt("resultEventIds", arrayOf(id())),
	opt("operation", object(req("lineage", lineageSchema), req("activeBranch", activeBranchSchema))),
	opt("termination", enum("requested", "confirmed")),
	opt("error", commandErrorSchema),
	req("occurredAt", timestamp()),
)

// viewSchema checks the view's own fields; its events are checked one by one as events.
var viewSchema = object(
	req("sessionId", id()),
	req("snapshot", snapshotSchema),
	req("status", enum(SessionRunStatuses...)),
	req("events", arrayOf(anyJSON())),
	req("lastSequence", &schema{typ: tInteger, hasMin: true, min: -1, hasMax: true, max: MaxSafeInteger}),
	opt("resumable", boolean()),
	opt("lineage", lineageSchema),
	opt("activeBranch", activeBranchSchema),
)

// sessionRecordSchema mirrors testdata/cortex-session.schema.json (draft-07, where
// "format" is asserted).
var sessionRecordSchema = func() *schema {
	one := int64(1)
	nstr := nullable(str())
	ndt := nullable(&schema{typ: tString, format: fDateTime})
	return object(
		req("schema_version", &schema{typ: tNumber, constInt: &one}),
		req("session_id", strMin(1)),
		opt("project", nstr),
		req("agent_id", strMin(1)),
		req("role", enum(SessionRoles...)),
		opt("mode", nullable(enum("code", "general"))),
		req("status", enum(SessionStatuses...)),
		opt("phase", nstr),
		opt("activity", nstr),
		opt("current_run_id", nstr),
		opt("current_task_id", nstr),
		opt("current_mission_id", nstr),
		opt("worktree_path", nstr),
		req("started_at", &schema{typ: tString, format: fDateTime}),
		opt("last_heartbeat_at", ndt),
		opt("updated_at", ndt),
		opt("updated_by_gate", nullable(enum("owner", "handoff", "user", "mission"))),
		opt("closed_at", ndt),
		opt("archive_path", nstr),
	)
}()

// Session record enumerations (cortex-session.schema.json).
var (
	SessionRoles    = []string{"implementer", "coordinator", "reviewer", "researcher", "documenter", "memory-curator", "conversation-curator", "user"}
	SessionStatuses = []string{SessionStatusRunning, SessionStatusPaused, SessionStatusClosed, SessionStatusStale, SessionStatusArchived}
)
