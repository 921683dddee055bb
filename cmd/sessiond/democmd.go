package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
)

func init() {
	commands["demo"] = command{
		summary: "fill a server with a demo session: every event kind, a fork, a pending approval, usage",
		about: `Creates session S-demo (or --id) on the server, with the capabilities that turn on every
control of the web UI, and appends what an agent runtime would: run r1 with a message,
reasoning, a plan, a task, tool calls, terminal output, a test that fails and then passes,
a diff, a workspace file, usage, an artifact, an error, a steer, a resume point, a streamed
answer and a summary; and run r2, which waits for an approval. It then forks the session
from the first message. The events are timed over the last half hour, so the usage page
shows them today. It prints the page to open. A session with that id already there is left
as it is.`,
		run: runDemo,
	}
}

// demoCapabilities are the capabilities of the demo session: every one its events and
// controls use.
const demoCapabilities = `{"text":true,"reasoning":true,"plan":true,"tasks":true,"tools":true,"shell":true,"fileChange":true,"approval":true,"artifacts":true,"usage":true,"resume":true,"diff":true,"workspaceFiles":true,"terminal":true,"testResults":true,"threadForking":true,"editAndRerun":true,"steering":true,"summary":true}`

// demoStory writes the demo session's events as NDJSON, timed from start, 7 seconds apart:
// the first batch is run r1 (every kind but approval, completed), the second run r2 (a
// failed tool call, usage, then an approval it waits for).
func demoStory(id string, start time.Time) (r1, r2 string) {
	n := 0
	at := func() string { return contract.FormatTime(start.Add(time.Duration(n) * 7 * time.Second)) }
	var b strings.Builder
	e := func(kind, run, src, payload string) {
		n++
		extra := ""
		if run != "" {
			extra += fmt.Sprintf(`,"runId":%q`, run)
		}
		if src != "" {
			extra += fmt.Sprintf(`,"sourceMessageId":%q`, src)
		}
		fmt.Fprintf(&b, `{"contract":"AgentSessionEvent","eventId":"demo-%d","sessionId":%q,"sequence":0,"idempotencyKey":"demo-%d","occurredAt":%q,"eventType":%q%s,"payload":%s}`+"\n",
			n, id, n, at(), kind, extra, payload)
	}
	started := func() string { return at() }
	e("message", "", "", `{"messageId":"m1","role":"user","operation":"append","parts":[{"type":"text","text":"The `+"`TestWait`"+` test is **flaky**: fix it without sleeping."}]}`)
	e("status", "r1", "m1", `{"status":"running","startedAt":"`+started()+`"}`)
	r1Start := n
	e("reasoning", "r1", "", `{"reasoningId":"rs-1","text":"The test sleeps for a second instead of waiting for the server to be ready. ","status":"streaming"}`)
	e("reasoning", "r1", "", `{"reasoningId":"rs-1","text":"Waiting on the ready channel makes it deterministic.","status":"completed"}`)
	e("plan", "r1", "", `{"planId":"p-1","title":"Fix the flaky test","status":"running","steps":[{"id":"s1","title":"Reproduce it","status":"completed"},{"id":"s2","title":"Wait instead of sleeping","status":"running"},{"id":"s3","title":"Run it 100 times","status":"pending"}]}`)
	e("task", "r1", "", `{"taskId":"t-1","title":"Run the test 100 times","status":"running","detail":"37 of 100"}`)
	e("tool", "r1", "", `{"toolCallId":"tc-1","toolName":"shell","status":"running","input":{"command":"go test -run TestWait -count=100 ./server/"}}`)
	e("terminal", "r1", "", `{"terminalId":"term-1","stream":"stdout","chunk":"\u001b[1mgo test -run TestWait -count=100 ./server/\u001b[0m\n\u001b[31m--- FAIL: TestWait (1.02s)\u001b[0m\n    wait_test.go:14: server not ready after 1s\n\u001b[31mFAIL\u001b[0m\tgithub.com/example/app/server\t38.4s\n","exitCode":1}`)
	e("tool", "r1", "", `{"toolCallId":"tc-1","toolName":"shell","status":"failed","error":"exit status 1","input":{"command":"go test -run TestWait -count=100 ./server/"},"output":{"exitCode":1}}`)
	e("test-result", "r1", "", `{"testId":"TestWait","name":"TestWait","status":"failed","durationMs":1020,"output":"wait_test.go:14: server not ready after 1s (once in 37 runs)"}`)
	e("usage", "r1", "", `{"inputTokens":5200,"outputTokens":610,"totalTokens":5810,"contextTokens":5810,"contextWindow":200000}`)
	e("tool", "r1", "", `{"toolCallId":"tc-2","toolName":"read_file","status":"completed","input":{"path":"server/wait_test.go"},"output":{"lines":42}}`)
	e("diff", "r1", "", `{"path":"server/wait_test.go","status":"modified","patch":"@@ -10,3 +10,3 @@ func TestWait(t *testing.T) {\n \tstart(t)\n-\ttime.Sleep(time.Second)\n+\t<-srv.Ready()\n \tcheck(t)\n"}`)
	e("workspace-file", "r1", "", `{"path":"server/wait_test.go","operation":"upsert","mimeType":"text/x-go","size":1830}`)
	e("steer", "r1", "", `{"commandId":"c-steer-1","targetRunId":"r1","text":"Keep the public API unchanged","status":"applied"}`)
	e("tool", "r1", "", `{"toolCallId":"tc-3","toolName":"shell","status":"running","input":{"command":"go test -run TestWait -count=100 ./server/"}}`)
	e("terminal", "r1", "", `{"terminalId":"term-2","stream":"stdout","chunk":"\u001b[32mok\u001b[0m  \tgithub.com/example/app/server\t4.1s\n","exitCode":0}`)
	e("tool", "r1", "", `{"toolCallId":"tc-3","toolName":"shell","status":"completed","input":{"command":"go test -run TestWait -count=100 ./server/"},"output":{"exitCode":0}}`)
	e("test-result", "r1", "", `{"testId":"TestWait","name":"TestWait","status":"passed","durationMs":41}`)
	e("task", "r1", "", `{"taskId":"t-1","title":"Run the test 100 times","status":"completed","detail":"100 of 100"}`)
	e("plan", "r1", "", `{"planId":"p-1","title":"Fix the flaky test","status":"completed","steps":[{"id":"s1","title":"Reproduce it","status":"completed"},{"id":"s2","title":"Wait instead of sleeping","status":"completed"},{"id":"s3","title":"Run it 100 times","status":"completed"}]}`)
	e("artifact", "r1", "", `{"artifactId":"a-1","name":"coverage.html","kind":"file","status":"ready","mimeType":"text/html","url":"https://example.com/coverage.html","size":48213}`)
	e("error", "r1", "", `{"code":"TOOL_TIMEOUT","message":"go vet did not finish within 10 minutes","retryable":true}`)
	e("resume", "r1", "", `{"resumable":true,"state":{"checkpoint":"after-tests"}}`)
	e("usage", "r1", "", `{"inputTokens":7400,"outputTokens":920,"totalTokens":8320,"contextTokens":14130,"contextWindow":200000}`)
	e("message", "r1", "", `{"messageId":"m2","role":"assistant","operation":"append","parts":[{"type":"text","text":"I replaced the sleep with a wait on `+"`srv.Ready()`"+`:\n\n"}],"status":"streaming"}`)
	e("message", "r1", "", `{"messageId":"m2","role":"assistant","operation":"append","parts":[{"type":"text","text":"- the test waits for the server\n- it passed 100 times in a row"}],"status":"completed"}`)
	e("summary", "r1", "", `{"summaryId":"sum-1","runId":"r1","text":"Replaced a sleep with a wait; the test passed 100 times.","highlights":["no more sleeps in server tests"],"pendingItems":["go vet timed out once"],"status":"completed"}`)
	dur := (n - r1Start + 1) * 7000
	e("status", "r1", "m1", fmt.Sprintf(`{"status":"completed","startedAt":"%s","completedAt":"%s","durationMs":%d}`, contract.FormatTime(start.Add(time.Duration(r1Start)*7*time.Second)), at(), dur))
	r1 = b.String()
	b.Reset()
	e("message", "", "", `{"messageId":"m3","role":"user","operation":"append","parts":[{"type":"text","text":"Also clean the build directory."}]}`)
	e("status", "r2", "m3", `{"status":"running","startedAt":"`+started()+`"}`)
	e("tool", "r2", "", `{"toolCallId":"tc-4","toolName":"shell","status":"failed","error":"permission denied","input":{"command":"make clean"}}`)
	e("usage", "r2", "", `{"inputTokens":2100,"outputTokens":180,"totalTokens":2280,"contextTokens":16410,"contextWindow":200000}`)
	e("approval", "r2", "", `{"approvalId":"ap-1","status":"requested","title":"Delete the build directory?","requestedAction":{"command":"rm -rf build"}}`)
	e("status", "r2", "m3", `{"status":"waiting_approval"}`)
	return r1, b.String()
}

