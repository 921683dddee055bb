package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/sqlite"
)

// TestExportHeadIsTheStoresHead: an export of a whole log, written from the events as the store
// serves them, ends its chain at the head the store recorded in the commit of its last append,
// and verifies (40 events: the store's stored hashes at 15 and 31 and its head, the export's
// own head).
func TestExportHeadIsTheStoresHead(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateSession(ctx, &store.Session{
		Record:   contract.SessionRecord{SchemaVersion: 1, SessionID: "S-x", AgentID: "a", Role: "implementer", Status: "running", StartedAt: "2026-03-01T12:00:00Z"},
		Snapshot: contract.Snapshot{Mode: "work", ModelID: "m"},
	}); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		doc := fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"e%d","sessionId":"S-x","sequence":0,"idempotencyKey":"k%d","occurredAt":"2026-03-01T12:00:00Z","eventType":"message","payload":{"messageId":"m%d","role":"user","operation":"append","parts":["hi"]}}`, i, i, i)
		ev, err := contract.CheckEvent([]byte(doc), contract.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(ctx, "S-x", []*contract.EncodedEvent{ev}, store.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := st.ReadEvents(ctx, "S-x", -1, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cw := newChainWriter(&out, "S-x", nil)
	for _, e := range evs {
		if err := cw.event(e.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := cw.close(); err != nil {
		t.Fatal(err)
	}
	in, err := sqlite.OpenInspector(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var head []byte
	if err := in.InspectSession(ctx, "S-x", func(raw *store.RawSession) error { head = raw.HeadHash; return nil }); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n"))
	var tr exportTrailer
	if err := json.Unmarshal(lines[len(lines)-1], &tr); err != nil {
		t.Fatal(err)
	}
	if tr.Chain.Head != hex.EncodeToString(head) || tr.Chain.Events != 40 || tr.Chain.Last != 39 {
		t.Errorf("the export's trailer %+v; the store's head is %x", tr.Chain, head)
	}
	if _, res, err := verifyExport("export", bytes.NewReader(out.Bytes())); err != nil || !res.Valid {
		t.Errorf("verify: %+v, %v", res, err)
	}
}
