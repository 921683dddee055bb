package peerbench

import (
	"context"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/benchkit"
)

// TestHTTPFloor: the floor, built and started as the benchmark does, answers every workload as
// sessiond does (W3's resent events all duplicates, W4's subscribers every event, W5 every
// event once), writes nothing to storage, and refuses a bad batch whole.
func TestHTTPFloor(t *testing.T) {
	sys, err := StartHTTPFloor()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close() })
	ctx := context.Background()
	got := map[string]float64{}
	runTiny(t, sys, func(_ string, ms []Metric) {
		for _, m := range ms {
			got[m.Row] = m.Value
		}
	})
	// (Not the server CPU rows: at these sizes they are under the clock tick that /proc counts
	// in, and may be 0.)
	for _, row := range []string{"W1 events/s", "W2 events/s", "W3 duplicates/s", "W5 events/s", "W5 whole read events/s"} {
		if got[row] <= 0 {
			t.Errorf("%s = %v, want a positive figure (all: %v)", row, got[row], got)
		}
	}
	if v, ok := got["W1 bytes written/event"]; !ok || v != 0 {
		t.Errorf("W1 bytes written/event = %v (measured: %v), want 0: the floor stores nothing", v, ok)
	}
	// A batch with an event it cannot take is refused whole.
	bad := "S-floor-refused"
	if err := sys.CreateSession(ctx, bad); err != nil {
		t.Fatal(err)
	}
	good := benchkit.NewGenerator(benchkit.RandomIDs, 0).Batch(bad, 1)[0].Data
	body := append(append([]byte{}, good...), "\n{\"eventId\":\"no-key\"}\n"...)
	if _, status, err := sys.do(ctx, "POST", "/v1/sessions/"+bad+"/events", "application/x-ndjson", body, 201, 200); err == nil || status != 400 {
		t.Errorf("a batch with an event without a key: status %d, %v; want 400", status, err)
	}
	if n, err := sys.Read(ctx, bad, 1); err == nil || n != 0 {
		t.Errorf("after a refused batch the session has %d events (%v), want none", n, err)
	}
	if _, err := sys.Append(ctx, "S-floor-unknown", benchkit.NewGenerator(benchkit.RandomIDs, 0).Batch("S-floor-unknown", 1)); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("an append to a session never created: %v, want a 404", err)
	}
}
