package peerbench

import (
	"testing"

	"github.com/sessiond/sessiond/internal/benchkit"
)

// TestDecodeEvent: every event of the benchmark decodes with its fields; what is not JSON, or
// is JSON without an idempotency key, is an error.
func TestDecodeEvent(t *testing.T) {
	var d Decoded
	for _, e := range benchkit.NewGenerator(benchkit.RandomIDs, 0).Batch("S-decode", 40) {
		if err := DecodeEvent(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.EventID != e.ID || d.IdempotencyKey != e.Key || d.SessionID != "S-decode" || d.EventType == "" || len(d.Payload) == 0 {
			t.Fatalf("decoded %+v from %s", d, e.Data)
		}
	}
	for _, bad := range []string{`{"eventId":"x"}`, `{"idempotencyKey":`, `[]`} {
		if err := DecodeEvent([]byte(bad), &d); err == nil {
			t.Errorf("DecodeEvent(%s) = nil, want an error", bad)
		}
	}
}

// BenchmarkDecodeEvent is the client's work per event in W5: DecodeEvent of the benchmark's
// events, one core.
//
//	go -C bench test ./peerbench/ -run '^$' -bench DecodeEvent -cpu 1 -count 5
func BenchmarkDecodeEvent(b *testing.B) {
	evs := benchkit.NewGenerator(benchkit.RandomIDs, 0).Batch("S-decode", 64)
	var d Decoded
	b.ReportAllocs()
	for i := range b.N {
		if err := DecodeEvent(evs[i%len(evs)].Data, &d); err != nil {
			b.Fatal(err)
		}
	}
}
