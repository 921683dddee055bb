package storetest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sessiond/sessiond/contract"
)

// UsageTools are the tool names UsageLog calls, in the proportions it calls them (bash most).
var UsageTools = []string{"bash", "bash", "bash", "read_file", "read_file", "edit_file", "grep", "web_fetch"}

// UsageLog returns n valid events of session sid as an agent runtime writes them, for the usage
// rollup's tests and benchmarks: runs of a user message, the run's running status, tool calls
// (each a running then a terminal event: completed, or failed 1 time in 8, or denied 1 time in
// 32), a usage event (input 500–20,499 tokens, output 50–2,049, total their sum), the
// assistant's answer and the run's terminal status (completed, failed 1 time in 10, stopped 1
// in 20, with its durationMs). The events of each run are a few seconds apart, the runs start
// at random times between start and start+span; a zone offset is picked at random for each run
// (Z, +05:30, -08:00), so that a day in UTC is not the day written. The last run may be cut
// short (no terminal status) to make n. rng decides everything: the same seed gives the same log.
func UsageLog(rng *rand.Rand, sid string, n int, start time.Time, span time.Duration) []*contract.EncodedEvent {
	out := make([]*contract.EncodedEvent, 0, n)
	zones := []*time.Location{time.UTC, time.FixedZone("", 5*3600+1800), time.FixedZone("", -8*3600)}
	run := 0
	for len(out) < n {
		run++
		rid := fmt.Sprintf("run-%d", run)
		mid := fmt.Sprintf("m-%d-user", run)
		at := start.Add(time.Duration(rng.Int64N(int64(span))))
		zone := zones[rng.IntN(len(zones))]
		step := 0
		ts := func() string {
			step++
			return at.Add(time.Duration(step) * 1500 * time.Millisecond).In(zone).Format("2006-01-02T15:04:05.000Z07:00")
		}
		add := func(typ, runID, src string, p contract.Payload) bool {
			if len(out) >= n {
				return false
			}
			k := fmt.Sprintf("%s-%d", sid, len(out))
			e := &contract.Event{Contract: "AgentSessionEvent", EventID: "ev-" + k, SessionID: sid, RunID: runID, SourceMessageID: src,
				IdempotencyKey: k, OccurredAt: ts(), EventType: typ, Payload: p}
			data, err := contract.Marshal(e)
			if err != nil {
				panic(fmt.Sprintf("storetest: UsageLog: %v", err))
			}
			ev, err := contract.CheckEvent(data, contract.Limits{})
			if err != nil {
				panic(fmt.Sprintf("storetest: UsageLog: the contract rejects %s: %v", data, err))
			}
			out = append(out, ev)
			return true
		}
		text := func(s string) []json.RawMessage {
			b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
			return []json.RawMessage{b}
		}
		if !add("message", "", "", &contract.MessagePayload{MessageID: mid, Role: "user", Operation: "append", Parts: text("Fix the flaky test")}) {
			break
		}
		started := ts()
		if !add("status", rid, mid, &contract.StatusPayload{Status: "running", StartedAt: started}) {
			break
		}
		for c := range 1 + rng.IntN(4) {
			tool := UsageTools[rng.IntN(len(UsageTools))]
			id := fmt.Sprintf("%s-call-%d", rid, c)
			add("tool", rid, "", &contract.ToolPayload{ToolCallID: id, ToolName: tool, Status: "running", Input: contract.RawJSON(`{"cmd":"go test ./..."}`)})
			status := "completed"
			switch r := rng.IntN(32); {
			case r == 0:
				status = "denied"
			case r < 5:
				status = "failed"
			}
			add("tool", rid, "", &contract.ToolPayload{ToolCallID: id, ToolName: tool, Status: status, Output: contract.RawJSON(`{"exit":0}`)})
		}
		in, outT := 500+rng.Int64N(20000), 50+rng.Int64N(2000)
		tot := in + outT
		add("usage", rid, "", &contract.UsagePayload{InputTokens: &in, OutputTokens: &outT, TotalTokens: &tot})
		add("message", rid, "", &contract.MessagePayload{MessageID: fmt.Sprintf("m-%d-answer", run), Role: "assistant", Operation: "append", Parts: text("Done.")})
		p := &contract.StatusPayload{Status: "completed", StartedAt: started}
		end := ts()
		switch r := rng.IntN(20); {
		case r < 2:
			p.Status, p.FailedAt = "failed", end
		case r < 3:
			p.Status, p.StoppingRequestedAt, p.StoppedAt = "stopped", end, end
		default:
			p.CompletedAt = end
		}
		d := json.Number(fmt.Sprint(1000 + rng.IntN(120000)))
		p.DurationMs = &d
		if p.Status == "stopped" {
			// stopped is reached through stopping.
			if !add("status", rid, mid, &contract.StatusPayload{Status: "stopping", StartedAt: started, StoppingRequestedAt: end}) {
				break
			}
		}
		add("status", rid, mid, p)
	}
	return out
}
