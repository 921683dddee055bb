package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// maxGroup is the most one-statement appends (direct.go) committed in one transaction.
	maxGroup = 32
	// maxGroupedEvents is the largest batch committed in a group: a larger one runs on its
	// own, at once, since its statement's fixed costs are already shared by its events and
	// waiting for a group would only delay it.
	maxGroupedEvents = 8
)

// grouper commits concurrent one-statement appends together: several sessions' appends in one
// transaction, one round trip and one flush of the WAL (group commit across sessions, as the
// SQLite driver's writer does). An append that finds no group running leads one: it runs what
// is queued then, itself included, and goes on with what queued meanwhile, until the queue is
// empty (handing that over to a goroutine once its own append is answered); at most
// maxLeaders groups run at once (each on a connection of its own: a quarter of the pool), the
// appends that arrive meanwhile wait for the next. A lone append runs as before, as a
// statement of its own, and so does a batch of more than maxGroupedEvents events.
//
// A group is BEGIN, the appends' statements and COMMIT, pipelined. Each statement locks its own
// session's row (SKIP LOCKED) and reads in a snapshot of its own, so it decides as it would
// alone; its rows answer it once COMMIT has succeeded: nothing is acknowledged before it is
// durable. When a statement fails (a key committed after its snapshot: the unique index), the
// transaction rolls back whole and every append of the group whose statement wrote (or
// failed) takes the locking path, which decides again under the lock (an answer that wrote
// nothing, a duplicate say, holds: it is its snapshot's); when the connection fails, every append gets the error and is
// retried with its idempotency keys (Append).
type grouper struct {
	s          *Store
	maxLeaders int

	mu      sync.Mutex
	queue   []*directCall
	leaders int

	grouped atomic.Int64 // appends committed in a group of more than one, for tests
	calls   atomic.Int64 // one-statement appends run, for tests
}

// do runs c, in a group when others are queued, and returns its answer.
func (g *grouper) do(c *directCall) (appendOutcome, error, bool, error) {
	if len(c.events) > maxGroupedEvents {
		g.run([]*directCall{c})
		return c.out, c.final, c.ok, c.err
	}
	c.done = make(chan struct{})
	g.mu.Lock()
	g.queue = append(g.queue, c)
	lead := g.leaders < g.maxLeaders
	if lead {
		g.leaders++
	}
	g.mu.Unlock()
	if lead {
		g.lead(c)
	}
	<-c.done
	return c.out, c.final, c.ok, c.err
}

// lead runs groups until the queue is empty. Once own (the leader's own append, nil for none)
// has its answer, the leader hands what is left to a goroutine and returns: its caller does
// not wait for the others' appends.
func (g *grouper) lead(own *directCall) {
	for {
		g.mu.Lock()
		n := min(len(g.queue), maxGroup)
		if n == 0 {
			g.leaders--
			g.mu.Unlock()
			return
		}
		calls := make([]*directCall, n)
		copy(calls, g.queue)
		g.queue = append(g.queue[:0], g.queue[n:]...)
		g.mu.Unlock()
		g.run(calls)
		mine := false
		for _, c := range calls {
			mine = mine || c == own
			close(c.done)
		}
		if mine {
			g.mu.Lock()
			if len(g.queue) == 0 {
				g.leaders--
				g.mu.Unlock()
				return
			}
			g.mu.Unlock()
			go g.lead(nil)
			return
		}
	}
}

// run runs calls, one statement or a group, and sets their answers.
func (g *grouper) run(calls []*directCall) {
	g.calls.Add(int64(len(calls)))
	timeout := groupTimeout // a group of small appends that never wait for a lock (hosts.go)
	if len(calls) == 1 && len(calls[0].events) > maxGroupedEvents {
		timeout = writeTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if len(calls) == 1 {
		c := calls[0]
		if len(c.events) > maxGroupedEvents && g.s.wireDirect() {
			g.s.runWire(ctx, c) // parameters encoded in one pass (directwire.go)
			return
		}
		rows, _ := g.s.pool.Query(ctx, c.q, c.args...)
		c.answer(rows)
		return
	}
	fail := func(err error) {
		for _, c := range calls {
			c.out, c.final, c.ok, c.err = appendOutcome{}, nil, false, err
		}
	}
	conn, err := g.s.pool.Acquire(ctx)
	if err != nil {
		fail(fmt.Errorf("acquire a connection: %w", err))
		return
	}
	defer conn.Release()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	for _, c := range calls {
		b.Queue(c.q, c.args...)
	}
	b.Queue("COMMIT")
	br := conn.SendBatch(ctx, b)
	_, beginErr := br.Exec()
	failed := false // a statement failed on the server: the ones after it, COMMIT included, did not run
	for _, c := range calls {
		rows, _ := br.Query()
		c.answer(rows)
		failed = failed || c.failed
	}
	tag, commitErr := br.Exec()
	if err := br.Close(); commitErr == nil {
		commitErr = err
	}
	switch {
	case commitErr == nil && tag.String() == "COMMIT":
		g.grouped.Add(int64(len(calls)))
		return // every answer stands: what they wrote is committed
	case beginErr == nil && (failed || commitErr == nil):
		// Rolled back (or never committed): nothing the group wrote stands. An answer
		// that wrote nothing holds (its snapshot's); every other append decides again on
		// the locking path.
		for _, c := range calls {
			if c.err != nil || c.out.added > 0 {
				c.out, c.final, c.ok, c.err = appendOutcome{}, nil, false, nil
			}
		}
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _ = conn.Exec(rctx, "ROLLBACK") // the connection is in the aborted transaction
		rcancel()
	default:
		// Not committed, or (the connection lost during COMMIT) not known: a new try is
		// safe either way.
		if commitErr == nil {
			commitErr = fmt.Errorf("COMMIT answered %q", tag.String())
		}
		fail(fmt.Errorf("commit a group of appends: %w", inDoubt(commitErr)))
	}
}
