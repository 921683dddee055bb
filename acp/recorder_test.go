package acp_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/acp"
	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/internal/testenv"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/server/servertest"
	"github.com/sessiond/sessiond/wire"
)

// startServer starts a real server on SQLite in a temporary directory, stopped when the test
// ends, and returns a client of it.
func startServer(t testing.TB) *client.Client {
	t.Helper()
	return client.New(servertest.Start(t, server.Options{}), nil)
}

// sdkAgent returns node and the path of the test agent (written with the pinned SDK) in a
// directory where it resolves the SDK, and that directory.
func sdkAgent(t testing.TB) (node, script, dir string) {
	t.Helper()
	node = testenv.Need(t, "node", "the ACP test agent is written with the @agentclientprotocol/sdk npm package", "apt-get install nodejs")
	dir = testenv.NpmPackages(t, "testdata/sdk")
	src, err := os.ReadFile("testdata/sdk/agent.mjs")
	if err != nil {
		t.Fatal(err)
	}
	script = filepath.Join(dir, "agent.mjs")
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	return node, script, dir
}

func userMessage(session, id, text string) contract.Event {
	return contract.Event{Contract: "AgentSessionEvent", EventID: "ev-" + id, SessionID: session, IdempotencyKey: "ev-" + id,
		OccurredAt: "2026-03-01T12:00:00Z", EventType: "message",
		Payload: &contract.MessagePayload{MessageID: id, Role: "user", Operation: "append", Parts: []contract.RawJSON{contract.RawJSON(`{"type":"text","text":"` + text + `"}`)}}}
}

