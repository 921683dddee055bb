package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	// markerEvery is how often the listener sends itself a marker (see the package
	// documentation) when no marker is outstanding.
	markerEvery = time.Second
	// markerWait is how long a marker may take to come back before the listener's connection
	// counts as dead and is replaced.
	markerWait = 5 * time.Second
	// Reconnection backoff: doubled after each failed attempt, with jitter.
	minBackoff = 50 * time.Millisecond
	maxBackoff = 5 * time.Second
	// connectTimeout bounds connecting and each statement of the listener.
	connectTimeout = 10 * time.Second
)

// testHookReconnect, when set, runs before each reconnection attempt (tests hold the listener
// disconnected with it).
var testHookReconnect atomic.Pointer[func()]

// qCatchUp finds the sessions whose last append committed after the snapshot $1 was taken, or
// was in progress then: exactly the appends whose notifications the listener may have missed.
// Transactions below the snapshot's xmin are all visible in it, so the index on commit_xid
// limits the scan to recent appends.
const qCatchUp = `SELECT id, last_seq FROM sessions
	WHERE commit_xid >= pg_snapshot_xmin($1::pg_snapshot)
	  AND NOT pg_visible_in_snapshot(commit_xid, $1::pg_snapshot)
	ORDER BY commit_xid`

// listener owns one dedicated connection that LISTENs on the store's channel and reports the
// commits it hears of to the store's subscribers; see the package documentation for how it
// makes sure that a lost connection never loses a commit.
type listener struct {
	s      *Store
	cfg    *pgx.ConnConfig
	token  string // tells this listener's markers from other instances'
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	// watermark is a snapshot (pg_snapshot as text) such that every append visible in it
	// has been reported; "" before the first marker came back. Only run touches it.
	watermark string

	// Counters and the backend pid, for tests and monitoring.
	pid         atomic.Uint32
	reconnects  atomic.Int64 // connections replaced after a failure
	established atomic.Int64 // connections that listened and caught up
	caughtUp    atomic.Int64 // commits reported by catch-up queries
}

func newListener(s *Store, cfg *pgx.ConnConfig) *listener {
	var b [8]byte
	_, _ = rand.Read(b[:])
	ctx, cancel := context.WithCancel(context.Background())
	return &listener{s: s, cfg: cfg, token: hex.EncodeToString(b[:]), ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// start runs the listener and waits until it listens and has its first watermark; it fails if
// the first connection fails.
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
	confirmed := func() {
		if first {
			first = false
			ready <- nil
		}
		backoff = minBackoff
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
		_ = err // a lost connection: reconnect; the catch-up covers what was missed
		d := backoff/2 + mrand.N(backoff/2+1)
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

// session runs one connection: LISTEN, catch up on what the previous connection may have
// missed, then report notifications and keep the watermark fresh until the connection fails
// (an error) or the listener stops (nil).
func (l *listener) session(confirmed func()) error {
	cctx, cancel := context.WithTimeout(l.ctx, connectTimeout)
	conn, err := pgx.ConnectConfig(cctx, l.cfg)
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
	_, err = conn.Exec(qctx, "LISTEN "+pgx.Identifier{l.s.channel}.Sanitize())
	qcancel()
	if err != nil {
		return fmt.Errorf("listener: listen: %w", err)
	}
	// From here on every commit is notified to this connection; the appends that committed
	// while no connection listened are the ones not visible in the watermark.
	if l.watermark != "" {
		if err := l.catchUp(conn); err != nil {
			return err
		}
	}
	l.established.Add(1)

	var (
		markerN    int
		pending    bool // a marker is on its way
		pendingSn  string
		sentAt     time.Time
		confirmAt  time.Time
		sendMarker = func() error {
			markerN++
			ctx, cancel := context.WithTimeout(l.ctx, connectTimeout)
			defer cancel()
			err := conn.QueryRow(ctx, `SELECT pg_current_snapshot()::text, pg_notify($1, $2)`,
				l.s.channel, "m "+l.token+" "+strconv.Itoa(markerN)).Scan(&pendingSn, nil)
			if err != nil {
				return fmt.Errorf("listener: send marker: %w", err)
			}
			pending, sentAt = true, time.Now()
			return nil
		}
	)
	if err := sendMarker(); err != nil {
		return err
	}
	for {
		now := time.Now()
		var due time.Time
		if pending {
			due = sentAt.Add(markerWait)
		} else {
			due = confirmAt.Add(markerEvery)
		}
		if !now.Before(due) {
			if pending {
				return fmt.Errorf("listener: marker %d not back after %v: connection presumed dead", markerN, markerWait)
			}
			if err := sendMarker(); err != nil {
				return err
			}
			continue
		}
		wctx, cancel := context.WithDeadline(l.ctx, due)
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
		kind, rest, _ := strings.Cut(n.Payload, " ")
		switch kind {
		case "m":
			if pending && rest == l.token+" "+strconv.Itoa(markerN) {
				// Every append visible in pendingSn committed before this marker, so its
				// notification came before it.
				l.watermark, pending, confirmAt = pendingSn, false, time.Now()
				confirmed()
			}
		case "c", "k":
			seqStr, who, ok := strings.Cut(rest, " ")
			last, err := strconv.ParseInt(seqStr, 10, 64)
			if !ok || err != nil {
				continue // not ours
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
}

// catchUp reports the sessions whose appends may have been missed while no connection listened:
// those committed after the watermark was taken.
func (l *listener) catchUp(conn *pgx.Conn) error {
	ctx, cancel := context.WithTimeout(l.ctx, connectTimeout)
	defer cancel()
	rows, err := conn.Query(ctx, qCatchUp, l.watermark)
	if err != nil {
		return fmt.Errorf("listener: catch up: %w", err)
	}
	type commit struct {
		id   string
		last int64
	}
	var cs []commit
	for rows.Next() {
		var c commit
		if err := rows.Scan(&c.id, &c.last); err != nil {
			rows.Close()
			return fmt.Errorf("listener: catch up: %w", err)
		}
		cs = append(cs, c)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("listener: catch up: %w", err)
	}
	for _, c := range cs {
		l.s.deliver(c.id, c.last)
	}
	l.caughtUp.Add(int64(len(cs)))
	return nil
}