func runDemo(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("demo", stdout, stderr)
	id := f.fs.String("id", "S-demo", "the demo session's id (its fork's id is the server's choice)")
	if _, code, ok := f.parse(args); !ok {
		return code
	}
	if p := contract.IDProblem(*id); p != "" || !strings.HasPrefix(*id, "S-") {
		return f.usageError(fmt.Sprintf("--id %q: a session id starts with S- and has 1 to 256 characters", *id))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := f.client()
	var snap contract.Snapshot
	if err := contract.Decode(contract.KindSnapshot, []byte(`{"mode":"work","modelId":"demo-model","permissionProfile":"approval-required","capabilities":`+demoCapabilities+`}`), contract.Limits{}, &snap); err != nil {
		fmt.Fprintf(stderr, "sessiond demo: the demo snapshot: %v\n", err)
		return 1
	}
	project := "demo"
	_, err := c.CreateSession(ctx, api.CreateSessionRequest{SessionID: *id, Project: &project, AgentID: "demo-agent", Role: "implementer", Snapshot: snap})
	var ae *api.Error
	if errors.As(err, &ae) && ae.Code == contract.CodeSessionExists {
		fmt.Fprintf(stdout, "session %s is already on the server: nothing changed (give another --id for a new demo)\nopen %s/#/s/%s\n", *id, strings.TrimRight(*f.server, "/"), *id)
		return 0
	}
	if err != nil {
		return fail(stderr, "demo", err)
	}
	r1, r2 := demoStory(*id, time.Now().Add(-30*time.Minute))
	for _, batch := range []string{r1, r2} {
		if _, err := c.AppendNDJSON(ctx, *id, []byte(batch), nil); err != nil {
			return fail(stderr, "demo", err)
		}
	}
	fork, err := demoFork(ctx, c, *id)
	if err != nil {
		return fail(stderr, "demo", err)
	}
	if *f.json {
		printJSON(stdout, map[string]string{"sessionId": *id, "forkId": fork, "url": strings.TrimRight(*f.server, "/") + "/#/s/" + *id})
		return 0
	}
	fmt.Fprintf(stdout, "created %s: 2 runs with every event kind, a test that fails then passes, usage, and an approval waiting for you\n", *id)
	fmt.Fprintf(stdout, "forked %s from its first message into %s\n", *id, fork)
	fmt.Fprintf(stdout, "open %s/#/s/%s\n", strings.TrimRight(*f.server, "/"), *id)
	return 0
}

// demoFork forks session id from message m1 (run r1) and appends a short run to the fork:
// a message, usage and an answer. It answers the fork's id.
func demoFork(ctx context.Context, c *client.Client, id string) (string, error) {
	s, err := c.GetSession(ctx, id)
	if err != nil {
		return "", err
	}
	key := fmt.Sprintf("demo-fork-%d", time.Now().UnixNano())
	res, err := c.Command(ctx, &contract.Command{Contract: "AgentSessionCommand", CommandID: key, SessionID: id, IdempotencyKey: key,
		ExpectedSequence: s.LastSequence, IssuedAt: contract.FormatTime(time.Now()), CommandType: "fork",
		Payload: &contract.ForkCommand{SourceThreadID: id, SourceMessageID: "m1", SourceRunID: "r1",
			Inheritance: contract.Inheritance{Messages: "through-source-message", Attachments: "exclude", Summaries: "inherit", ToolResults: "exclude", CodeChanges: "exclude"}}}, 0)
	if err != nil {
		return "", err
	}
	if res.Outcome != "accepted" || res.Operation == nil {
		msg := res.Outcome
		if res.Error != nil {
			msg = string(res.Error.Code) + ": " + res.Error.Message
		}
		return "", fmt.Errorf("fork %s: %s", id, msg)
	}
	fork := res.Operation.ActiveBranch.ThreadID
	at := time.Now().Add(-2 * time.Minute)
	ts := func(i int) string { return contract.FormatTime(at.Add(time.Duration(i) * 5 * time.Second)) }
	var b strings.Builder
	for i, ev := range []struct{ kind, run, src, payload string }{
		{"message", "", "", `{"messageId":"f-m1","role":"user","operation":"append","parts":[{"type":"text","text":"Try a channel instead of a callback."}]}`},
		{"status", "f-r1", "f-m1", `{"status":"running","startedAt":"` + ts(1) + `"}`},
		{"usage", "f-r1", "", `{"inputTokens":3100,"outputTokens":240,"totalTokens":3340}`},
		{"message", "f-r1", "", `{"messageId":"f-m2","role":"assistant","operation":"append","parts":[{"type":"text","text":"Done: the server closes a ready channel."}],"status":"completed"}`},
		{"status", "f-r1", "f-m1", `{"status":"completed","startedAt":"` + ts(1) + `","completedAt":"` + ts(3) + `","durationMs":10000}`},
	} {
		extra := ""
		if ev.run != "" {
			extra += fmt.Sprintf(`,"runId":%q`, ev.run)
		}
		if ev.src != "" {
			extra += fmt.Sprintf(`,"sourceMessageId":%q`, ev.src)
		}
		fmt.Fprintf(&b, `{"contract":"AgentSessionEvent","eventId":"demo-fork-%d","sessionId":%q,"sequence":0,"idempotencyKey":"demo-fork-%d","occurredAt":%q,"eventType":%q%s,"payload":%s}`+"\n",
			i, fork, i, ts(i), ev.kind, extra, ev.payload)
	}
	if _, err := c.AppendNDJSON(ctx, fork, []byte(b.String()), nil); err != nil {
		return "", fmt.Errorf("append to the fork %s: %w", fork, err)
	}
	return fork, nil
}
