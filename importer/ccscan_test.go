package importer

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// scanCases are lines decodeCCScan must decode itself (scan), or leave to decodeCCRaw; either
// way checkScan compares what it decodes with encoding/json's reading.
var scanCases = []struct {
	line string
	scan bool
}{
	{`{"type":"user","message":{"role":"user","content":"a string"}}`, true},
	{`{"type":"user","message":{"role":"user","content" : "spaced \"string\" \u00e9\ud83d\ude00"}}`, true},
	{` {"type":"user","message":{"role":"user","content":[{"type":"image","source":{"type":"base64","data":"AA=="}}]}} `, true},
	{`{"type":"user","message":{"role":"user","content":[]}}`, true},
	{`{"type":"user","message":{"role":"user","content":null}}`, true},
	{`{"type":"user","message":{"role":"user","content":{"type":"text"}}}`, true},
	{`{"type":"user","message":{"role":"user","content":[null,{"type":"text","text":5}]}}`, true},
	{`{"type":"user","message":{"role":"user","content":[null,{"type":"text","text":"x","input":null,"is_error":null}]}}`, true},
	{`{"type":"user","message":{"role":"user","content":[{"type":"text","Text":"case in a block"}]}}`, true},
	{`{"type":"user","message":{"role":"user","content":[1]}}`, true},
	{`{"type":"user","message":null,"isSidechain":null,"isMeta":null,"agentId":null,"uuid":null}`, true},
	{`{"type":"user","message":"text"}`, false},
	{`{"type":"user","message":[]}`, false},
	{`{"type":5}`, false},
	{`{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"n","input":{"a":[1,2.5e-3,-0,true,false,null,"\n"]}}],"usage":{"input_tokens":3,"output_tokens":-0}}}`, true},
	{`{"type":"assistant","message":{"usage":{"input_tokens":3.0}}}`, false},
	{`{"type":"assistant","message":{"usage":{"input_tokens":"3"}}}`, false},
	{`{"type":"assistant","message":{"usage":{"input_tokens":99999999999999999999}}}`, false},
	{`{"type":"assistant","message":{"usage":null}}`, true},
	{`{"type":"user","toolUseResult":{"agentId":"a"},"message":{"content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"x"}],"is_error":true}]}}`, true},
	{`{"type":"user","toolUseResult":"a string","message":{"content":[{"type":"text","text":"x"}]}}`, true},
	{`{"type":"user","toolUseResult":{"agentId":7},"message":{"content":[{"type":"text","text":"x"}]}}`, true},
	{`{"type":"user","toolUseResult":[{"agentId":"a"}]}`, true},
	{`{"type":"user","Message":{"Content":[{"Type":"text","TEXT":"case"}]}}`, false},
	{`{"type":"user","message":{"role":"user","Content":[{"type":"text"}]}}`, false},
	{`{"type":"user","\u006dessage":{"content":[]}}`, false},
	{`{"type":"user","meſsage":{"content":[]}}`, false},
	{`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"a"}],"content":[{"type":"tool_use","id":"b"}]}}`, false},
	{`{"type":"user","message":{"content":[]},"message":{"content":[]}}`, false},
	{`{"type":"user","message":{"role":"user","content":[{"type":"text","text":"first"}],"Content":[{"type":"tool_result","tool_use_id":"t"}]}}`, false},
	{`{"type":"user","message":{"role":"user","content":[{"type":"text","text":"first"}],"\u0063ontent":[{"type":"tool_result","tool_use_id":"t"}]}}`, false},
	{`{"type":"user","text":"\ud800"}`, true}, // a lone surrogate in a value it skips
	{`{"type":"user","summary":"\ud800"}`, false},
	{`{"type":"user","summary":"\udc00\ud800"}`, false},
	{"{\"type\":\"user\",\"summary\":\"\xff\"}", false},
	{`{"type":"user"} x`, false},
	{`{"type":"user",}`, false},
	{`{"type":"user" "uuid":"u"}`, false},
	{`{"type":"user","n":01}`, false},
	{`{"type":"user","n":1.}`, false},
	{`{"type":"user","n":[1,]}`, false},
	{`{"type":"user","n":"tab	inside"}`, false},
	{`[]`, false},
	{`{"type":"user","n":` + string(bytes.Repeat([]byte("["), 600)) + string(bytes.Repeat([]byte("]"), 600)) + `}`, false},
}

// TestDecodeCCScan: the lines above are decoded by decodeCCScan or left to decodeCCRaw as
// listed, and what it decodes is what encoding/json reads (checkScan).
func TestDecodeCCScan(t *testing.T) {
	for _, c := range scanCases {
		if _, ok := decodeCCScan([]byte(c.line)); ok != c.scan {
			t.Errorf("decodeCCScan(%s): ok %v, want %v", c.line, ok, c.scan)
		}
		checkScan(t, []byte(c.line))
	}
}

// TestDecodeCCScanFixtures: every line of the real transcripts is decoded in one pass, as
// encoding/json reads it, but those that are not objects and those whose message is not an
// object (edge_cases.jsonl has them).
func TestDecodeCCScanFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/claude-code/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatal(files, err)
	}
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range bytes.Split(src, []byte("\n")) {
			if len(bytes.TrimSpace(l)) == 0 {
				continue
			}
			if _, ok := decodeCCScan(l); !ok && !oddLine(l) {
				t.Errorf("%s:%d: declined: %.200s", name, i+1, l)
			}
			checkScan(t, l)
		}
	}
}

// oddLine reports whether line is not a JSON object, or has a message that is neither an
// object nor null.
func oddLine(line []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return true
	}
	msg := bytes.TrimSpace(m["message"])
	return len(msg) > 0 && msg[0] != '{' && string(msg) != "null"
}

// BenchmarkDecodeCCLine decodes the lines of a real Claude Code session: decodeCCLine (one
// pass, decodeCCScan) side by side with decodeCCRaw (encoding/json, what it falls back to).
func BenchmarkDecodeCCLine(b *testing.B) {
	src, err := os.ReadFile("testdata/claude-code/representative_messages.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(src), []byte("\n"))
	for _, d := range []struct {
		name   string
		decode func([]byte) (ccLine, bool)
	}{{"decodeCCLine", decodeCCLine}, {"decodeCCRaw", decodeCCRaw}} {
		b.Run(d.name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				for _, l := range lines {
					if _, ok := d.decode(l); !ok {
						b.Fatalf("not decoded: %s", l)
					}
				}
			}
		})
	}
}
