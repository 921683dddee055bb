package session

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// TestDecodeEventEqualsUnmarshal checks that the projections' one-pass decodings give what
// json.Unmarshal into a contract.Event gives, for every valid sample event of the contract
// (all 17 event types), whether the store's event type is right, missing or wrong.
func TestDecodeEventEqualsUnmarshal(t *testing.T) {
	f, err := os.Open("../contract/testdata/events.sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	types := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var sample struct {
			ID    string          `json:"id"`
			Valid bool            `json:"valid"`
			Event json.RawMessage `json:"event"`
		}
		if err := json.Unmarshal(sc.Bytes(), &sample); err != nil {
			t.Fatal(err)
		}
		if !sample.Valid {
			continue
		}
		var want contract.Event
		if err := json.Unmarshal(sample.Event, &want); err != nil {
			t.Fatalf("%s: %v", sample.ID, err)
		}
		types[want.EventType] = true
		for _, c := range []struct{ name, storedType string }{
			{"stored type", want.EventType},
			{"no stored type", ""},
			{"wrong stored type", "usage"},
			{"unknown stored type", "nonsense"},
		} {
			got, err := decodeEvent(store.StoredEvent{Sequence: want.Sequence, EventType: c.storedType, Data: sample.Event})
			if err != nil {
				t.Errorf("%s (%s): %v", sample.ID, c.name, err)
				continue
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s (%s): decodeEvent differs from json.Unmarshal (-want +got):\n%s", sample.ID, c.name, diff)
			}
			fe, err := decodeFoldEvent(store.StoredEvent{Sequence: want.Sequence, EventType: c.storedType, Data: sample.Event})
			if err != nil {
				t.Errorf("%s (%s): decodeFoldEvent: %v", sample.ID, c.name, err)
				continue
			}
			if diff := cmp.Diff(foldEvent{RunID: want.RunID, EventType: want.EventType, Payload: want.Payload}, fe); diff != "" {
				t.Errorf("%s (%s): decodeFoldEvent differs from json.Unmarshal (-want +got):\n%s", sample.ID, c.name, diff)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(types) != len(contract.EventTypes) {
		t.Errorf("the samples cover %d event types, want all %d", len(types), len(contract.EventTypes))
	}
}

// TestDecodeEventRefusesWhatUnmarshalRefuses: data that json.Unmarshal into a contract.Event
// refuses is refused here too.
func TestDecodeEventRefusesWhatUnmarshalRefuses(t *testing.T) {
	cases := []struct{ name, storedType, data string }{
		{"truncated", "terminal", `{"eventType":"terminal","payload":{"terminalId":"t"`},
		{"payload of the wrong shape", "terminal", `{"eventType":"terminal","payload":{"terminalId":7}}`},
		{"unknown event type", "", `{"eventType":"nonsense","payload":{}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var ce contract.Event
			if json.Unmarshal([]byte(c.data), &ce) == nil {
				t.Fatalf("json.Unmarshal accepts %s; the case tests nothing", c.data)
			}
			if _, err := decodeEvent(store.StoredEvent{EventType: c.storedType, Data: []byte(c.data)}); err == nil {
				t.Errorf("decodeEvent accepts %s", c.data)
			}
			if _, err := decodeFoldEvent(store.StoredEvent{EventType: c.storedType, Data: []byte(c.data)}); err == nil {
				t.Errorf("decodeFoldEvent accepts %s", c.data)
			}
		})
	}
}
