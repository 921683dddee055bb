package contract

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
)

// TestConformanceSample checks every labelled line of the shared sample.
func TestConformanceSample(t *testing.T) {
	f, err := os.Open("testdata/events.sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		var c struct {
			ID    string          `json:"id"`
			Valid bool            `json:"valid"`
			Why   string          `json:"why"`
			Event json.RawMessage `json:"event"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		n++
		err := Validate(KindEvent, c.Event, Limits{})
		if got := err == nil; got != c.Valid {
			t.Errorf("%s (%s): valid=%v, want %v; err=%v", c.ID, c.Why, got, c.Valid, err)
		}
		if c.Valid {
			ev, err := DecodeEvent(c.Event, Limits{})
			if err != nil {
				t.Errorf("%s: decode: %v", c.ID, err)
				continue
			}
			out, err := Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			var a, b any
			json.Unmarshal(c.Event, &a)
			json.Unmarshal(out, &b)
			if ja, jb := mustJSON(a), mustJSON(b); ja != jb {
				t.Errorf("%s: round trip changed the event:\n in: %s\nout: %s", c.ID, ja, jb)
			}
		}
	}
	if n == 0 {
		t.Fatal("no sample lines read")
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }
