package session

import (
	"encoding/json"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// decodeEvent decodes a stored event for the projections (the transcript fold and the view).
// It gives the same [contract.Event] as json.Unmarshal into one, in one pass: the payload is
// decoded together with the envelope, into the payload type the store's event type names,
// where [contract.Event.UnmarshalJSON] decodes the envelope first and the payload again after.
// Each event is then scanned twice (validity, decoding) instead of six times; decoding is
// most of what folding a log costs.
func decodeEvent(se store.StoredEvent) (contract.Event, error) {
	type plain contract.Event // no UnmarshalJSON: the fields, with Payload as preset here
	if p := contract.NewPayload(se.EventType); p != nil {
		e := plain{Payload: p}
		if err := json.Unmarshal(se.Data, &e); err != nil {
			return contract.Event{}, err
		}
		if e.EventType == se.EventType && e.Payload != nil {
			return contract.Event(e), nil
		}
	}
	// The stored event type is missing or disagrees with the data, or the payload is null:
	// decode as contract.Event does, which lets the data decide.
	var e contract.Event
	err := json.Unmarshal(se.Data, &e)
	return e, err
}

// foldEvent is what the transcript fold reads of an event: its run and its payload. Decoding
// only these (the other envelope fields are skipped, not copied) spares the fold five string
// allocations per event.
type foldEvent struct {
	RunID     string           `json:"runId"`
	EventType string           `json:"eventType"`
	Payload   contract.Payload `json:"payload"`
}

// decodeFoldEvent decodes a stored event's run and payload: the same run id and payload as
// [decodeEvent] gives.
func decodeFoldEvent(se store.StoredEvent) (foldEvent, error) {
	if p := contract.NewPayload(se.EventType); p != nil {
		e := foldEvent{Payload: p}
		if err := json.Unmarshal(se.Data, &e); err != nil {
			return foldEvent{}, err
		}
		if e.EventType == se.EventType && e.Payload != nil {
			return e, nil
		}
	}
	ce, err := decodeEvent(store.StoredEvent{Data: se.Data})
	return foldEvent{RunID: ce.RunID, EventType: ce.EventType, Payload: ce.Payload}, err
}
