package benchkit

import (
	"testing"

	"github.com/sessiond/sessiond/contract"
)

// TestEventsValid: every event the generator makes is valid under the contract, of the size
// the benchmarks claim, with fresh ids and keys of the requested kind.
func TestEventsValid(t *testing.T) {
	for _, ids := range []IDs{RandomIDs, TimeOrderedIDs} {
		t.Run(ids.String(), func(t *testing.T) {
			g := NewGenerator(ids, 0)
			seen := map[string]bool{}
			total := 0
			n := 3 * len(templates)
			for i := range n {
				e := g.Next("S-pb-1-2")
				if _, err := contract.CheckEvent(e.Data, contract.Limits{}); err != nil {
					t.Fatalf("event %d (template %d) is invalid: %v\n%s", i, i%len(templates), err, e.Data)
				}
				if KeyOf(e.Data) != e.Key || FieldOf(e.Data, "eventId") != e.ID || FieldOf(e.Data, "sessionId") != "S-pb-1-2" {
					t.Fatalf("event %d: key %q, id %q, session %q in %s", i, e.Key, e.ID, FieldOf(e.Data, "sessionId"), e.Data)
				}
				if seen[e.Key] || seen[e.ID] || e.Key == e.ID {
					t.Fatalf("event %d reuses an id or key: %s", i, e.Data)
				}
				seen[e.Key], seen[e.ID] = true, true
				if v := e.Key[14]; (ids == RandomIDs) != (v == '4') {
					t.Fatalf("%s key %s has version %c", ids, e.Key, v)
				}
				total += len(e.Data)
			}
			if avg := total / n; avg < 440 || avg > 510 {
				t.Errorf("events average %d bytes; the benchmark's events are ~475", avg)
			}
		})
	}
	a, b := NewGenerator(TimeOrderedIDs, 0).Next("S"), NewGenerator(TimeOrderedIDs, 0).Next("S")
	if a.Key >= b.Key {
		t.Errorf("time-ordered keys do not sort by creation: %s then %s", a.Key, b.Key)
	}
}
