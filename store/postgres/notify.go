package postgres

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// qNotify sends one notification per pending commit, in one statement whose transaction
// commits without waiting for its WAL flush: a notification is a wake-up, not data, and the
// poll (see the package documentation) covers one that is lost.
const qNotify = `SELECT count(pg_notify($1, p)) FROM set_config('synchronous_commit', 'off', true), unnest($2::text[]) AS p`

// notifier sends the NOTIFY of this Store's commits after they committed. It batches: the
// commits that arrive while one batch is being sent go out together in the next, one
// notification per session with its highest sequence. Its single goroutine sends batches one
// after the other, so one session's notifications leave in sequence order.
type notifier struct {
	s       *Store
	mu      sync.Mutex
	pending map[string]pendingCommit
	// released are the sessions whose lease releases are to be told (releasePayload).
	released map[string]struct{}
	kick     chan struct{}
	stopc    chan struct{}
	done     chan struct{}

	sent   atomic.Int64 // notifications sent, for tests
	failed atomic.Int64 // batches that could not be sent, for tests and monitoring
}

type pendingCommit struct{ sk, last int64 }

// testHookDropNotify, when set, makes the notifier drop its batches (tests: a lost NOTIFY).
var testHookDropNotify atomic.Bool

func newNotifier(s *Store) *notifier {
	n := &notifier{s: s, pending: map[string]pendingCommit{}, released: map[string]struct{}{}, kick: make(chan struct{}, 1), stopc: make(chan struct{}), done: make(chan struct{})}
	go n.run()
	return n
}

// add queues the notification that session sid's log reaches last.
func (n *notifier) add(sid string, sk, last int64) {
	n.mu.Lock()
	if p, ok := n.pending[sid]; !ok || p.last < last {
		n.pending[sid] = pendingCommit{sk, last}
	}
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// addRelease queues the notification that a lease of session sid was released.
func (n *notifier) addRelease(sid string) {
	n.mu.Lock()
	n.released[sid] = struct{}{}
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// releasePayload is the notification of a lease release of session sid: "r <sid>", or "r "
// when the id is too long for a notification.
func releasePayload(sid string) string {
	if p := "r " + sid; len(p) <= maxNotifyPayload {
		return p
	}
	return "r "
}

// stop sends what is pending (best effort, for at most a few seconds) and ends the goroutine.
func (n *notifier) stop() {
	close(n.stopc)
	<-n.done
}

func (n *notifier) run() {
	defer close(n.done)
	for {
		select {
		case <-n.kick:
			n.flush(context.Background())
		case <-n.stopc:
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			n.flush(ctx)
			cancel()
			return
		}
	}
}

// flush sends every pending notification in one transaction. On failure it keeps them for the
// next try, unless a newer commit of the session replaced them.
func (n *notifier) flush(ctx context.Context) {
	n.mu.Lock()
	batch, released := n.pending, n.released
	n.pending = make(map[string]pendingCommit, len(batch))
	n.released = make(map[string]struct{}, len(released))
	n.mu.Unlock()
	if len(batch) == 0 && len(released) == 0 {
		return
	}
	if testHookDropNotify.Load() {
		return
	}
	payloads := make([]string, 0, len(batch)+len(released))
	for sid, p := range batch {
		payloads = append(payloads, commitPayload(sid, p.sk, p.last))
	}
	for sid := range released {
		payloads = append(payloads, releasePayload(sid))
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := func() error {
		conn, err := n.s.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		_, err = conn.Exec(ctx, qNotify, n.s.channel, payloads)
		return err
	}()
	if err == nil {
		n.sent.Add(int64(len(payloads)))
		return
	}
	n.failed.Add(1)
	// Keep them for the next try, which the next commit or the retry below triggers; the
	// listeners' poll reports them meanwhile.
	n.mu.Lock()
	for sid, p := range batch {
		if q, ok := n.pending[sid]; !ok || q.last < p.last {
			n.pending[sid] = p
		}
	}
	for sid := range released {
		n.released[sid] = struct{}{}
	}
	n.mu.Unlock()
	select {
	case <-n.stopc:
	case <-time.After(100 * time.Millisecond):
		select {
		case n.kick <- struct{}{}:
		default:
		}
	}
}
