package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
)

// The importers keep time order: an imported session's events are in the order their content
// happened in the file, and occurredAt never goes backwards within a run. Checked over
// generated files of both formats: text, thinking and tool calls interleaved in one message
// (Claude Code writes one block per line, sharing the message's id), results, sidechains.

// genFile is a generated session file and, per session id suffix ("" for the main
// conversation, the agent id for a sidechain), the content in the order it happened.
type genFile struct {
	lines []string
	want  map[string][]string
}

func (g *genFile) line(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	g.lines = append(g.lines, string(b))
}

// genClaudeCode generates a Claude Code file: turns of the main conversation and of up to two
// sub-agents' sidechains interleaved, each turn a prompt, then assistant messages of 1–4
// lines with text, thinking and tool_use blocks in any order, then the tools' results.
func genClaudeCode(r *rand.Rand) *genFile {
	g := &genFile{want: map[string][]string{}}
	clock := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	n := 0
	tick := func() string {
		clock = clock.Add(time.Duration(1+r.IntN(3000)) * time.Millisecond)
		return clock.Format(time.RFC3339Nano)
	}
	head := func(typ, agent string) map[string]any {
		n++
		h := map[string]any{"type": typ, "uuid": fmt.Sprintf("u%d", n), "sessionId": "s1", "timestamp": tick(), "isSidechain": agent != ""}
		if agent != "" {
			h["agentId"] = agent
		}
		return h
	}
	for turn := range 2 + r.IntN(4) {
		agent := ""
		if turn > 0 && r.IntN(3) == 0 {
			agent = []string{"a1", "a2"}[r.IntN(2)]
		}
		l := head("user", agent)
		prompt := fmt.Sprintf("prompt %d", turn)
		l["message"] = map[string]any{"role": "user", "content": prompt}
		g.line(l)
		g.want[agent] = append(g.want[agent], "user:"+prompt)
		for m := range 1 + r.IntN(3) {
			msgID := fmt.Sprintf("msg_%d_%d", turn, m)
			var tools []string
			for f := range 1 + r.IntN(4) {
				var blocks []map[string]any
				for b := range 1 + r.IntN(2) {
					key := fmt.Sprintf("%d-%d-%d-%d", turn, m, f, b)
					switch r.IntN(3) {
					case 0:
						blocks = append(blocks, map[string]any{"type": "text", "text": "text " + key})
						g.want[agent] = append(g.want[agent], "text:text "+key)
					case 1:
						blocks = append(blocks, map[string]any{"type": "thinking", "thinking": "think " + key})
						g.want[agent] = append(g.want[agent], "think:think "+key)
					default:
						id := "tu_" + key
						blocks = append(blocks, map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{"command": "ls"}})
						g.want[agent] = append(g.want[agent], "tool:"+id)
						tools = append(tools, id)
					}
				}
				l := head("assistant", agent)
				l["message"] = map[string]any{"id": msgID, "role": "assistant", "model": "claude-test", "content": blocks,
					"usage": map[string]any{"input_tokens": 3, "output_tokens": 5}}
				g.line(l)
			}
			for _, id := range tools {
				l := head("user", agent)
				l["message"] = map[string]any{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": id, "content": "ok", "is_error": r.IntN(4) == 0}}}
				g.line(l)
				g.want[agent] = append(g.want[agent], "result:"+id)
			}
		}
	}
	return g
}

// genCodex generates a Codex rollout: turns of a user message, then reasoning, assistant
// messages, function calls with their outputs and web searches in any order.
func genCodex(r *rand.Rand) *genFile {
	g := &genFile{want: map[string][]string{}}
	clock := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	item := func(p map[string]any) {
		clock = clock.Add(time.Duration(1+r.IntN(3000)) * time.Millisecond)
		g.line(map[string]any{"timestamp": clock.Format(time.RFC3339Nano), "type": "response_item", "payload": p})
	}
	g.line(map[string]any{"timestamp": clock.Format(time.RFC3339Nano), "type": "session_meta", "payload": map[string]any{"id": "c1", "cwd": "/p"}})
	for turn := range 2 + r.IntN(4) {
		prompt := fmt.Sprintf("prompt %d", turn)
		item(map[string]any{"type": "message", "role": "user", "content": []map[string]any{{"type": "input_text", "text": prompt}}})
		g.want[""] = append(g.want[""], "user:"+prompt)
		var open []string
		for k := range 1 + r.IntN(6) {
			key := fmt.Sprintf("%d-%d", turn, k)
			switch r.IntN(5) {
			case 0:
				item(map[string]any{"type": "message", "role": "assistant", "content": []map[string]any{{"type": "output_text", "text": "text " + key}}})
				g.want[""] = append(g.want[""], "text:text "+key)
			case 1:
				item(map[string]any{"type": "reasoning", "summary": []map[string]any{{"type": "summary_text", "text": "think " + key}}})
				g.want[""] = append(g.want[""], "think:think "+key)
			case 2:
				id := "call_" + key
				item(map[string]any{"type": "function_call", "name": "shell", "arguments": `{"cmd":"ls"}`, "call_id": id})
				g.want[""] = append(g.want[""], "tool:"+id)
				open = append(open, id)
			case 3:
				id := "ws_" + key
				item(map[string]any{"type": "web_search_call", "id": id, "status": "completed", "action": map[string]any{"type": "search", "query": "q " + key}})
				g.want[""] = append(g.want[""], "tool:"+id, "result:"+id)
			default:
				if len(open) > 0 {
					id := open[0]
					open = open[1:]
					item(map[string]any{"type": "function_call_output", "call_id": id, "output": "ok"})
					g.want[""] = append(g.want[""], "result:"+id)
				}
			}
		}
	}
	return g
}

