package fsck_test

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/fsck"
	"github.com/sessiond/sessiond/store"
)

// rows is an in-memory store.Inspector holding rows as a test writes them, so that the rules
// can be checked on states no driver lets a test write through SQL (a key used twice in one
// log: the drivers' unique indexes refuse it within a generation).
type rows map[string]*store.RawSession

func (r rows) InspectSessionIDs(_ context.Context, after string, limit int) ([]string, error) {
	var ids []string
	for id := range r {
		if id > after {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids[:min(limit, len(ids))], nil
}

func (r rows) InspectSession(_ context.Context, id string, fn func(*store.RawSession) error) error {
	s, ok := r[id]
	if !ok {
		return store.ErrSessionNotFound
	}
	return fn(s)
}

func (rows) InspectDatabase(context.Context) ([]string, error) { return nil, nil }
func (rows) Close() error                                      { return nil }

// rawEvent is a stored message event.
func rawEvent(sid string, seq int64, id, key string) store.StoredEvent {
	data := fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":%q,"sessionId":%q,"sequence":%d,"idempotencyKey":%q,"occurredAt":"2026-03-01T12:00:00Z","eventType":"message","payload":{"messageId":"m%d","operation":"append","parts":["hi"],"role":"user"}}`, id, sid, seq, key, seq)
	return store.StoredEvent{Sequence: seq, EventID: id, IdempotencyKey: key, EventType: "message", Data: []byte(data)}
}

// rawEvents is n message events of session sid, sequences 0 to n-1.
func rawEvents(sid string, n int) []store.StoredEvent {
	evs := make([]store.StoredEvent, n)
	for i := range evs {
		evs[i] = rawEvent(sid, int64(i), fmt.Sprintf("e%d", i), fmt.Sprintf("k%d", i))
	}
	return evs
}

// rawSession is a session's rows with events as given, with their chain hashes stored as an
// append stores them (store.ChainStored) and the head at the last one.
func rawSession(id string, last int64, events []store.StoredEvent, results ...store.RawCommandResult) *store.RawSession {
	var head []byte
	for i, h := range store.ChainEvents(store.ChainGenesis, events) {
		events[i].Hash = bytes.Clone(store.ChainStored(events[i].Sequence, &h))
		head = bytes.Clone(h[:])
	}
	return &store.RawSession{
		ID: id, Status: "running", LastSequence: last, HeadHash: head,
		Record:         []byte(fmt.Sprintf(`{"schema_version":1,"session_id":%q,"agent_id":"a","role":"implementer","status":"running","started_at":"2026-03-01T12:00:00Z"}`, id)),
		Snapshot:       []byte(`{"mode":"work","modelId":"m","capabilities":{}}`),
		CommandResults: results,
		Events: func(fn func(*store.StoredEvent) error) error {
			for i := range events {
				if err := fn(&events[i]); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// TestRules checks each rule on rows written for it: the finding's check, session, sequence
// and words.
func TestRules(t *testing.T) {
	ok := func(id string) *store.RawSession {
		return rawSession(id, 1, []store.StoredEvent{rawEvent(id, 0, "e0", "k0"), rawEvent(id, 1, "e1", "k1")})
	}
	for _, tc := range []struct {
		name  string
		sess  *store.RawSession
		check string
		seq   int64 // -1: none
		says  string
	}{
		{"clean", ok("S-1"), "", -1, ""},
		{"duplicate key", rawSession("S-1", 1, []store.StoredEvent{rawEvent("S-1", 0, "e0", "k0"), rawEvent("S-1", 1, "e1", "k0")}), fsck.CheckDuplicate, 1, `idempotencyKey "k0"`},
		{"duplicate id", rawSession("S-1", 1, []store.StoredEvent{rawEvent("S-1", 0, "e0", "k0"), rawEvent("S-1", 1, "e0", "k1")}), fsck.CheckDuplicate, 1, `eventId "e0"`},
		{"column disagrees", func() *store.RawSession {
			evs := []store.StoredEvent{rawEvent("S-1", 0, "e0", "k0")}
			evs[0].EventID = "other"
			return rawSession("S-1", 0, evs)
		}(), fsck.CheckEvent, 0, `its column says "other"`},
		{"sequence in the data", func() *store.RawSession {
			evs := []store.StoredEvent{rawEvent("S-1", 0, "e0", "k0"), rawEvent("S-1", 0, "e1", "k1")}
			evs[1].Sequence = 1
			return rawSession("S-1", 1, evs)
		}(), fsck.CheckEvent, 1, "says sequence 0 but is stored at 1"},
		{"not canonical", func() *store.RawSession {
			evs := []store.StoredEvent{rawEvent("S-1", 0, "e0", "k0")}
			evs[0].Data = []byte(strings.Replace(string(evs[0].Data), `{"contract"`, `{ "contract"`, 1))
			return rawSession("S-1", 0, evs)
		}(), fsck.CheckEvent, 0, "canonical"},
		{"event rewritten", func() *store.RawSession {
			evs := rawEvents("S-1", 3)
			s := rawSession("S-1", 2, evs)
			evs[1].Data = []byte(strings.Replace(string(evs[1].Data), `"hi"`, `"HI"`, 1)) // still a valid, canonical event
			return s
		}(), fsck.CheckChain, 2, "does not hold between sequences 0 and 2"},
		{"event rewritten in a long log", func() *store.RawSession {
			evs := rawEvents("S-1", 40)
			s := rawSession("S-1", 39, evs)
			evs[20].Data = []byte(strings.Replace(string(evs[20].Data), `"hi"`, `"HI"`, 1))
			return s
		}(), fsck.CheckChain, 31, "does not hold between sequences 16 and 31"},
		{"stored hash rewritten", func() *store.RawSession {
			evs := rawEvents("S-1", 40)
			s := rawSession("S-1", 39, evs)
			evs[15].Hash = evs[31].Hash
			return s
		}(), fsck.CheckChain, 15, "does not hold between sequences 0 and 15"},
		{"last event rewritten", func() *store.RawSession {
			evs := rawEvents("S-1", 20)
			s := rawSession("S-1", 19, evs)
			evs[19].Data = []byte(strings.Replace(string(evs[19].Data), `"hi"`, `"HI"`, 1))
			return s
		}(), fsck.CheckChain, 19, "does not hold between sequences 16 and 19"},
		{"hash missing", func() *store.RawSession {
			evs := rawEvents("S-1", 20)
			s := rawSession("S-1", 19, evs)
			evs[15].Hash = nil
			return s
		}(), fsck.CheckChain, 15, "no chain hash"},
		{"head missing", func() *store.RawSession {
			s := ok("S-1")
			s.HeadHash = nil
			return s
		}(), fsck.CheckChain, 1, "head records no chain hash"},
		{"compacted: the kept events chain to the base", func() *store.RawSession {
			evs := rawEvents("S-1", 20)
			s := rawSession("S-1", 19, evs)
			kept := evs[16:]
			s.BaseHash = []byte(strings.Repeat("x", 32)) // not event 15's hash
			s.Lifecycle = []byte(`{"compactedThrough":15,"lastArchiveName":"a.json"}`)
			s.Events = func(fn func(*store.StoredEvent) error) error {
				for i := range kept {
					if err := fn(&kept[i]); err != nil {
						return err
					}
				}
				return nil
			}
			return s
		}(), fsck.CheckChain, 19, "does not hold between sequences 16 and 19"},
		{"log past last_seq", rawSession("S-1", 0, []store.StoredEvent{rawEvent("S-1", 0, "e0", "k0"), rawEvent("S-1", 1, "e1", "k1")}), fsck.CheckSequence, 1, "goes on to 1"},
		{"record under another id", func() *store.RawSession {
			s := rawSession("S-2", -1, nil)
			s.Record = ok("S-1").Record
			return s
		}(), fsck.CheckRecord, -1, `stored under "S-2"`},
		{"status column", func() *store.RawSession { s := ok("S-1"); s.Status = "paused"; return s }(), fsck.CheckRecord, -1, `the status column says "paused"`},
		{"lifecycle compacted without archive", func() *store.RawSession {
			s := rawSession("S-1", 1, []store.StoredEvent{rawEvent("S-1", 1, "e1", "k1")})
			s.Lifecycle = []byte(`{"compactedThrough":0}`)
			return s
		}(), fsck.CheckLifecycle, -1, "no archive holds it"},
		{"command result names a missing event", rawSession("S-1", 0, []store.StoredEvent{rawEvent("S-1", 0, "e0", "k0")}, store.RawCommandResult{Key: "ck",
			Result: []byte(`{"contract":"AgentSessionCommandResult","commandId":"c1","sessionId":"S-1","idempotencyKey":"ck","outcome":"accepted","sessionStatus":"running","acceptedSequence":0,"resultEventIds":["e9"],"occurredAt":"2026-03-01T12:00:00Z"}`)}),
			fsck.CheckCommandResult, -1, `appended event "e9"`},
		{"command result under another key", rawSession("S-1", 0, []store.StoredEvent{rawEvent("S-1", 0, "e0", "k0")}, store.RawCommandResult{Key: "other",
			Result: []byte(`{"contract":"AgentSessionCommandResult","commandId":"c1","sessionId":"S-1","idempotencyKey":"ck","outcome":"accepted","sessionStatus":"running","acceptedSequence":0,"resultEventIds":["e0"],"occurredAt":"2026-03-01T12:00:00Z"}`)}),
			fsck.CheckCommandResult, -1, `stored under key "other"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := fsck.Check(context.Background(), rows{tc.sess.ID: tc.sess}, fsck.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.check == "" {
				if !rep.Clean() {
					t.Fatalf("findings on clean rows:\n%s", findings(rep))
				}
				return
			}
			if len(rep.Findings) != 1 {
				t.Fatalf("%d findings; want one %s:\n%s", len(rep.Findings), tc.check, findings(rep))
			}
			f := rep.Findings[0]
			if f.Check != tc.check || f.SessionID != tc.sess.ID || (tc.seq < 0) != (f.Sequence == nil) ||
				(f.Sequence != nil && *f.Sequence != tc.seq) || !strings.Contains(f.Message, tc.says) {
				t.Errorf("finding %s; want %s at sequence %d saying %q", f, tc.check, tc.seq, tc.says)
			}
		})
	}
}
