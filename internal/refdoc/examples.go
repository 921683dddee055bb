package refdoc

// The examples the reference page shows: one valid event per event type and one valid command
// per command type. Generate validates each against the contract before writing it.

// exampleEvent is one example: the envelope fields beyond the common ones, and the payload.
type exampleEvent struct {
	envelope string // extra envelope members, e.g. `"runId":"r-1",`; "" for none
	payload  string
}

var eventExamples = map[string]exampleEvent{
	"message": {``, `{"messageId":"m-1","role":"user","operation":"append","parts":[{"type":"text","text":"Fix the flaky test"}]}`},
	"reasoning": {`"runId":"r-1",`,
		`{"reasoningId":"rs-1","text":"The test sleeps instead of waiting for the server.","status":"streaming"}`},
	"plan": {`"runId":"r-1",`,
		`{"planId":"p-1","title":"Fix the flaky test","status":"running","steps":[{"id":"s-1","title":"Reproduce it","status":"completed"},{"id":"s-2","title":"Wait instead of sleeping","status":"running"}]}`},
	"task": {`"runId":"r-1",`, `{"taskId":"t-1","title":"Run the test 100 times","status":"running","detail":"37 of 100"}`},
	"tool": {`"runId":"r-1",`,
		`{"toolCallId":"tc-1","toolName":"shell","status":"completed","input":{"command":"go test ./..."},"output":{"exitCode":0},"startedAt":"2026-03-01T12:00:05Z","completedAt":"2026-03-01T12:00:09Z"}`},
	"approval": {`"runId":"r-1",`,
		`{"approvalId":"ap-1","toolCallId":"tc-2","status":"requested","title":"Delete the build directory?","requestedAction":{"command":"rm -rf build"}}`},
	"status": {`"runId":"r-1","sourceMessageId":"m-1",`,
		`{"status":"completed","startedAt":"2026-03-01T12:00:01Z","completedAt":"2026-03-01T12:00:31Z","durationMs":30000}`},
	"artifact": {`"runId":"r-1",`,
		`{"artifactId":"a-1","name":"coverage.html","kind":"file","status":"ready","mimeType":"text/html","url":"https://example.com/coverage.html","size":48213}`},
	"usage":  {`"runId":"r-1",`, `{"inputTokens":1200,"outputTokens":340,"totalTokens":1540,"contextTokens":1540,"contextWindow":200000}`},
	"resume": {`"runId":"r-1",`, `{"resumable":true,"state":{"checkpoint":"step-2"}}`},
	"error": {`"runId":"r-1",`,
		`{"code":"TOOL_TIMEOUT","message":"go test did not finish within 10 minutes","retryable":true,"sourceEventId":"ev-5"}`},
	"diff": {`"runId":"r-1",`,
		`{"path":"server/wait_test.go","status":"modified","patch":"@@ -10 +10 @@\n-\ttime.Sleep(time.Second)\n+\twaitFor(t, ready)\n"}`},
	"workspace-file": {`"runId":"r-1",`, `{"path":"server/wait_test.go","operation":"upsert","mimeType":"text/x-go","size":1830}`},
	"terminal":       {`"runId":"r-1",`, `{"terminalId":"term-1","stream":"stdout","chunk":"ok  \tserver\t0.412s\n"}`},
	"test-result":    {`"runId":"r-1",`, `{"testId":"TestWait","name":"TestWait","status":"passed","durationMs":412}`},
	"steer": {`"runId":"r-1",`,
		`{"commandId":"c-3","targetRunId":"r-1","text":"Keep the public API unchanged","status":"accepted"}`},
	"summary": {`"runId":"r-1",`,
		`{"summaryId":"sum-1","runId":"r-1","text":"Replaced a sleep with a wait; the test passed 100 times.","highlights":["no more sleeps in server tests"],"pendingItems":[],"status":"completed"}`},
}

// exampleCommand is one example command: its runId ("" for none) and payload.
type exampleCommand struct {
	runID   string
	payload string
}

const exampleInheritance = `{"messages":"through-source-message","attachments":"exclude","summaries":"inherit","toolResults":"exclude","codeChanges":"exclude"}`