// contentOrder lists a transcript's content as the generators name it, in event order.
func contentOrder(t *testing.T, tr *Transcript) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range tr.Events {
		switch p := e.Payload.(type) {
		case *contract.MessagePayload:
			for _, part := range p.Parts {
				var tp struct{ Text string }
				if err := json.Unmarshal(part, &tp); err != nil {
					t.Fatalf("part %s: %v", part, err)
				}
				kind := "text:"
				if p.Role == "user" {
					kind = "user:"
				}
				out = append(out, kind+tp.Text)
			}
		case *contract.ReasoningPayload:
			out = append(out, "think:"+p.Text)
		case *contract.ToolPayload:
			if !seen[p.ToolCallID] {
				seen[p.ToolCallID] = true
				out = append(out, "tool:"+p.ToolCallID)
			}
			if p.Status == "completed" || p.Status == "failed" {
				out = append(out, "result:"+p.ToolCallID)
			}
		}
	}
	return out
}

// checkTimeOrder fails when an event's occurredAt is before the previous one's of its run.
func checkTimeOrder(t *testing.T, file string, tr *Transcript) {
	t.Helper()
	last := map[string]time.Time{}
	for _, e := range tr.Events {
		if e.RunID == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, e.OccurredAt)
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := last[e.RunID]; ok && at.Before(prev) {
			t.Fatalf("%s: event %s (%s) of run %s at %s, after an event at %s\n%s", tr.SessionID, e.EventID, e.EventType, e.RunID, e.OccurredAt, prev.Format(time.RFC3339Nano), file)
		}
		last[e.RunID] = at
	}
}

func TestImportKeepsContentAndTimeOrder(t *testing.T) {
	for _, format := range []struct {
		name  string
		gen   func(*rand.Rand) *genFile
		parse func(file []byte) ([]*Transcript, *Report, error)
		// stream names the generator's stream of a transcript.
		stream func(tr *Transcript) string
	}{
		{"claude-code", genClaudeCode,
			func(b []byte) ([]*Transcript, *Report, error) { return ParseClaudeCode(bytes.NewReader(b), "s1.jsonl") },
			func(tr *Transcript) string { _, agent, _ := strings.Cut(tr.SessionID, "-agent-"); return agent }},
		{"codex", genCodex,
			func(b []byte) ([]*Transcript, *Report, error) {
				return ParseCodex(bytes.NewReader(b), "rollout-c1.jsonl")
			},
			func(*Transcript) string { return "" }},
	} {
		t.Run(format.name, func(t *testing.T) {
			for seed := range uint64(300) {
				g := format.gen(rand.New(rand.NewPCG(seed, 33)))
				file := strings.Join(g.lines, "\n") + "\n"
				ts, rep, err := format.parse([]byte(file))
				if err != nil {
					t.Fatal(err)
				}
				checkParse(t, ts, rep)
				var streams []string
				for _, tr := range ts {
					stream := format.stream(tr)
					streams = append(streams, stream)
					if got, want := contentOrder(t, tr), g.want[stream]; !slices.Equal(got, want) {
						t.Fatalf("seed %d, %s: content in event order\n%q\nwant the file's order\n%q\nfile:\n%s", seed, tr.SessionID, got, want, file)
					}
					checkTimeOrder(t, file, tr)
				}
				if len(streams) != len(g.want) {
					t.Fatalf("seed %d: sessions %q, want one per stream of %d", seed, streams, len(g.want))
				}
			}
		})
	}
}
