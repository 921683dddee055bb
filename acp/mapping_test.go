package acp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/contract"
)

func TestUnifiedDiff(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		added          bool
		want           string
	}{
		{"new file", "", "a\nb\n", true, "--- /dev/null\n+++ b/f.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"one line changed, context kept", "1\n2\n3\n4\n5\n6\n7\n8\n", "1\n2\n3\n4\nX\n6\n7\n8\n", false,
			"--- a/f.txt\n+++ b/f.txt\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+X\n 6\n 7\n 8\n"},
		{"no newline at the end", "a", "b", false, "--- a/f.txt\n+++ b/f.txt\n@@ -1,1 +1,1 @@\n-a\n\\ No newline at end of file\n+b\n\\ No newline at end of file\n"},
		{"deleted content", "a\nb\n", "", false, "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +0,0 @@\n-a\n-b\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := UnifiedDiff("f.txt", tc.old, tc.new, tc.added); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestChoose(t *testing.T) {
	opts := []PermissionOption{{"a", "Always", "allow_always"}, {"o", "Once", "allow_once"}, {"r", "No", "reject_once"}}
	for _, tc := range []struct {
		decision string
		options  []PermissionOption
		want     RequestPermissionOutcome
	}{
		{"approved", opts, RequestPermissionOutcome{"selected", "o"}},
		{"rejected", opts, RequestPermissionOutcome{"selected", "r"}},
		{"approved", opts[:1], RequestPermissionOutcome{"selected", "a"}},
		{"rejected", opts[:2], RequestPermissionOutcome{"cancelled", ""}},
		{"", opts, RequestPermissionOutcome{"cancelled", ""}},
	} {
		if got := Choose(tc.options, tc.decision); got != tc.want {
			t.Errorf("Choose(%v, %q) = %+v, want %+v", tc.options, tc.decision, got, tc.want)
		}
	}
}

func TestRunStatus(t *testing.T) {
	for r, want := range map[StopReason]string{StopEndTurn: "completed", StopMaxTokens: "completed", StopMaxTurnRequests: "completed",
		StopCancelled: "stopped", StopRefusal: "failed"} {
		if got := RunStatus(r); got != want {
			t.Errorf("RunStatus(%s) = %s, want %s", r, got, want)
		}
	}
}

// TestMapperToolState: an update carries only what changed; the tool event carries the whole
// state, and a denied call stays denied when the agent then reports it failed.
func TestMapperToolState(t *testing.T) {
	m := &Mapper{RunID: "r"}
	up := func(s string) []Out {
		t.Helper()
		out, err := m.Update(json.RawMessage(s))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	up(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}`)
	out := up(`{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Read x","kind":"read","status":"pending","rawInput":{"p":1}}`)
	if len(out) != 2 || out[0].Type != "message" || out[0].Payload.(*contract.MessagePayload).Status != "completed" {
		t.Fatalf("a tool call ends the streamed message first: %+v", out)
	}
	out = up(`{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"in_progress"}`)
	tp := out[0].Payload.(*contract.ToolPayload)
	if tp.ToolName != "Read x" || tp.Status != "running" || string(tp.Input) != `{"p":1}` {
		t.Errorf("update folded: %+v", tp)
	}
	m.Denied("c1") // not pending any more: nothing
	if m.tools["c1"].Status != "running" {
		t.Errorf("Denied changed a running call")
	}
	out = up(`{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"ok"}}]}`)
	if tp := out[0].Payload.(*contract.ToolPayload); tp.Status != "completed" || string(tp.Output) != `[{"type":"text","text":"ok"}]` {
		t.Errorf("completed: %+v %s", tp, tp.Output)
	}
	if out := up(`{"sessionUpdate":"current_mode_update","currentModeId":"x"}`); out != nil || m.Skipped["current_mode_update"] != 1 {
		t.Errorf("a mode update is recorded as nothing, and counted: %+v %v", out, m.Skipped)
	}
	if _, err := m.Update(json.RawMessage(`{"sessionUpdate":"tool_call"}`)); err == nil {
		t.Error("a tool call without toolCallId is refused")
	}
}

// TestWorkspaceRefusesOutsideRoot: paths outside the root, also through a symbolic link or
// "..", are refused; inside, files are read and written.
func TestWorkspaceRefusesOutsideRoot(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	var recorded []Out
	w, err := NewWorkspace(root, func(o ...Out) { recorded = append(recorded, o...) })
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(outside, "secret"), filepath.Join(root, "link", "secret"), filepath.Join(root, "..", filepath.Base(outside), "secret"), "relative.txt", "/"} {
		if _, err := w.ReadTextFile(ReadTextFileRequest{Path: p}); err == nil {
			t.Errorf("read %s: allowed", p)
		}
		if err := w.WriteTextFile(WriteTextFileRequest{Path: p + "-new", Content: "x"}); err == nil {
			t.Errorf("write %s: allowed", p+"-new")
		}
	}
	if err := w.WriteTextFile(WriteTextFileRequest{Path: filepath.Join(root, "d", "f.txt"), Content: "1\n2\n3\n"}); err != nil {
		t.Fatal(err)
	}
	one, two := uint32(2), uint32(1)
	r, err := w.ReadTextFile(ReadTextFileRequest{Path: filepath.Join(root, "d", "f.txt"), Line: &one, Limit: &two})
	if err != nil || r.Content != "2\n" {
		t.Errorf("read line 2: %+v %v", r, err)
	}
	if len(recorded) != 1 || recorded[0].Type != "workspace-file" || recorded[0].Payload.(*contract.WorkspaceFilePayload).Path != "d/f.txt" {
		t.Errorf("recorded: %+v", recorded)
	}
	if _, err := w.CreateTerminal(CreateTerminalRequest{Command: "true", Cwd: &outside}); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Errorf("a terminal outside the root: %v", err)
	}
}

// FuzzMapperUpdate: any update, well-formed or not, maps without panicking, and what it maps
// to are valid contract events.
func FuzzMapperUpdate(f *testing.F) {
	for _, s := range []string{
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}`,
		`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"x"},"messageId":"m"}`,
		`{"sessionUpdate":"tool_call","toolCallId":"c1","title":"t","status":"pending","content":[{"type":"diff","path":"/a","oldText":null,"newText":"x"}]}`,
		`{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"failed","content":[{"type":"terminal","terminalId":"t"}]}`,
		`{"sessionUpdate":"plan","entries":[{"content":"a","priority":"high","status":"completed"}]}`,
		`{"sessionUpdate":"usage_update","used":1,"size":2}`,
		`{"sessionUpdate":"tool_call","toolCallId":"c1","content":5}`,
		`[]`, `null`, `{"sessionUpdate":""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := &Mapper{RunID: "run-1", Root: "/root"}
		out, err := m.Update(b)
		if err != nil {
			return
		}
		out = append(out, m.Finish(StopCancelled)...)
		for i, o := range out {
			ev := contract.Event{Contract: "AgentSessionEvent", EventID: "e", SessionID: "S-1", RunID: "run-1", IdempotencyKey: "e",
				OccurredAt: "2026-03-01T12:00:00Z", EventType: o.Type, Payload: o.Payload}
			raw, err := contract.Marshal(ev)
			if err != nil {
				t.Fatalf("out %d: %v", i, err)
			}
			if _, err := contract.CheckEvent(raw, contract.Limits{}); err != nil {
				t.Fatalf("out %d is not a valid event: %v\n%s", i, err, raw)
			}
		}
	})
}
