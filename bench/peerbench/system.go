package peerbench

import (
	"context"

	"github.com/sessiond/sessiond/internal/benchkit"
)

// System is one system under test, running and reachable. Every method may be called from
// several goroutines at once.
type System interface {
	// Name is the system's column in the table.
	Name() string
	// CreateSession prepares session sid (a no-op for the peers that need none).
	CreateSession(ctx context.Context, sid string) error
	// Append appends evs to session sid atomically and idempotently (an event whose key the
	// session has is a duplicate and is not stored again), each new event taking the next
	// sequence of the session; it returns once the system has acknowledged the batch, which it
	// does only after the batch is durable. It returns how many events were duplicates.
	Append(ctx context.Context, sid string, evs []benchkit.Event) (dups int, err error)
	// Read reads session sid from its start until it has n events, and returns how many it
	// read (more than n is an error of the system).
	Read(ctx context.Context, sid string, n int) (int, error)
	// Subscribe follows session sid live from its current end, calling deliver with each new
	// event's JSON in order from one goroutine, until ctx ends; ready is closed once the
	// subscription is in place (events appended after it are delivered).
	Subscribe(ctx context.Context, sid string, deliver func(data []byte)) (ready <-chan struct{}, err error)
	// Servers returns the processes whose storage writes and CPU count as the system's (none
	// for a server in the benchmark's own process).
	Servers() []*benchkit.Proc
	// Close stops the system and removes its files.
	Close() error
}

// WholeReader is a System with a read of a whole session in one streamed answer (sessiond's
// GET /v1/sessions/{id}/events/export, and the floor's). W5 measures it beside Read.
type WholeReader interface {
	// ReadWhole reads session sid from its start to its end in one answer, decoding every
	// event (DecodeEvent), and returns how many it read (not n is an error).
	ReadWhole(ctx context.Context, sid string, n int) (int, error)
}
