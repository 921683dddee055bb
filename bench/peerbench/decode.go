package peerbench

import (
	"encoding/json"
	"fmt"
)

// Decoded is the structure every W5 reader decodes each event it reads into, by one rule for
// every system (DecodeEvent): what a reader that uses the events, rather than forwarding
// them, does with each. The envelope's members are fields; the payload stays JSON.
type Decoded struct {
	Contract       string          `json:"contract"`
	EventID        string          `json:"eventId"`
	SessionID      string          `json:"sessionId"`
	RunID          string          `json:"runId"`
	Sequence       int64           `json:"sequence"`
	IdempotencyKey string          `json:"idempotencyKey"`
	OccurredAt     string          `json:"occurredAt"`
	EventType      string          `json:"eventType"`
	Payload        json.RawMessage `json:"payload"`
}

// DecodeEvent decodes one event's JSON into d with encoding/json (the rule of every W5 reader)
// and checks it is an event of the benchmark's (it has an idempotency key).
func DecodeEvent(data []byte, d *Decoded) error {
	*d = Decoded{}
	if err := json.Unmarshal(data, d); err != nil {
		return fmt.Errorf("decode an event: %w", err)
	}
	if d.IdempotencyKey == "" {
		return fmt.Errorf("decode an event: no idempotencyKey in %.200s", data)
	}
	return nil
}

// decodedPage is a page of sessiond's paged read, each event decoded by DecodeEvent's rule as
// encoding/json decodes the page.
type decodedPage struct {
	Events       []Decoded `json:"events"`
	LastSequence int64     `json:"lastSequence"`
}
