// Package storetest is the conformance suite of store.Store: every driver runs Exercise from
// its own tests, and a driver is correct when the suite passes. The suite checks each behaviour
// the store package documents (sessions, append semantics, reads, the run projection,
// Subscribe, concurrency and durability across a reopen) against a real store.
package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// Harness tells Exercise how to get stores of the driver under test.
type Harness struct {
	// Open returns a new, empty store of its own (a fresh data directory, a fresh database).
	// It is responsible for closing the store when the test ends (t.Cleanup); Close may by
	// then already have been called, by the suite or by Reopen, and must answer nil again.
	// The suite's tests run in parallel (t.Parallel), each on stores of its own: Open and
	// Reopen are called concurrently, and must be safe for that.
	Open func(t *testing.T) store.Store
	// Reopen closes old and opens the same data again, as a restarted process would. When it
	// is nil the durability tests are skipped.
	Reopen func(t *testing.T, old store.Store) store.Store
	// Second, for a driver whose stores may share their data (Capabilities
	// SharedAcrossProcesses), opens another store on the data of st, as a second instance
	// would; the tests that use it write through both. Nil skips that part.
	Second func(t *testing.T, st store.Store) store.Store
}

// Exercise runs the conformance suite against the driver h describes, as subtests of t. The
// subtests run in parallel with each other where each has a store of its own; those that
// share one store run one after the other.
func Exercise(t *testing.T, h Harness) {
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is nil")
	}
	s := &suite{h: h}
	for _, g := range []struct {
		name string
		test func(*testing.T)
	}{
		{"Capabilities", s.testCapabilities},
		{"Ready", s.testReady},
		{"Sessions", s.testSessions},
		{"Append", s.testAppend},
		{"Read", s.testRead},
		{"Runs", s.testRuns},
		{"CommandResults", s.testCommandResults},
		{"Subscribe", s.testSubscribe},
		{"Concurrency", s.testConcurrency},
		{"Durability", s.testDurability},
		{"Lifecycle", s.testLifecycle},
		{"Leases", s.testLeases},
		{"Multitask", s.testMultitask},
		{"Changes", s.testChanges},
		{"Keys", s.testKeys},
		{"Usage", s.testUsage},
		{"Close", s.testClose},
	} {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			g.test(t)
		})
	}
}

type suite struct {
	h Harness
}

// setup opens a fresh store with one empty session and returns a context that ends with the
// test (or after a minute), the store and the session's id.
func (s *suite) setup(t *testing.T) (context.Context, store.Store, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	st := s.h.Open(t)
	const id = "S-test"
	if err := st.CreateSession(ctx, NewSession(id, SessionSpec{})); err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	return ctx, st, id
}

func (s *suite) testCapabilities(t *testing.T) {
	_, st, _ := s.setup(t)
	if c := st.Capabilities(); c.Driver == "" {
		t.Errorf("Capabilities().Driver is empty; want the driver's name")
	}
}

// testReady: an open store is ready; a closed one answers ErrClosed; a cancelled context is
// not taken as ready.
func (s *suite) testReady(t *testing.T) {
	ctx, st, _ := s.setup(t)
	if err := st.Ready(ctx); err != nil {
		t.Fatalf("Ready on an open store: %v", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := st.Ready(done); err == nil {
		t.Error("Ready with a cancelled context answered nil")
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := st.Ready(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Ready after Close: %v, want ErrClosed", err)
	}
}

func (s *suite) testClose(t *testing.T) {
	ctx, st, id := s.setup(t)
	if _, err := st.Append(ctx, id, Batch(t, id, "k", 2), store.AppendOptions{}); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
	if _, err := st.Append(ctx, id, Batch(t, id, "after", 1), store.AppendOptions{}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Append after Close: %v, want ErrClosed", err)
	}
	if _, err := st.ReadEvents(ctx, id, -1, 0); !errors.Is(err, store.ErrClosed) {
		t.Errorf("ReadEvents after Close: %v, want ErrClosed", err)
	}
	if err := st.CreateSession(ctx, NewSession("S-late", SessionSpec{})); !errors.Is(err, store.ErrClosed) {
		t.Errorf("CreateSession after Close: %v, want ErrClosed", err)
	}
}

// errorAs fails the test unless err is (or wraps) a *T, and returns it.
func errorAs[T error](t *testing.T, what string, err error) T {
	t.Helper()
	var target T
	if !errors.As(err, &target) {
		t.Fatalf("%s: error %v (%T), want %T", what, err, err, target)
	}
	return target
}

// mustAppend appends and fails the test on error.
func mustAppend(t *testing.T, ctx context.Context, st store.Store, id string, evs []*contract.EncodedEvent, opts store.AppendOptions) []store.AppendResult {
	t.Helper()
	res, err := st.Append(ctx, id, evs, opts)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if len(res) != len(evs) && (opts.Interrupt == nil || len(res) < len(evs)) { // an interrupt's events come first
		t.Fatalf("Append returned %d results for %d events", len(res), len(evs))
	}
	return res
}

// lastSeq returns LastSequence and fails the test on error.
func lastSeq(t *testing.T, ctx context.Context, st store.Store, id string) int64 {
	t.Helper()
	n, err := st.LastSequence(ctx, id)
	if err != nil {
		t.Fatalf("LastSequence: %v", err)
	}
	return n
}

// readAll returns the whole log, reading page by page, and fails the test on error.
func readAll(t *testing.T, ctx context.Context, st store.Store, id string) []store.StoredEvent {
	t.Helper()
	var out []store.StoredEvent
	after := int64(-1)
	for {
		page, err := st.ReadEvents(ctx, id, after, 0)
		if err != nil {
			t.Fatalf("ReadEvents(after %d): %v", after, err)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].Sequence
	}
}

func ptr[T any](v T) *T { return &v }
