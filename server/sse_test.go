package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
)

// everyKind appends one valid event of each of the contract's event kinds to session sid, in
// the contract's order (sequence i is contract.EventTypes[i]). The events are the first valid
// sample of each kind in the contract's conformance sample.
func (b *bundle) everyKind(t testing.TB, sid string) {
	t.Helper()
	f, err := os.Open("../contract/testdata/events.sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	byKind := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Valid bool                       `json:"valid"`
			Event map[string]json.RawMessage `json:"event"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		var kind string
		json.Unmarshal(line.Event["eventType"], &kind)
		if !line.Valid || byKind[kind] != "" {
			continue
		}
		line.Event["sessionId"], _ = json.Marshal(sid)
		line.Event["eventId"], _ = json.Marshal("e-" + kind)
		line.Event["idempotencyKey"], _ = json.Marshal("k-" + kind)
		ev, _ := json.Marshal(line.Event)
		byKind[kind] = string(ev)
	}
	var nd strings.Builder
	for _, kind := range contract.EventTypes {
		if byKind[kind] == "" {
			t.Fatalf("the contract's sample has no valid %s event", kind)
		}
		nd.WriteString(byKind[kind] + "\n")
	}
	if resp := b.do(t, "POST", "/v1/sessions/"+sid+"/events", "application/x-ndjson", nd.String()); resp.status != 201 {
		t.Fatalf("append every kind: %d %s", resp.status, resp.body)
	}
}

// TestStreamBlockNames checks the names of the stream's blocks for every event kind: each is
// "ev.<eventType>", never a name EventSource uses itself (message, error, open), and the
// stream's final message is "stream.error"; the Go client sees every kind, the contract's own
// error event included, as an event.
func TestStreamBlockNames(t *testing.T) {
	b := setup(t, server.Options{})
	b.createSession(t, "S-kinds")
	b.everyKind(t, "S-kinds")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []string
	err := b.cl.Stream(ctx, "S-kinds", client.StreamOptions{After: -1}, func(e client.StreamEvent) error {
		if e.Sequence != int64(len(got)) || !bytes.Contains(e.Data, []byte(`"eventType":"`+e.EventType+`"`)) {
			t.Errorf("event %d: %+v", len(got), e)
		}
		got = append(got, e.EventType)
		if len(got) == len(contract.EventTypes) {
			return errDone
		}
		return nil
	})
	if err != errDone || strings.Join(got, " ") != strings.Join(contract.EventTypes, " ") {
		t.Fatalf("client saw %v (%v), want every kind: %v", got, err, contract.EventTypes)
	}

	s := openStream(t, b, "/v1/sessions/S-kinds/events/stream", nil)
	for i, kind := range contract.EventTypes {
		e, err := s.nextEvent()
		if err != nil || e.id != strconv.Itoa(i) || e.event != "ev."+kind {
			t.Fatalf("block %d: %+v %v, want event: ev.%s", i, e, err, kind)
		}
	}
	b.srv.Close()
	e, err := s.nextEvent()
	if err != nil || e.event != "stream.error" || e.id != "" || !strings.Contains(e.data, `"code":"SHUTTING_DOWN"`) {
		t.Fatalf("final block %+v %v, want event: stream.error without an id", e, err)
	}
}
