package postgres

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Listener timing. Variables so that tests can shorten them before Open.
var (
	// pollEvery is how often the listener polls for commits it was not notified of.
	pollEvery = time.Second
	// Reconnection backoff: doubled after each failed attempt, with jitter.
	minBackoff = 50 * time.Millisecond
	maxBackoff = 2 * time.Second
	// connectTimeout bounds connecting and each statement of the listener: a poll that takes
	// longer counts as a dead connection.
	connectTimeout = 10 * time.Second
)

// testHookReconnect, when set, runs before each reconnection attempt (tests hold the listener
// disconnected with it).
var testHookReconnect atomic.Pointer[func()]

// qPoll returns the statement's snapshot and the sessions whose last append is visible in it
// but was not in the snapshot $1 (the previous poll's): every append that committed between
// the two polls is among them (a session appears once, with its latest sequence). Transactions
// below a snapshot's xmin are all visible in it, so the index on commit_xid limits the scan to
// recent appends. The LEFT JOIN returns the snapshot even when no session moved.
const qPoll = `SELECT pg_current_snapshot()::text, s.id, h.last_seq
	FROM (SELECT 1) AS one
	LEFT JOIN (session_heads AS h JOIN sessions AS s USING (sk)) ON h.commit_xid >= pg_snapshot_xmin($1::pg_snapshot)
		AND NOT pg_visible_in_snapshot(h.commit_xid, $1::pg_snapshot)
	ORDER BY h.commit_xid`

// listener owns one dedicated connection that LISTENs on the store's channel and reports the
// commits it hears of to the store's subscribers; see the package documentation for how it
// makes sure that a lost connection never loses a commit.
type listener struct {
	s      *Store
	cfg    *pgx.ConnConfig
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	// watermark is the snapshot (pg_snapshot as text) of the last poll: every append visible
	// in it has been reported. Only run touches it.
	watermark string

	// Counters and the backend pid, for tests and monitoring.
	pid         atomic.Uint32
	reconnects  atomic.Int64 // connections replaced after a failure
	established atomic.Int64 // connections that listened and caught up
	up          atomic.Bool  // a connection listens now
	caughtUp    atomic.Int64 // commits found by polls
	polls       atomic.Int64
}

