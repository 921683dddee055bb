package server

import (
	"fmt"
	"testing"

	"github.com/sessiond/sessiond/store"
)

// TestRingBridgeEvents: the ring keeps one decoding cell per event, aligned with its blocks
// through appends, trimming and a restart after a gap; every bridge stream gets the same
// decoded event for a sequence, decoded from that event's bytes.
func TestRingBridgeEvents(t *testing.T) {
	h := newHub(8)
	tp := h.join("S")
	ev := func(seq int64) store.StoredEvent {
		return store.StoredEvent{Sequence: seq, EventType: "message", RunID: "r",
			Data: fmt.Appendf(nil, `{"eventType":"message","runId":"r","payload":{"messageId":"m%d","role":"assistant","parts":["x"]}}`, seq)}
	}
	publish := func(seqs ...int64) {
		c := store.Commit{SessionID: "S", LastSequence: seqs[len(seqs)-1]}
		for _, s := range seqs {
			c.Events = append(c.Events, ev(s))
		}
		h.publish(c)
	}
	check := func(name string, first, last int64) {
		t.Helper()
		v := tp.view.Load()
		if len(v.decoded) != len(v.ends) || v.first != first || v.first+int64(len(v.ends))-1 != last {
			t.Fatalf("%s: ring %d..%d with %d cells, want %d..%d", name, v.first, v.first+int64(len(v.ends))-1, len(v.decoded), first, last)
		}
		evs, ok := v.events(first-1, 100, nil)
		if !ok || len(evs) != int(last-first+1) {
			t.Fatalf("%s: events: %v %d", name, ok, len(evs))
		}
		for _, se := range evs {
			a, err := v.bridgeEvent(se)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := v.bridgeEvent(se)
			if a != b || a.ID != fmt.Sprintf("m%d", se.Sequence) {
				t.Fatalf("%s: event %d: %p %p %q", name, se.Sequence, a, b, a.ID)
			}
		}
	}
	publish(0, 1, 2)
	check("first commit", 0, 2)
	for s := int64(3); s < 12; s++ {
		publish(s)
	}
	check("trimmed", 6, 11) // past 8 events, the excess and a quarter of the ring go at once
	publish(20, 21)
	check("after a gap", 20, 21)
}