var commandExamples = map[string]exampleCommand{
	"stop":          {"r-1", `{"reason":"enough for today"}`},
	"resume":        {"r-1", `{}`},
	"retry":         {"r-1", `{"sourceEventId":"ev-7"}`},
	"retry-summary": {"r-1", `{"sourceEventId":"ev-12","sourceRunId":"r-1"}`},
	"approval":      {"r-1", `{"approvalId":"ap-1","decision":"approved","reason":"the directory is generated"}`},
	"fork":          {"", `{"sourceThreadId":"S-demo","sourceMessageId":"m-1","sourceRunId":"r-1","inheritance":` + exampleInheritance + `}`},
	"edit-and-rerun": {"", `{"sourceThreadId":"S-demo","sourceMessageId":"m-1","sourceRunId":"r-1","replacementParts":[{"type":"text","text":"Fix the flaky test without sleeping"}],"inheritance":` +
		exampleInheritance + `}`},
	"steer": {"r-1", `{"targetRunId":"r-1","text":"Keep the public API unchanged"}`},
}

// eventPurposes says in a line what each event type is for.
var eventPurposes = map[string]string{
	"message":        "A message of the conversation, from the user, the assistant or the system. `append` adds parts to the message with that `messageId` (a streamed reply is many appends), `replace` replaces its parts.",
	"reasoning":      "The model's reasoning, streamed: each event's `text` is appended to the reasoning with that `reasoningId`.",
	"plan":           "The agent's plan and the state of each step; the latest plan event is the plan.",
	"task":           "One task the agent tracks, with its latest state.",
	"tool":           "A tool call, from `pending` to `completed`, `failed` or `denied`; later states may leave out the `input` sent earlier.",
	"approval":       "A request for a person's decision (`requested`), and the decision. The decision is appended by the server when an `approval` command is accepted.",
	"status":         "A status. With `runId` it is a *run status event*: it creates the run or changes its status (see [Runs](#runs)).",
	"artifact":       "A file, image, page or other output the agent produced.",
	"usage":          "Token usage of one step.",
	"resume":         "Whether the session can be resumed, and the state the runtime needs to resume it.",
	"error":          "An error of the runtime. A `retry` command may name an error event with `retryable: true`.",
	"diff":           "A change to a file, as a patch.",
	"workspace-file": "A file of the workspace created, changed or deleted.",
	"terminal":       "Terminal output: the chunks of a `terminalId` concatenated in order are the output; `exitCode` when the command ended.",
	"test-result":    "The result of one test.",
	"steer":          "Guidance sent to a running run: `accepted` (appended by the server for a `steer` command), then `applied` or `failed` (by the runtime).",
	"summary":        "A summary of a run; a `retry-summary` command regenerates a failed one.",
}

// eventNotes adds what a reader of an event type's table needs beyond its fields.
var eventNotes = map[string]string{
	"message": "Each element of `parts` may be any JSON value; the convention sessiond's own tools follow\n" +
		"is a text part, `{\"type\":\"text\",\"text\":\"...\"}`. The CLI (`sessiond read`, `sessiond view`)\n" +
		"shows a part's `text`, or a part that is a plain string; the transcript keeps parts as sent. A user message\n" +
		"usually starts a run: the runtime appends the run's `queued` or `running` status with the\n" +
		"message's `messageId` as `sourceMessageId`.",
	"status": "Without `runId` the event is a plain status note and changes no run. With `runId` it is a\n" +
		"run status event: it must also carry `sourceMessageId`, the timestamp its status needs, and\n" +
		"`durationMs` when the status is terminal (see [Runs](#runs)).",
}

// commandPurposes says in a line what each command asks for.
var commandPurposes = map[string]string{
	"stop":           "Asks the run to stop.",
	"resume":         "Asks for a new run that continues a finished one.",
	"retry":          "Asks for a new run after a failure, naming the error or failed status event.",
	"retry-summary":  "Asks the runtime to generate a failed summary again.",
	"approval":       "Approves or rejects a requested approval.",
	"fork":           "Branches a new thread (a session) from a message of a source thread ([forks.md](forks.md)).",
	"edit-and-rerun": "Forks with the source message's parts replaced, and runs again ([forks.md](forks.md)).",
	"steer":          "Sends guidance to a queued or running run.",
}
