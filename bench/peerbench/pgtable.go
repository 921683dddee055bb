package peerbench

import (
	"context"
	"fmt"

	"github.com/sessiond/sessiond/internal/benchkit"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PGTable is the session log a team would write on a plain PostgreSQL table: one row per
// event, the primary key (session, seq), a unique key on (session, idem_key); an append takes
// the session's advisory lock for its transaction and inserts each event with
// INSERT … SELECT max(seq)+1 (gap-free), ON CONFLICT on the key (a duplicate: the stored
// sequence is returned instead), commits, then NOTIFYs the session's channel. The NOTIFY
// is not in the appending transaction on purpose: PostgreSQL serialises the commits of
// transactions that notify (a global lock held through the commit's flush), which would
// take away group commit (200 single appends/s from 64 writers instead of thousands).
// A batch is one round trip: BEGIN, the statements, COMMIT and the NOTIFY are pipelined.
// Followers LISTEN on their own connection and read the new rows when notified.
type PGTable struct {
	c    *benchkit.Cluster
	pool *pgxpool.Pool
}

const pgTableSchema = `CREATE TABLE events (
	session  text   NOT NULL,
	seq      bigint NOT NULL,
	idem_key text   NOT NULL,
	event_id text   NOT NULL,
	data     text   NOT NULL,
	PRIMARY KEY (session, seq),
	UNIQUE (session, idem_key)
)`

// pgTableInsert inserts one event and returns its sequence and whether it was added: a
// duplicate key returns the stored event's sequence (the statement's snapshot does not see
// the row it inserts, so the second branch finds only an earlier one).
const pgTableInsert = `WITH ins AS (
	INSERT INTO events (session, seq, idem_key, event_id, data)
	SELECT $1, coalesce(max(seq), 0) + 1, $2, $3, $4 FROM events WHERE session = $1
	ON CONFLICT (session, idem_key) DO NOTHING
	RETURNING seq
)
SELECT seq, true FROM ins
UNION ALL
SELECT seq, false FROM events WHERE session = $1 AND idem_key = $2 AND NOT EXISTS (SELECT 1 FROM ins)`

// StartPGTable starts a cluster of its own (StartCluster) and creates the table.
func StartPGTable() (*PGTable, error) {
	c, err := benchkit.StartCluster()
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(c.URL("bench"))
	if err != nil {
		c.Close()
		return nil, err
	}
	cfg.MaxConns = 80 // the 64 writers of W2 each hold one
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		_, err = pool.Exec(ctx, pgTableSchema)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		c.Close()
		return nil, fmt.Errorf("plain table: %w", err)
	}
	return &PGTable{c: c, pool: pool}, nil
}

// Name implements System.
func (p *PGTable) Name() string { return "pg-table" }

// Servers implements System.
func (p *PGTable) Servers() []*benchkit.Proc { return []*benchkit.Proc{p.c.Proc()} }

// Close implements System.
func (p *PGTable) Close() error {
	p.pool.Close()
	return p.c.Close()
}

// CreateSession implements System: the table needs no session row.
func (p *PGTable) CreateSession(context.Context, string) error { return nil }

func channel(sid string) string { return "ev:" + sid }

// Append implements System.
func (p *PGTable) Append(ctx context.Context, sid string, evs []benchkit.Event) (int, error) {
	var b pgx.Batch
	b.Queue("BEGIN")
	b.Queue("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", sid)
	for _, e := range evs {
		b.Queue(pgTableInsert, sid, e.Key, e.ID, string(e.Data))
	}
	b.Queue("COMMIT")
	b.Queue("SELECT pg_notify($1, '')", channel(sid))
	// After an error the server skips the rest of the pipeline: nothing is committed.
	br := p.pool.SendBatch(ctx, &b)
	for _, what := range []string{"begin", "lock session"} {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return 0, fmt.Errorf("%s %s: %w", what, sid, err)
		}
	}
	dups := 0
	for range evs {
		var seq int64
		var added bool
		if err := br.QueryRow().Scan(&seq, &added); err != nil {
			br.Close()
			return 0, fmt.Errorf("insert into %s: %w", sid, err)
		}
		if !added {
			dups++
		}
	}
	for _, what := range []string{"commit to", "notify"} {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return 0, fmt.Errorf("%s %s: %w", what, sid, err)
		}
	}
	if err := br.Close(); err != nil {
		return 0, fmt.Errorf("append to %s: %w", sid, err)
	}
	return dups, nil
}

// readAfter reads the events of sid after seq, at most limit, in order.
func readAfter(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sid string, after int64, limit int, fn func(seq int64, data []byte)) (int, error) {
	rows, err := q.Query(ctx, "SELECT seq, data FROM events WHERE session = $1 AND seq > $2 ORDER BY seq LIMIT $3", sid, after, limit)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var seq int64
		var data []byte
		if err := rows.Scan(&seq, &data); err != nil {
			return n, err
		}
		fn(seq, data)
		n++
	}
	return n, rows.Err()
}

// Read implements System: pages of 10,000 rows by sequence, every event decoded (DecodeEvent).
func (p *PGTable) Read(ctx context.Context, sid string, n int) (int, error) {
	var after int64
	read := 0
	var d Decoded
	var derr error
	for read < n {
		got, err := readAfter(ctx, p.pool, sid, after, 10000, func(seq int64, data []byte) {
			after = seq
			if err := DecodeEvent(data, &d); err != nil && derr == nil {
				derr = err
			}
		})
		if err == nil {
			err = derr
		}
		if err != nil {
			return read, fmt.Errorf("read %s: %w", sid, err)
		}
		if got == 0 {
			return read, fmt.Errorf("read %s: %d events, want %d", sid, read, n)
		}
		read += got
	}
	return read, nil
}

// Subscribe implements System: a connection of its own that LISTENs to the session's channel
// and reads the rows after the last one it delivered each time it is notified.
func (p *PGTable) Subscribe(ctx context.Context, sid string, deliver func([]byte)) (<-chan struct{}, error) {
	conn, err := pgx.Connect(ctx, p.c.URL("bench"))
	if err != nil {
		return nil, fmt.Errorf("subscriber connection: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel(sid)}.Sanitize()); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	var last int64
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(seq), 0) FROM events WHERE session = $1", sid).Scan(&last); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	ready := make(chan struct{})
	close(ready)
	go func() {
		defer conn.Close(context.Background())
		for {
			if _, err := conn.WaitForNotification(ctx); err != nil {
				return
			}
			for {
				n, err := readAfter(ctx, conn, sid, last, 1000, func(seq int64, data []byte) {
					last = seq
					deliver(data)
				})
				if err != nil || n < 1000 {
					break
				}
			}
		}
	}()
	return ready, nil
}
