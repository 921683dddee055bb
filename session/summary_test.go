package session

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sessiond/sessiond/store"
)

// TestSummaryFoldSummarizesLikeTheFullFold: the archive's fold, which skips the event types
// the summary does not read, gives the same summary as the full fold, for logs mixing every
// kind of event the summary reads with others.
func TestSummaryFoldSummarizesLikeTheFullFold(t *testing.T) {
	kinds := []struct{ eventType, payload string }{
		{"plan", `{"planId":"p1","status":"running","steps":[{"id":"s%d","title":"step","status":"running"}]}`},
		{"task", `{"taskId":"t%d","title":"task","status":"running"}`},
		{"task", `{"taskId":"t%d","title":"task","status":"completed"}`},
		{"approval", `{"approvalId":"ap%d","status":"requested","title":"ok?"}`},
		{"approval", `{"approvalId":"ap%d","status":"approved","title":"ok?"}`},
		{"summary", `{"summaryId":"sum%d","runId":"r1","text":"so far","highlights":[],"pendingItems":[],"status":"completed"}`},
		{"summary", `{"summaryId":"sum%d","runId":"r1","text":"draft","highlights":[],"pendingItems":[],"status":"streaming"}`},
		{"usage", `{"inputTokens":%d,"outputTokens":2,"totalTokens":12}`},
		{"terminal", `{"terminalId":"term%d","stream":"stdout","chunk":"x\n"}`},
		{"message", `{"messageId":"m%d","role":"assistant","operation":"append","parts":["hi"]}`},
		{"reasoning", `{"reasoningId":"th%d","text":"hm","status":"streaming"}`},
		{"error", `{"code":"WARN","message":"w%d","retryable":true}`},
	}
	for seed := int64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			full, sum := NewFold("S"), newSummaryFold("S")
			for seq := int64(0); seq < 2000; seq++ {
				k := kinds[rng.Intn(len(kinds))]
				run := ""
				if rng.Intn(2) == 0 {
					run = `,"runId":"r1"`
				}
				data := fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"e%d","sessionId":"S","sequence":%d,"idempotencyKey":"k%d","occurredAt":"2026-03-01T12:00:00Z","eventType":%q%s,"payload":%s}`,
					seq, seq, seq, k.eventType, run, fmt.Sprintf(k.payload, rng.Intn(5)))
				se := store.StoredEvent{Sequence: seq, EventType: k.eventType, Data: []byte(data)}
				if err := full.Apply(se); err != nil {
					t.Fatal(err)
				}
				if err := sum.Apply(se); err != nil {
					t.Fatal(err)
				}
			}
			a, b := full.Transcript(), sum.Transcript()
			if diff := cmp.Diff(summarize(&a, 3), summarize(&b, 3)); diff != "" {
				t.Errorf("summaries differ (-full +summary fold):\n%s", diff)
			}
		})
	}
}