func newListener(s *Store, cfg *pgx.ConnConfig) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	return &listener{s: s, cfg: cfg, ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// start runs the listener and waits until it listens and has polled once; it fails if the
// first connection fails.
func (l *listener) start(ctx context.Context) error {
	ready := make(chan error, 1)
	go l.run(ready)
	select {
	case err := <-ready:
		if err != nil {
			l.stop()
		}
		return err
	case <-ctx.Done():
		l.stop()
		return ctx.Err()
	}
}

// stop ends the listener and waits for its goroutine; safe to call more than once.
func (l *listener) stop() {
	l.cancel()
	<-l.done
}

// run keeps a listening connection until stop, reconnecting with backoff when it fails.
func (l *listener) run(ready chan<- error) {
	defer close(l.done)
	first := true
	backoff := minBackoff
	failures := 0 // failed connections since the last one that listened
	confirmed := func() {
		if first {
			first = false
			ready <- nil
		} else {
			l.s.log.Info("postgres store: the commit listener is listening again; missed commits were caught up", "channel", l.s.channel, "failedAttempts", failures)
		}
		backoff, failures = minBackoff, 0
	}
	for {
		err := l.session(confirmed)
		if l.ctx.Err() != nil {
			if first {
				ready <- l.ctx.Err()
			}
			return
		}
		if first {
			ready <- err
			return
		}
		// A lost connection: reconnect; the catch-up covers what was missed.
		failures++
		d := backoff/2 + mrand.N(backoff/2+1)
		l.s.log.Warn("postgres store: the commit listener lost its connection; reconnecting", "channel", l.s.channel, "err", err, "retryIn", d, "failedAttempts", failures)
		t := time.NewTimer(d)
		select {
		case <-l.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
		if h := testHookReconnect.Load(); h != nil {
			(*h)()
		}
		l.reconnects.Add(1)
	}
}

// session runs one connection: LISTEN, poll (which reports what was missed while no connection
// listened), then report notifications and poll every pollEvery until the connection fails (an
// error) or the listener stops (nil).
func (l *listener) session(confirmed func()) error {
	cfg := l.cfg.Copy()
	l.s.hosts.order(&cfg.Config) // the primary first, failed servers last (hosts.go)
	cctx, cancel := context.WithTimeout(l.ctx, connectTimeout)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	cancel()
	if err != nil {
		return fmt.Errorf("listener: connect: %w", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn.Close(ctx)
		cancel()
	}()
	l.pid.Store(conn.PgConn().PID())
	qctx, qcancel := context.WithTimeout(l.ctx, connectTimeout)
	_, err = conn.Exec(qctx, "LISTEN "+pgx.Identifier{l.s.channel}.Sanitize()+"; LISTEN "+pgx.Identifier{l.s.changeChannel}.Sanitize())
	qcancel()
	if err != nil {
		return fmt.Errorf("listener: listen: %w", err)
	}
	// From here on every notification reaches this connection; the poll reports the appends
	// that committed while no connection listened.
	if err := l.poll(conn); err != nil {
		return err
	}
	l.established.Add(1)
	l.up.Store(true)
	defer l.up.Store(false)
	confirmed()
	next := time.Now().Add(pollEvery)
	for {
		if !time.Now().Before(next) {
			if err := l.poll(conn); err != nil {
				return err
			}
			next = time.Now().Add(pollEvery)
			continue
		}
		wctx, cancel := context.WithDeadline(l.ctx, next)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil {
			if l.ctx.Err() != nil {
				return nil
			}
			if pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) {
				continue
			}
			return fmt.Errorf("listener: wait for notifications: %w", err)
		}
		if n.Channel == l.s.changeChannel {
			if seq, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
				l.s.deliverChange(seq)
			}
			continue
		}
		kind, rest, _ := strings.Cut(n.Payload, " ")
		if kind == "r" {
			// A lease released (notify.go), by any instance, this one's included (its
			// callbacks then hear of its own release twice: a wake-up is idempotent).
			l.s.deliverRelease(rest)
			continue
		}
		if kind != "c" && kind != "k" {
			continue // not ours
		}
		seqStr, who, ok := strings.Cut(rest, " ")
		last, err := strconv.ParseInt(seqStr, 10, 64)
		if !ok || err != nil {
			continue
		}
		id := who
		if kind == "k" {
			sk, err := strconv.ParseInt(who, 10, 64)
			if err != nil {
				continue
			}
			ctx, cancel := context.WithTimeout(l.ctx, connectTimeout)
			err = conn.QueryRow(ctx, `SELECT id FROM sessions WHERE sk = $1`, sk).Scan(&id)
			cancel()
			if err != nil {
				return fmt.Errorf("listener: look up session %d: %w", sk, err)
			}
		}
		l.s.deliver(id, last)
	}
}

// poll reports the sessions whose appends committed since the previous poll and moves the
// watermark to this poll's snapshot. The first poll only takes the snapshot: nobody
// subscribed before Open.
func (l *listener) poll(conn *pgx.Conn) error {
	ctx, cancel := context.WithTimeout(l.ctx, connectTimeout)
	defer cancel()
	l.s.kickChanges() // numbers the changes of an instance that died before its kick
	if err := l.pollChanges(ctx, conn); err != nil {
		return err
	}
	if l.watermark == "" {
		if err := conn.QueryRow(ctx, `SELECT pg_current_snapshot()::text`).Scan(&l.watermark); err != nil {
			return fmt.Errorf("listener: poll: %w", err)
		}
		return nil
	}
	rows, err := conn.Query(ctx, qPoll, l.watermark)
	if err != nil {
		return fmt.Errorf("listener: poll: %w", err)
	}
	type commit struct {
		id   string
		last int64
	}
	var (
		cs   []commit
		snap string
	)
	for rows.Next() {
		var id *string
		var last *int64
		if err := rows.Scan(&snap, &id, &last); err != nil {
			rows.Close()
			return fmt.Errorf("listener: poll: %w", err)
		}
		if id != nil && last != nil {
			cs = append(cs, commit{*id, *last})
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("listener: poll: %w", err)
	}
	for _, c := range cs {
		l.s.deliver(c.id, c.last)
	}
	l.watermark = snap
	l.polls.Add(1)
	l.caughtUp.Add(int64(len(cs)))
	return nil
}
