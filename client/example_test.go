package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"
	"os"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store/sqlite"
)

// exampleServer starts a real sessiond server on a fresh SQLite store in a temporary
// directory, as `sessiond serve` would, and returns its URL and what stops it.
func exampleServer() (url string, stop func()) {
	dir, err := os.MkdirTemp("", "sessiond-example")
	if err != nil {
		log.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), dir)
	if err != nil {
		log.Fatal(err)
	}
	svc := session.New(st, session.Options{})
	if err := svc.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
	srv := server.New(svc, server.Options{})
	ts := httptest.NewServer(srv)
	return ts.URL, func() { srv.Close(); ts.Close(); svc.Close(); st.Close(); os.RemoveAll(dir) }
}

// userMessage is a contract event: a user's message in session sid.
func userMessage(sid, id, text string) contract.Event {
	return contract.Event{Contract: "AgentSessionEvent", EventID: "ev-" + id, SessionID: sid, IdempotencyKey: "ev-" + id,
		OccurredAt: "2026-03-01T12:00:00Z", EventType: "message",
		Payload: &contract.MessagePayload{MessageID: id, Role: "user", Operation: "append",
			Parts: []contract.RawJSON{contract.RawJSON(`{"type":"text","text":"` + text + `"}`)}}}
}

// A client creates a session, appends events to its log (idempotent by key: the same event
// again is a duplicate, not a second copy) and reads the transcript folded from the log.
func Example() {
	url, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	cl := client.New(url, nil) // with authentication on: .WithKey(key)

	if _, err := cl.CreateSession(ctx, api.CreateSessionRequest{SessionID: "S-example", AgentID: "my-agent", Role: "implementer",
		Snapshot: contract.Snapshot{Mode: "work", ModelID: "my-model"}}); err != nil {
		log.Fatal(err)
	}
	ev := userMessage("S-example", "m1", "fix the build")
	for range 2 {
		res, err := cl.AppendEvents(ctx, "S-example", []contract.Event{ev}, nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.Results[0].Sequence, res.Results[0].Status)
	}
	tr, err := cl.Transcript(ctx, "S-example")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(tr.Messages), tr.Messages[0].Role, string(tr.Messages[0].Parts[0]))
	// Output:
	// 0 accepted
	// 0 duplicate
	// 1 user {"type":"text","text":"fix the build"}
}

// Errors the server answers are *api.Error values with a stable code to branch on.
func ExampleClient_GetSession_notFound() {
	url, stop := exampleServer()
	defer stop()
	_, err := client.New(url, nil).GetSession(context.Background(), "S-missing")
	var e *api.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, e.Code)
	}
	// Output:
	// 404 SESSION_NOT_FOUND
}

// Stream follows a session's log from a cursor (After: -1 is from the start) and goes on live;
// it reconnects by itself and returns when fn returns an error or ctx ends.
func ExampleClient_Stream() {
	url, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	cl := client.New(url, nil)
	if _, err := cl.CreateSession(ctx, api.CreateSessionRequest{SessionID: "S-stream", AgentID: "my-agent", Role: "implementer",
		Snapshot: contract.Snapshot{Mode: "work", ModelID: "my-model"}}); err != nil {
		log.Fatal(err)
	}
	if _, err := cl.AppendEvents(ctx, "S-stream", []contract.Event{userMessage("S-stream", "m1", "hello")}, nil); err != nil {
		log.Fatal(err)
	}
	done := errors.New("seen enough")
	err := cl.Stream(ctx, "S-stream", client.StreamOptions{After: -1}, func(e client.StreamEvent) error {
		fmt.Println(e.Sequence, e.EventType)
		if e.Sequence == 0 {
			// Events appended from now on come live on the same stream.
			go cl.AppendEvents(ctx, "S-stream", []contract.Event{userMessage("S-stream", "m2", "again")}, nil)
			return nil
		}
		return done
	})
	fmt.Println(err == done)
	// Output:
	// 0 message
	// 1 message
	// true
}
