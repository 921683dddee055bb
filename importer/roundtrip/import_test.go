package roundtrip_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/importer"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/server/servertest"
	"github.com/sessiond/sessiond/wire"
)

func startServer(t testing.TB) *client.Client {
	t.Helper()
	return client.New(servertest.Start(t, server.Options{}), nil)
}

// parseAll parses every fixture of a format.
func parseAll(t testing.TB, format string) ([]*importer.Transcript, []*importer.Report) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "testdata", format, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures for %s: %v", format, err)
	}
	var all []*importer.Transcript
	var reps []*importer.Report
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		var ts []*importer.Transcript
		var rep *importer.Report
		if format == "codex" {
			ts, rep, err = importer.ParseCodex(f, name)
		} else {
			ts, rep, err = importer.ParseClaudeCode(f, name)
		}
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Accounted() {
			t.Errorf("%s: %d lines, but %d mapped + %d merged + skipped %v", name, rep.Lines, rep.Mapped, rep.Merged, rep.Skipped)
		}
		all = append(all, ts...)
		reps = append(reps, rep)
	}
	return all, reps
}

// sourceLines reads a fixture's lines as JSON objects (a line that is not one is left out).
func sourceLines(t testing.TB, name string) []map[string]any {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func write(t testing.TB, cl *client.Client, ts []*importer.Transcript) []importer.SessionResult {
	t.Helper()
	res, errs := (&importer.Writer{Client: cl}).Write(context.Background(), ts)
	for _, err := range errs {
		t.Error(err)
	}
	return res
}

func transcript(t testing.TB, cl *client.Client, id string) *wire.Transcript {
	t.Helper()
	tr, err := cl.Transcript(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func partsText(parts []contract.RawJSON) string {
	var sb strings.Builder
	for _, p := range parts {
		var b struct {
			Type, Text string
		}
		if json.Unmarshal(p, &b) == nil && b.Type == "text" {
			sb.WriteString(b.Text)
		}
	}
	return sb.String()
}

// TestImportTwiceIsAllDuplicates writes every fixture, then again: the second time every
// event is a duplicate and nothing is written.
func TestImportTwiceIsAllDuplicates(t *testing.T) {
	cl := startServer(t)
	for _, format := range importer.Formats {
		ts, _ := parseAll(t, format)
		first := write(t, cl, ts)
		again := write(t, cl, ts)
		for i, r := range again {
			if r.Accepted != 0 || r.Duplicate != r.Events || first[i].Accepted != first[i].Events || first[i].SessionID != r.SessionID {
				t.Errorf("%s: first import %+v, second %+v", format, first[i], r)
			}
		}
	}
}

// TestClaudeCodeInvariants checks the Claude Code import against the source files: fragments
// sharing message.id merged into one message whose text is theirs in order; each tool call
// with the result the file has; usage counted once per message; sidechains as continuations.
func TestClaudeCodeInvariants(t *testing.T) {
	cl := startServer(t)
	ts, _ := parseAll(t, "claude-code")
	results := write(t, cl, ts)
	target := map[string]string{}
	for i, r := range results {
		_ = i
		target[r.SessionID] = r.SessionID
	}
	files, _ := filepath.Glob("../testdata/claude-code/*.jsonl")
	for _, name := range files {
		lines := sourceLines(t, name)
		// Expected, per session of the file (sidechains apart): the text of each message.id,
		// the tool calls and results, the usage per message.id.
		type want struct {
			text    map[string]string
			calls   map[string]bool
			results map[string]bool
			input   int64
		}
		wants := map[string]*want{}
		seenUsage := map[string]bool{}
		for _, l := range lines {
			sid, _ := l["sessionId"].(string)
			if side, _ := l["isSidechain"].(bool); side || sid == "" {
				continue
			}
			w := wants[sid]
			if w == nil {
				w = &want{text: map[string]string{}, calls: map[string]bool{}, results: map[string]bool{}}
				wants[sid] = w
			}
			m, _ := l["message"].(map[string]any)
			if m == nil {
				continue
			}
			if _, ok := m["id"].(string); !ok {
				m["id"] = "assistant-" + anyString(l["uuid"])
			}
			blocks, _ := m["content"].([]any)
			for _, b := range blocks {
				bm, _ := b.(map[string]any)
				switch bm["type"] {
				case "text":
					if l["type"] == "assistant" {
						w.text[m["id"].(string)] += bm["text"].(string)
					}
				case "tool_use":
					w.calls[bm["id"].(string)] = true
				case "tool_result":
					w.results[bm["tool_use_id"].(string)] = true
				}
			}
			if u, ok := m["usage"].(map[string]any); ok && l["type"] == "assistant" && !seenUsage[m["id"].(string)] {
				seenUsage[m["id"].(string)] = true
				for _, k := range []string{"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"} {
					if v, ok := u[k].(float64); ok {
						w.input += int64(v)
					}
				}
			}
		}
		for sid, w := range wants {
			tr := transcript(t, cl, "S-claude-"+sid)
			got := map[string]string{}
			for _, m := range tr.Messages {
				if m.Role == "assistant" {
					got[m.MessageID] = partsText(m.Parts)
				}
			}
			for id, text := range w.text {
				if got[id] != text {
					t.Errorf("%s: message %s is %q, the source's fragments say %q", name, id, got[id], text)
				}
			}
			tools := map[string]contract.ToolPayload{}
			for _, tp := range tr.Tools {
				tools[tp.ToolCallID] = tp
			}
			for id := range w.calls {
				tp, ok := tools[id]
				switch {
				case !ok:
					t.Errorf("%s: tool call %s is not in the session", name, id)
				case w.results[id] && (tp.Status != "completed" && tp.Status != "failed" || len(tp.Output) == 0):
					t.Errorf("%s: tool call %s has its result in the source but is %s, output %s", name, id, tp.Status, tp.Output)
				case !w.results[id] && tp.Status != "running":
					t.Errorf("%s: tool call %s has no result in the source but is %s", name, id, tp.Status)
				}
			}
			for id := range w.results {
				if _, ok := tools[id]; !ok {
					t.Errorf("%s: tool result %s is not in the session", name, id)
				}
			}
			if tr.Usage.Total.InputTokens != w.input {
				t.Errorf("%s: input tokens %d, the source's messages sum to %d", name, tr.Usage.Total.InputTokens, w.input)
			}
		}
	}
	// The sub-agent of sidechain_integrated.jsonl is a continuation of the main session,
	// from the run that called it.
	lin, err := cl.Lineage(context.Background(), "S-claude-88a8d761-7b9a-4bf1-a8ca-c1febe6bf358")
	if err != nil {
		t.Fatal(err)
	}
	if len(lin.Descendants) != 1 {
		t.Fatalf("descendants of the main session: %+v", lin.Descendants)
	}
	child := lin.Descendants[0]
	if child.Lineage == nil || child.Lineage.SourceRunID != "run-83a7cabd-3642-45d6-ba73-9b9f843b9ab1" {
		t.Errorf("the sub-agent's lineage: %+v", child.Lineage)
	}
	if tr := transcript(t, cl, child.SessionID); len(tr.Tools) != 2 || len(tr.Messages) == 0 {
		t.Errorf("the sub-agent's session: %d tools, %d messages", len(tr.Tools), len(tr.Messages))
	}
}

// TestCodexInvariants checks the Codex import against the source: response_item and event_msg
// twins written once, every call with its output, usage equal to the last total the file
// reports, one run per turn.
func TestCodexInvariants(t *testing.T) {
	cl := startServer(t)
	ts, _ := parseAll(t, "codex")
	write(t, cl, ts)
	files, _ := filepath.Glob("../testdata/codex/*.jsonl")
	for _, name := range files {
		lines := sourceLines(t, name)
		var sid string
		agentMessages, users, calls, outputs := 0, 0, map[string]bool{}, map[string]bool{}
		var lastInput, lastOutput int64
		patches := 0
		for _, l := range lines {
			p, _ := l["payload"].(map[string]any)
			if p == nil {
				continue
			}
			switch l["type"].(string) + "/" + anyString(p["type"]) {
			case "session_meta/":
				sid = p["id"].(string)
			case "event_msg/agent_message":
				agentMessages++
			case "event_msg/user_message":
				users++
			case "response_item/function_call", "response_item/custom_tool_call":
				calls[p["call_id"].(string)] = true
				if p["name"] == "apply_patch" {
					patches++
				}
			case "response_item/function_call_output", "response_item/custom_tool_call_output":
				outputs[p["call_id"].(string)] = true
			case "event_msg/token_count":
				if info, ok := p["info"].(map[string]any); ok && info != nil {
					tot := info["total_token_usage"].(map[string]any)
					lastInput, lastOutput = int64(tot["input_tokens"].(float64)), int64(tot["output_tokens"].(float64))
				}
			}
		}
		tr := transcript(t, cl, "S-codex-"+sid)
		assistant, user := 0, 0
		for _, m := range tr.Messages {
			switch m.Role {
			case "assistant":
				assistant++
			case "user":
				user++
			}
		}
		if assistant != agentMessages || user != users {
			t.Errorf("%s: %d assistant and %d user messages, the source has %d agent_message and %d user_message (each with its response_item twin)", name, assistant, user, agentMessages, users)
		}
		tools := map[string]contract.ToolPayload{}
		for _, tp := range tr.Tools {
			tools[tp.ToolCallID] = tp
		}
		for id := range calls {
			if tp := tools[id]; outputs[id] != (tp.Status == "completed") || len(tp.Input) == 0 {
				t.Errorf("%s: call %s: %+v (output in the source: %v)", name, id, tp, outputs[id])
			}
		}
		if tr.Usage.Total.InputTokens != lastInput || tr.Usage.Total.OutputTokens != lastOutput {
			t.Errorf("%s: usage %+v, the file's last total is %d in, %d out", name, tr.Usage.Total, lastInput, lastOutput)
		}
		if patches > 0 && len(tr.Diffs) == 0 {
			t.Errorf("%s: %d apply_patch calls but no diff", name, patches)
		}
		runs, err := cl.Runs(context.Background(), "S-codex-"+sid)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != users {
			t.Errorf("%s: %d runs for %d turns", name, len(runs), users)
		}
		for _, r := range runs {
			if !contract.IsTerminal(r.Status) {
				t.Errorf("%s: run %s is left %s", name, r.RunID, r.Status)
			}
		}
	}
}

func anyString(v any) string { s, _ := v.(string); return s }

// TestClaudeCodeSubagentFiles: a session file and its sub-agents' files
// (<session>/subagents/agent-<id>.jsonl) become a session and one continuation per sub-agent,
// each branching from the run that called it; again, all duplicates.
func TestClaudeCodeSubagentFiles(t *testing.T) {
	cl := startServer(t)
	dir := "../testdata/claude-code/subagents/"
	var all []*importer.Transcript
	for _, name := range []string{dir + "55550000-0000-4000-8000-000000000001.jsonl",
		dir + "55550000-0000-4000-8000-000000000001/subagents/agent-showcol1.jsonl",
		dir + "55550000-0000-4000-8000-000000000001/subagents/agent-showcol2.jsonl"} {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		ts, rep, err := importer.ParseClaudeCode(f, name)
		f.Close()
		if err != nil || !rep.Accounted() || len(rep.Skipped) != 0 {
			t.Fatalf("%s: %+v, %v", name, rep, err)
		}
		all = append(all, ts...)
	}
	first := write(t, cl, all)
	again := write(t, cl, all)
	for i := range first {
		if first[i].Accepted != first[i].Events || again[i].Accepted != 0 || again[i].Duplicate != again[i].Events || again[i].SessionID != first[i].SessionID {
			t.Errorf("%s: first %+v, again %+v", first[i].Source, first[i], again[i])
		}
	}
	main := "S-claude-55550000-0000-4000-8000-000000000001"
	lin, err := cl.Lineage(context.Background(), main)
	if err != nil {
		t.Fatal(err)
	}
	if len(lin.Descendants) != 2 {
		t.Fatalf("descendants: %+v", lin.Descendants)
	}
	for _, d := range lin.Descendants {
		if d.Lineage == nil || d.Lineage.ForkedFromThreadID != main || d.Lineage.SourceRunID != "run-sc-u1" || d.Lineage.ForkedFromMessageID != "user-sc-u1" {
			t.Errorf("a sub-agent's lineage: %+v", d.Lineage)
		}
	}
	byAgent := map[string]string{}
	for _, r := range first {
		if r.ContinuationOf == main {
			byAgent[r.Source] = r.SessionID
		}
	}
	tr := transcript(t, cl, byAgent[main+"-agent-showcol2"])
	if len(tr.Tools) != 1 || tr.Tools[0].Status != "completed" || !strings.Contains(string(tr.Tools[0].Output), "cleanup.py") {
		t.Errorf("showcol2's tool: %+v", tr.Tools)
	}
	if len(tr.Messages) != 2 || tr.Messages[0].Role != "user" || !strings.Contains(partsText(tr.Messages[1].Parts), "Three scheduled jobs") {
		t.Errorf("showcol2's messages: %+v", tr.Messages)
	}
}

// TestWriteSplitsLargeBatches: a transcript whose events add up to more than one append may
// carry (8 MiB) is written in several appends, each event once and in order.
func TestWriteSplitsLargeBatches(t *testing.T) {
	cl := startServer(t)
	text, err := json.Marshal(strings.Repeat("x", 200<<10))
	if err != nil {
		t.Fatal(err)
	}
	tr := &importer.Transcript{SessionID: "S-large", AgentID: "a"}
	for i := range 60 { // 60 × 200 KiB: 12 MiB
		id := fmt.Sprintf("m%d", i)
		tr.Events = append(tr.Events, contract.Event{Contract: "AgentSessionEvent", EventID: "e-" + id, SessionID: "S-large",
			IdempotencyKey: "k-" + id, OccurredAt: "2026-03-01T12:00:00.000Z", EventType: "message",
			Payload: &contract.MessagePayload{MessageID: id, Role: "user", Operation: "append", Parts: []contract.RawJSON{text}}})
	}
	res := write(t, cl, []*importer.Transcript{tr})
	if len(res) != 1 || res[0].Accepted != 60 || res[0].Duplicate != 0 {
		t.Fatalf("results = %+v, want 60 accepted", res)
	}
	page, err := cl.ReadEvents(t.Context(), res[0].SessionID, -1, 100)
	if err != nil {
		t.Fatal(err)
	}
	if page.LastSequence != 59 {
		t.Fatalf("last sequence %d, want 59", page.LastSequence)
	}
}

// TestImportSubagentFilesFirst: Writer.Import given the sub-agents' files before their
// parent's (and the files read one at a time, the sessions written one at a time) holds the
// continuations until the parent's session is written, then continues it; imported alone, a
// sub-agent's file becomes a session of its own. Every line is accounted for, the results
// are in the files' order.
func TestImportSubagentFilesFirst(t *testing.T) {
	dir := "../testdata/claude-code/subagents/"
	main := dir + "55550000-0000-4000-8000-000000000001.jsonl"
	sub1 := dir + "55550000-0000-4000-8000-000000000001/subagents/agent-showcol1.jsonl"
	sub2 := dir + "55550000-0000-4000-8000-000000000001/subagents/agent-showcol2.jsonl"
	mainID := "S-claude-55550000-0000-4000-8000-000000000001"
	for _, tc := range []struct {
		name     string
		files    []string
		parentOf string // the session the sub-agents continue; "" for none
	}{
		{"sub-agents first", []string{sub1, sub2, main}, mainID},
		{"parent first", []string{main, sub2, sub1}, mainID},
		{"sub-agent alone", []string{sub1}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one file read at a time, in order
			w := &importer.Writer{Client: startServer(t), Concurrency: 1}
			var progress []int
			w.Progress = func(done, total int) { progress = append(progress, done, total) }
			for round := range 2 {
				out := w.Import(t.Context(), "claude-code", tc.files)
				if len(out) != len(tc.files) {
					t.Fatalf("%d results for %d files", len(out), len(tc.files))
				}
				for i, fi := range out {
					rep := fi.Report
					if fi.Err != nil || len(fi.Errs) != 0 || rep.Path != tc.files[i] || !rep.Accounted() || len(rep.Sessions) != 1 {
						t.Fatalf("%s: %+v, %v %v", tc.files[i], rep, fi.Err, fi.Errs)
					}
					s := rep.Sessions[0]
					sub := tc.files[i] != main
					if want := tc.parentOf; sub && s.ContinuationOf != want || !sub && s.ContinuationOf != "" {
						t.Errorf("%s: continuation of %q, want %q", tc.files[i], s.ContinuationOf, want)
					}
					if round == 0 && s.Accepted != s.Events || round == 1 && s.Duplicate != s.Events {
						t.Errorf("round %d, %s: %+v", round, tc.files[i], s)
					}
				}
			}
			if n := len(progress); n < 2 || progress[n-2] != progress[n-1] {
				t.Errorf("progress %v: does not end with every event written", progress)
			}
		})
	}
}

// TestWriteCycleOfParents: transcripts whose parents make a cycle (no first to write) are
// written as sessions of their own, not waited for forever.
func TestWriteCycleOfParents(t *testing.T) {
	cl := startServer(t)
	ev := func(sid string) []contract.Event {
		return []contract.Event{{Contract: "AgentSessionEvent", EventID: sid + ":1", SessionID: sid, IdempotencyKey: sid + ":1",
			OccurredAt: "2026-03-01T12:00:00.000Z", EventType: "message",
			Payload: &contract.MessagePayload{MessageID: "m1", Role: "user", Operation: "append", Parts: []contract.RawJSON{contract.RawJSON(`{"text":"hi","type":"text"}`)}}}}
	}
	fp := map[string]importer.ForkPoint{"x": {RunID: "r", SourceMessageID: "m1"}}
	a := &importer.Transcript{SessionID: "S-cycle-a", AgentID: "a", Parent: &importer.Parent{SessionID: "S-cycle-b", AgentID: "x"}, Forks: fp, Events: ev("S-cycle-a")}
	b := &importer.Transcript{SessionID: "S-cycle-b", AgentID: "a", Parent: &importer.Parent{SessionID: "S-cycle-a", AgentID: "x"}, Forks: fp, Events: ev("S-cycle-b")}
	res := write(t, cl, []*importer.Transcript{a, b})
	for i, r := range res {
		if r.Accepted != 1 || r.ContinuationOf != "" || r.SessionID != r.Source {
			t.Errorf("%d: %+v", i, r)
		}
	}
}