// TestRecordSDKAgent runs a real ACP agent (written with the SDK) under a Recorder against a
// real server, and drives it as a person would: a prompt, a tool call whose permission is
// approved with the approval command, one rejected, a read outside the root, and a turn
// cancelled with the stop command. Every frame in both directions is validated against the
// protocol's JSON Schema.
func TestRecordSDKAgent(t *testing.T) {
	node, script, dir := sdkAgent(t)
	checker := newFrameChecker(t, dir)
	cl := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const sid = "S-acp"
	yes := true
	if _, err := cl.CreateSession(ctx, api.CreateSessionRequest{SessionID: sid, AgentID: "sdk-test-agent", Role: "implementer",
		Snapshot: contract.Snapshot{Mode: "work", ModelID: "test", Capabilities: contract.Capabilities{Approval: &yes, Tools: &yes, Resume: &yes}}}); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	rec := &acp.Recorder{Client: cl, SessionID: sid, Root: root, Log: t.Logf,
		Tap: func(d acp.Direction, b []byte) { checker.check(t, d, b) }}
	done := make(chan error, 1)
	runCtx, stopRec := context.WithCancel(ctx)
	go func() { done <- rec.Run(runCtx, acp.Agent{Path: node, Args: []string{script}}) }()

	waitRun := func(runID string, statuses ...string) {
		t.Helper()
		for {
			runs, err := cl.Runs(ctx, sid)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range runs {
				for _, s := range statuses {
					if r.RunID == runID && r.Status == s {
						return
					}
				}
			}
			if ctx.Err() != nil {
				t.Fatalf("run %s never became %v: %+v", runID, statuses, runs)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	send := func(runID, cmdType string, payload contract.CommandPayload, wait time.Duration) *contract.CommandResult {
		t.Helper()
		for attempt := 0; ; attempt++ {
			s, err := cl.GetSession(ctx, sid)
			if err != nil {
				t.Fatal(err)
			}
			c := &contract.Command{Contract: "AgentSessionCommand", CommandID: "c-" + runID + cmdType, SessionID: sid, RunID: runID,
				IdempotencyKey: "k-" + runID + cmdType, ExpectedSequence: s.LastSequence, IssuedAt: "2026-03-01T12:00:00Z", CommandType: cmdType, Payload: payload}
			res, err := cl.Command(ctx, c, wait)
			if err != nil {
				t.Fatal(err)
			}
			if res.Error != nil && res.Error.Code == "SEQUENCE_CONFLICT" && attempt < 100 {
				continue
			}
			if res.Outcome != "accepted" {
				t.Fatalf("%s: %+v %+v", cmdType, res, res.Error)
			}
			return res
		}
	}
	say := func(id, text string) {
		t.Helper()
		if _, err := cl.AppendEvents(ctx, sid, []contract.Event{userMessage(sid, id, text)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	transcript := func() *wire.Transcript {
		t.Helper()
		tr, err := cl.Transcript(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	messageText := func(tr *wire.Transcript, id string) string {
		for _, m := range tr.Messages {
			if m.MessageID == id {
				var sb strings.Builder
				for _, p := range m.Parts {
					sb.WriteString(blockTextOf(p))
				}
				return sb.String() + " (" + m.Status + ")"
			}
		}
		return "<none>"
	}

	// 1. A prompt: thought, plan, streamed answer, usage.
	say("m1", "hello there")
	waitRun("acp-m1", "completed")
	tr := transcript()
	if got := messageText(tr, "acp-m1-msg-0"); got != "Hello, world! (completed)" {
		t.Errorf("answer = %q", got)
	}
	if len(tr.Reasoning) != 1 || tr.Reasoning[0].Text != "The user greets me." {
		t.Errorf("reasoning = %+v", tr.Reasoning)
	}
	if tr.Plan == nil || len(tr.Plan.Steps) != 2 || tr.Plan.Status != "running" || tr.Plan.Steps[0].Status != "completed" {
		t.Errorf("plan = %+v", tr.Plan)
	}
	if u := tr.Usage.Latest; u == nil || u.ContextTokens == nil || *u.ContextTokens != 1234 || *u.ContextWindow != 200000 {
		t.Errorf("usage = %+v", tr.Usage)
	}

	// The resume command queues a new run for the same message: the agent gets it again.
	res := send("acp-m1", "resume", &contract.ResumeCommand{}, 0)
	waitRun(res.RunID, "completed")

	// 2. A tool call that asks for permission, approved through the approval command: the
	// agent writes and reads a file inside the root and runs a command in a terminal.
	say("m2", "edit note.txt")
	waitRun("acp-m2", "waiting_approval")
	tr = transcript()
	if len(tr.Approvals) != 1 || tr.Approvals[0].Status != "requested" || !strings.Contains(string(tr.Approvals[0].RequestedAction), `"allow_always"`) {
		t.Fatalf("approvals = %+v", tr.Approvals)
	}
	send("acp-m2", "approval", &contract.ApprovalCommand{ApprovalID: tr.Approvals[0].ApprovalID, Decision: "approved"}, 0)
	waitRun("acp-m2", "completed")
	if b, err := os.ReadFile(filepath.Join(root, "note.txt")); err != nil || string(b) != "hello from the agent\n" {
		t.Errorf("note.txt = %q, %v", b, err)
	}
	tr = transcript()
	if len(tr.Tools) != 1 || tr.Tools[0].Status != "completed" || tr.Tools[0].ToolName == "" || len(tr.Tools[0].Input) == 0 {
		t.Errorf("tools = %+v", tr.Tools)
	}
	if len(tr.Diffs) != 1 || tr.Diffs[0].Path != "note.txt" || tr.Diffs[0].Status != "added" || !strings.Contains(*tr.Diffs[0].Patch, "+hello from the agent\n") {
		t.Errorf("diffs = %+v", tr.Diffs)
	}
	if len(tr.Terminals) != 1 || !strings.Contains(tr.Terminals[0].Output, "written: hello from the agent\n") ||
		tr.Terminals[0].ExitCode == nil || *tr.Terminals[0].ExitCode != 0 {
		t.Errorf("terminals = %+v", tr.Terminals)
	}
	files := 0
	page, err := cl.ReadEvents(ctx, sid, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range page.Events {
		if strings.Contains(string(raw), `"eventType":"workspace-file"`) && strings.Contains(string(raw), `"path":"note.txt"`) {
			files++
		}
	}
	if files != 1 {
		t.Errorf("%d workspace-file events for note.txt, want 1", files)
	}

	// 3. The same, rejected: the tool call is denied and nothing is written.
	say("m3", "edit other.txt")
	waitRun("acp-m3", "waiting_approval")
	tr = transcript()
	send("acp-m3", "approval", &contract.ApprovalCommand{ApprovalID: tr.Approvals[0].ApprovalID, Decision: "rejected"}, 0)
	waitRun("acp-m3", "completed")
	if _, err := os.Stat(filepath.Join(root, "other.txt")); err == nil {
		t.Error("other.txt was written after a rejection")
	}
	tr = transcript()
	if len(tr.Tools) != 2 || tr.Tools[1].Status != "denied" {
		t.Errorf("tools after a rejection = %+v", tr.Tools)
	}

	// 4. A read outside the root is refused.
	say("m4", "escape")
	waitRun("acp-m4", "completed")
	if got := messageText(transcript(), "acp-m4-msg-0"); !strings.Contains(got, "refused") || !strings.Contains(got, "outside the workspace root") {
		t.Errorf("escape answer = %q", got)
	}

	// 5. Stop: session/cancel, the agent answers cancelled, the run ends stopped.
	say("m5", "wait")
	for {
		if strings.Contains(messageText(transcript(), "acp-m5-msg-0"), "..") {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the waiting turn never streamed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	res = send("acp-m5", "stop", &contract.StopCommand{Reason: "enough"}, 10*time.Second)
	if res.Termination != "confirmed" {
		t.Errorf("stop: %+v", res)
	}
	waitRun("acp-m5", "stopped")

	stopRec()
	if err := <-done; err != context.Canceled {
		t.Errorf("recorder: %v", err)
	}

	// 6. A message typed while no recorder runs is prompted when one starts again, in the
	// agent's session of before (session/load).
	say("m6", "hello again")
	rec2 := &acp.Recorder{Client: cl, SessionID: sid, Root: root, Log: t.Logf,
		Tap: func(d acp.Direction, b []byte) { checker.check(t, d, b) }}
	runCtx, stopRec = context.WithCancel(ctx)
	go func() { done <- rec2.Run(runCtx, acp.Agent{Path: node, Args: []string{script}}) }()
	waitRun("acp-m6", "completed")
	stopRec()
	if err := <-done; err != context.Canceled {
		t.Errorf("second recorder: %v", err)
	}
	if runs, err := cl.Runs(ctx, sid); err != nil || len(runs) != 7 {
		t.Errorf("runs after a restart: %d (%v), want 7: the history is not prompted again", len(runs), err)
	}
	checker.mu.Lock()
	defer checker.mu.Unlock()
	for _, k := range []string{"request|agent|initialize", "request|agent|session/new", "request|agent|session/load", "request|agent|session/prompt", "request|agent|session/cancel",
		"request|client|session/update", "request|client|session/request_permission", "response|client|session/request_permission",
		"request|client|fs/write_text_file", "request|client|fs/read_text_file", "request|client|terminal/create", "response|agent|session/prompt"} {
		if checker.count[k] == 0 {
			t.Errorf("no %s frame was checked: %v", k, checker.count)
		}
	}
}

func blockTextOf(p contract.RawJSON) string {
	var b struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(p, &b)
	return b.Text
}
