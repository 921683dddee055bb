package importer

import (
	"bytes"
	"os"
	"reflect"
	"testing"

	"github.com/sessiond/sessiond/contract"
)

// checkParse: whatever the input, a parse accounts for every line and writes only valid
// events, with ids unique within each session, which appendEvent encodes as contract.Marshal
// does.
func checkParse(t *testing.T, ts []*Transcript, rep *Report) {
	t.Helper()
	if !rep.Accounted() {
		t.Fatalf("lines not accounted for: %+v", rep)
	}
	for _, tr := range ts {
		seen := map[string]bool{}
		for _, e := range tr.Events {
			if seen[e.EventID] {
				t.Fatalf("event id %s twice in %s", e.EventID, tr.SessionID)
			}
			seen[e.EventID] = true
			raw, err := contract.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := contract.CheckEvent(raw, contract.Limits{}); err != nil {
				t.Fatalf("invalid event: %v\n%s", err, raw)
			}
			if b, ok := appendEvent(nil, &e); ok && !bytes.Equal(b, raw) {
				t.Fatalf("appendEvent:\n%s\ncontract.Marshal:\n%s", b, raw)
			}
		}
	}
}

func seeds(f *testing.F, files ...string) {
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		// Each line alone, too: small seeds mutate better.
		for _, l := range bytes.Split(b, []byte("\n")) {
			if len(l) < 4096 {
				f.Add(l)
			}
		}
	}
}

func FuzzParseClaudeCode(f *testing.F) {
	seeds(f, "testdata/claude-code/sidechain_integrated.jsonl", "testdata/claude-code/edge_cases.jsonl", "testdata/claude-code/sample_session.jsonl")
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, rep, err := ParseClaudeCode(bytes.NewReader(b), "f.jsonl")
		if err != nil {
			return // a line over the scanner's limit
		}
		checkParse(t, ts, rep)
	})
}

func FuzzParseCodex(f *testing.F) {
	seeds(f, "testdata/codex/rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl")
	f.Add([]byte(`{"timestamp":"x","type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":1}}}}`))
	f.Add([]byte(`{"type":"response_item","payload":{"type":"custom_tool_call","name":"apply_patch","input":"*** Begin Patch\n*** Update File: a\n*** Move to: b\n@@\n-x\n+y\n*** End Patch","call_id":"c"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, rep, err := ParseCodex(bytes.NewReader(b), "rollout-x.jsonl")
		if err != nil {
			return
		}
		checkParse(t, ts, rep)
	})
}

// FuzzDecodeCCScan: a line that decodeCCScan decodes decodes to the same line, and the same
// content blocks, as decodeCCRaw (encoding/json) and blocks give.
func FuzzDecodeCCScan(f *testing.F) {
	seeds(f, "testdata/claude-code/sidechain_integrated.jsonl", "testdata/claude-code/edge_cases.jsonl",
		"testdata/claude-code/sample_session.jsonl", "testdata/claude-code/representative_messages.jsonl")
	for _, l := range scanCases {
		f.Add([]byte(l.line))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkScan(t, b)
	})
}

// checkScan fails t when decodeCCScan decodes line b otherwise than decodeCCRaw and blocks do.
func checkScan(t *testing.T, b []byte) {
	t.Helper()
	got, ok := decodeCCScan(b)
	if !ok {
		return
	}
	want, ok := decodeCCRaw(b)
	if !ok {
		t.Fatalf("decodeCCScan decodes a line decodeCCRaw does not: %s", b)
	}
	if !reflect.DeepEqual(got.ccHead, want.ccHead) || got.ToolAgent != want.ToolAgent {
		t.Fatalf("line %s:\ndecodeCCScan %+v\ndecodeCCRaw %+v", b, got, want)
	}
	if (got.Message == nil) != (want.Message == nil) {
		t.Fatalf("line %s: message %v, want %v", b, got.Message, want.Message)
	}
	if got.Message == nil {
		return
	}
	g, w := *got.Message, *want.Message
	if g.ID != w.ID || g.Role != w.Role || g.Model != w.Model || !reflect.DeepEqual(g.Usage, w.Usage) {
		t.Fatalf("line %s: message %+v, want %+v", b, g, w)
	}
	if !g.decoded && !bytes.Equal(g.Content, w.Content) {
		t.Fatalf("line %s: raw content %s, want %s", b, g.Content, w.Content)
	}
	gb, gok := g.contentBlocks()
	wb, wok := w.contentBlocks()
	if gok != wok || !reflect.DeepEqual(gb, wb) {
		t.Fatalf("line %s: blocks %+v %v, want %+v %v", b, gb, gok, wb, wok)
	}
}
