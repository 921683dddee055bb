package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/contract"
)

// TestScanUsage: the rollup's scan of an event reads what encoding/json reads, over canonical
// events of the three kinds it counts (with large, nested and escaped inputs and outputs) and
// odd but valid forms (whitespace, escapes, nested objects that hold the same member names,
// numbers written 1e2); an escaped key makes it decline, and encoding/json decides.
func TestScanUsage(t *testing.T) {
	var docs [][]byte
	n := int64(42)
	for i, p := range []contract.Payload{
		&contract.ToolPayload{ToolCallID: "c1", ToolName: "bash", Status: "completed", Input: contract.RawJSON(`{"status":"failed","toolName":"x","cmd":"echo \"}{\""}`), Output: contract.RawJSON(`[{"a":[1,2,{"b":"]"}]},"` + strings.Repeat("x", 5000) + `"]`)},
		&contract.ToolPayload{ToolCallID: "c2", ToolName: "we\"ird\\name\u00e9", Status: "failed"},
		&contract.UsagePayload{InputTokens: &n, OutputTokens: &n},
		&contract.StatusPayload{Status: "completed", CompletedAt: "2026-03-01T10:00:00Z", DurationMs: func() *json.Number { d := json.Number("1500"); return &d }()},
	} {
		run := ""
		if _, ok := p.(*contract.StatusPayload); ok {
			run = "r1"
		}
		e := &contract.Event{Contract: "AgentSessionEvent", EventID: fmt.Sprint("e", i), SessionID: "S-1", RunID: run, IdempotencyKey: fmt.Sprint("k", i),
			OccurredAt: "2026-03-01T10:00:00.123+02:00", EventType: p.EventType(), Payload: p}
		if run != "" {
			e.SourceMessageID = "m1"
		}
		data, err := contract.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, data)
	}
	for _, d := range []string{
		`{"occurredAt":"2026-03-01T10:00Z","runId":"r\"1","payload":{"toolName":"b\u0061sh \"x\"","status":"failed","input":{"status":"completed","toolName":"no","payload":{"x":[1,{"y":"}"}]}}}}`,
		` { "payload" : { "inputTokens" : 1e2 , "outputTokens":1.0, "totalTokens": 0 } , "occurredAt" : "2026-03-01T10:00+05:30" } `,
		`{"occurredAt":"2026-03-01T10:00Z","payload":{"status":"completed","durationMs":12,"detail":"a \\ b"},"runId":"r1"}`,
		`{"occurredAt":"2026-03-01T10:00Z","payload":{}}`,
		`{"occurr\u0065dAt":"2026-03-01T10:00Z","payload":{"st\u0061tus":"failed"}}`,
	} {
		docs = append(docs, []byte(d))
	}
	scanned := 0
	for _, d := range docs {
		var want, got usageFields
		if err := json.Unmarshal(d, &want); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		var probe usageFields
		if scanUsage(d, &probe) {
			scanned++
		}
		if err := decodeUsage(d, &got); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if got != want {
			t.Errorf("%s:\n scan %+v\n json %+v", d, got, want)
		}
	}
	if scanned < len(docs)-2 {
		t.Errorf("the scan read %d of %d documents itself; want all but the escaped ones", scanned, len(docs))
	}
}
