package postgres

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sessiond/sessiond/store"
)

// The change feed (store/changes.go). The triggers of migration 0006 write the changes,
// unnumbered, in the transaction of the write they record; the numberer (below) numbers the
// committed ones with changes_assign, one numbering at a time across instances, gap-free and in
// order, and changes_assign NOTIFYs the schema's change channel (changeChannelFor). Every write
// method that may record a change kicks the numberer when it returns (kickChanges), and the
// listener kicks it at each poll, so the changes of an instance that died between its commit
// and its kick are numbered within pollEvery. The listener LISTENs on the change channel and
// reads change_counter at each poll: a lost notification delays a feed by at most pollEvery
// and never loses a change (readers read the table; the notification only wakes them).

const changeCols = `seq, kind, session_id, project, agent_id, run_id, status, previous, attempt, token, at_ms`

// changeChannelFor returns the NOTIFY channel of a schema's changes: "sdc:" and the md5 of the
// schema's name in hex, as changes_number computes it.
func changeChannelFor(schema string) string {
	sum := md5.Sum([]byte(schema))
	return "sdc:" + hex.EncodeToString(sum[:])
}

// ReadChanges returns the changes after the sequence after that match f, as documented on
// store.ChangeFeed. Rows of transactions still committing have no seq yet and are not visible
// to other transactions anyway.
func (s *Store) ReadChanges(ctx context.Context, after int64, f store.ChangeFilter, limit int) ([]store.Change, error) {
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("read changes: %w", err)
	}
	defer s.inflight.Done()
	q := `SELECT ` + changeCols + ` FROM changes WHERE seq > $1`
	args := []any{after}
	if f.Project != "" {
		args = append(args, f.Project)
		q += ` AND project = $` + strconv.Itoa(len(args))
	}
	if f.AgentID != "" {
		args = append(args, f.AgentID)
		q += ` AND agent_id = $` + strconv.Itoa(len(args))
	}
	args = append(args, store.ChangesLimit(limit))
	q += ` ORDER BY seq LIMIT $` + strconv.Itoa(len(args))
	var out []store.Change
	err := retry(ctx, readAttempts, func() error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c store.Change
			var at int64
			if err := rows.Scan(&c.Seq, &c.Kind, &c.SessionID, &c.Project, &c.AgentID, &c.RunID, &c.Status, &c.Previous, &c.Attempt, &c.Token, &at); err != nil {
				return err
			}
			c.At = time.UnixMilli(at).UTC()
			out = append(out, c)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read changes: %w", err)
	}
	return out, nil
}

// LastChange returns the sequence of the last committed change, 0 when there is none.
func (s *Store) LastChange(ctx context.Context) (int64, error) {
	if err := s.enter(); err != nil {
		return 0, fmt.Errorf("last change: %w", err)
	}
	defer s.inflight.Done()
	var n int64
	err := retry(ctx, readAttempts, func() error {
		return s.pool.QueryRow(ctx, `SELECT last FROM change_counter`).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("last change: %w", err)
	}
	return n, nil
}

// SubscribeChanges registers fn, called by the listener when it hears of changes committed by
// any instance. It must not block and must not call the store's methods.
func (s *Store) SubscribeChanges(fn func(seq int64)) (cancel func()) { return s.changeSubs.Add(fn) }

// deliverChange tells the change subscribers about changes up to seq, unless they already
// heard of seq or a later one.
func (s *Store) deliverChange(seq int64) {
	for {
		cur := s.changesDelivered.Load()
		if seq <= cur {
			return
		}
		if s.changesDelivered.CompareAndSwap(cur, seq) {
			break
		}
	}
	s.changeSubs.Notify(seq)
}

// pollChanges reads the change counter on the listener's connection and delivers it: the
// catch-up for notifications missed while no connection listened.
func (l *listener) pollChanges(ctx context.Context, conn *pgx.Conn) error {
	var n int64
	if err := conn.QueryRow(ctx, `SELECT last FROM change_counter`).Scan(&n); err != nil {
		return fmt.Errorf("listener: poll changes: %w", err)
	}
	l.s.deliverChange(n)
	return nil
}

// numberer runs changes_assign whenever it is kicked, until Close.
type numberer struct {
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// kickChanges asks the numberer to number the committed changes; it never blocks.
func (s *Store) kickChanges() {
	select {
	case s.num.kick <- struct{}{}:
	default:
	}
}

// newNumberer returns a numberer that is not running yet (kicks wait for it).
func newNumberer() *numberer {
	return &numberer{kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// startNumberer starts the numberer goroutine.
func (s *Store) startNumberer() { go s.runNumberer() }

// stopNumberer ends the numberer and waits for it (before the pool closes).
func (s *Store) stopNumberer() {
	close(s.num.stop)
	<-s.num.done
}

func (s *Store) runNumberer() {
	defer close(s.num.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.num.stop
		cancel()
	}()
	for {
		select {
		case <-s.num.stop:
			return
		case <-s.num.kick:
		}
		for {
			var before, after int64
			err := s.pool.QueryRow(ctx, `SELECT (SELECT last FROM change_counter), changes_assign()`).Scan(&before, &after)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.Warn("postgres store: numbering the change feed failed; retrying at the next kick or poll", "err", err)
				break
			}
			s.deliverChange(after)
			if after-before < 10000 {
				break // all numbered; a full batch means there may be more
			}
		}
	}
}
