package session_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
)

// crashStore fails the first Append to any session but source while armed: a crash after a new
// thread was created, before its first events were stored.
type crashStore struct {
	store.Store
	source string
	armed  bool
}

var errCrash = errors.New("simulated crash")

func (c *crashStore) Append(ctx context.Context, id string, evs []*contract.EncodedEvent, opt store.AppendOptions) ([]store.AppendResult, error) {
	if c.armed && id != c.source {
		c.armed = false
		return nil, errCrash
	}
	return c.Store.Append(ctx, id, evs, opt)
}

// TestRepeatedContinuationFinishesTheThread repeats a continuation after it completed and after
// it was interrupted between creating the thread and storing its events: either way the repeat
// answers the same thread as a duplicate, and the thread holds its inherited events once.
func TestRepeatedContinuationFinishesTheThread(t *testing.T) {
	cases := []struct {
		name        string
		interrupted bool
	}{
		{"completed", false},
		{"interrupted before the events", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			b := setup(t)
			b.append(t,
				b.event(t, "message", "", `{"messageId":"u1","role":"user","operation":"append","parts":["fix the build"]}`),
				b.event(t, "status", `"runId":"r1","sourceMessageId":"u1"`, `{"status":"running","startedAt":"2026-03-01T12:00:01Z"}`),
				b.event(t, "tool", `"runId":"r1"`, `{"toolCallId":"t1","toolName":"shell","status":"completed","input":{"cmd":"make"},"output":"ok"}`),
				b.event(t, "message", `"runId":"r1"`, `{"messageId":"a1","role":"assistant","operation":"append","parts":["done"]}`))
			st := &crashStore{Store: b.st, source: b.sid, armed: c.interrupted}
			svc := session.New(st, session.Options{})
			req := &contract.ContinuationRequest{IdempotencyKey: "cont-1", SourceMessageID: "a1", SourceRunID: "r1",
				Inheritance: contract.Inheritance{Messages: "through-source-message", Attachments: "inherit", Summaries: "inherit", ToolResults: "inherit", CodeChanges: "inherit"}}

			first, err := svc.Continue(ctx, b.sid, req)
			if c.interrupted != errors.Is(err, errCrash) {
				t.Fatalf("first Continue = %v, want the crash: %v", err, c.interrupted)
			}
			for i := range 2 { // the repeat that finishes, then one more that only looks up
				res, err := svc.Continue(ctx, b.sid, req)
				if err != nil {
					t.Fatalf("repeat %d: %v", i, err)
				}
				if !res.Duplicate {
					t.Errorf("repeat %d: duplicate false, want true", i)
				}
				if first != nil && res.ThreadID != first.ThreadID {
					t.Errorf("repeat %d: thread %s, want %s", i, res.ThreadID, first.ThreadID)
				}
				evs, err := b.st.ReadEvents(ctx, res.ThreadID, -1, 100)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, e := range evs {
					got = append(got, e.EventType)
				}
				if want := []string{"message", "message", "tool"}; !slices.Equal(got, want) {
					t.Errorf("repeat %d: thread events %v, want %v (the inherited messages and tool call, once)", i, got, want)
				}
			}
		})
	}
}
