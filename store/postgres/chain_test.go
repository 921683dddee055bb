package postgres

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
	"github.com/sessiond/sessiond/store/storetest"
)

// chainOf reads session id's stored event hashes and head, and the hashes its stored bytes
// chain to from the genesis (store.ChainEvents).
func chainOf(t *testing.T, conn *pgx.Conn, id string) (hashes, want [][]byte, last, head []byte) {
	t.Helper()
	ctx := context.Background()
	rows, err := conn.Query(ctx, `SELECT seq, data, hash FROM events WHERE sk = (SELECT sk FROM sessions WHERE id = $1) ORDER BY seq`, id)
	if err != nil {
		t.Fatal(err)
	}
	var evs []store.StoredEvent
	for rows.Next() {
		var e store.StoredEvent
		if err := rows.Scan(&e.Sequence, &e.Data, &e.Hash); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
		hashes = append(hashes, e.Hash)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for i, h := range store.ChainEvents(store.ChainGenesis, evs) {
		want = append(want, bytes.Clone(store.ChainStored(evs[i].Sequence, &h)))
		last = bytes.Clone(h[:])
	}
	if err := conn.QueryRow(ctx, `SELECT head_hash FROM session_heads WHERE sk = (SELECT sk FROM sessions WHERE id = $1)`, id).Scan(&head); err != nil {
		t.Fatal(err)
	}
	return hashes, want, last, head
}

// chainHolds fails unless session id's stored hashes are the chain of its bytes, stored with
// every 16th event, and its head the last event's (the genesis for an empty log).
func chainHolds(t *testing.T, conn *pgx.Conn, id string) {
	t.Helper()
	hashes, want, last, head := chainOf(t, conn, id)
	if last == nil {
		last = store.ChainGenesis[:]
	}
	if fmt.Sprint(hashes) != fmt.Sprint(want) || !bytes.Equal(head, last) {
		t.Errorf("%s: stored hashes %x, want %x; head %x, want %x", id, hashes, want, head, last)
	}
}

// TestChainMigration: a schema of version 10 (no hash chain) with a session of 20 events, one
// compacted through sequence 1 and one without events is migrated by Open: every stored event
// gets its chain hash in sequence order (the compacted one's chain starting from the genesis
// at its first kept event), each head its last event's hash (the genesis when empty); appends
// after the migration go on from there.
func TestChainMigration(t *testing.T) {
	ctx := context.Background()
	u := pgtest.Schema(t)
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
	for _, m := range ms[:10] {
		exec(m.SQL)
		exec(`INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
	}
	for _, id := range []string{"S-whole", "S-compacted", "S-empty"} {
		row, err := store.EncodeSession(storetest.NewSession(id, storetest.SessionSpec{}))
		if err != nil {
			t.Fatal(err)
		}
		exec(`INSERT INTO sessions (id, status, agent_id, project, record, snapshot) VALUES ($1, 'running', 'agent-1', '', $2, $3)`, id, string(row.Record), string(row.Snapshot))
		if id == "S-empty" {
			continue
		}
		exec(`UPDATE session_heads SET last_seq = 19 WHERE sk = (SELECT sk FROM sessions WHERE id = $1)`, id)
		for i := range 20 {
			if id == "S-compacted" && i < 2 {
				continue
			}
			ev := storetest.EventWithID(t, id, fmt.Sprintf("ev-%d", i), fmt.Sprintf("key-%d", i), "old")
			exec(`INSERT INTO events (sk, seq, event_id, idem_key, event_type, run_id, data) VALUES ((SELECT sk FROM sessions WHERE id = $1), $2, $3, $4, $5, '', $6)`,
				id, i, ev.EventID, ev.IdempotencyKey, ev.EventType, ev.JSON(int64(i)))
		}
	}

	st := openURL(t, u)
	for _, id := range []string{"S-whole", "S-compacted", "S-empty"} {
		chainHolds(t, conn, id)
	}
	for _, id := range []string{"S-whole", "S-compacted"} {
		next := storetest.EventWithID(t, id, "ev-new", "key-new", "new")
		if res, err := st.Append(ctx, id, []*contract.EncodedEvent{next}, store.AppendOptions{}); err != nil || res[0].Sequence != 20 {
			t.Fatalf("%s: append after migration: %+v, %v", id, res, err)
		}
		chainHolds(t, conn, id)
	}
}

// TestChainAcrossInstances: two stores (two sessiond instances) append single events and
// batches to one session in turn, through the one-statement path and the locking path: each
// one's cached head (headCache) goes stale at every turn of the other, and the chain still
// holds, event by event, with the head at the last one.
func TestChainAcrossInstances(t *testing.T) {
	ctx := context.Background()
	u := pgtest.Schema(t)
	a, b := openURL(t, u), openURL(t, u)
	createSession(t, a, "S-two")
	for i := range 12 {
		st := a
		if i%3 == 1 {
			st = b
		}
		n := 1 + i%4*5 // single events and batches, one over maxGroupedEvents
		if _, err := st.Append(ctx, "S-two", storetest.Batch(t, "S-two", fmt.Sprintf("k%d-", i), n), store.AppendOptions{}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	chainHolds(t, conn, "S-two")
	if last, err := a.LastSequence(ctx, "S-two"); err != nil || last < 50 {
		t.Fatalf("last sequence %d, %v", last, err)
	}
	if a.group.calls.Load() == 0 || b.group.calls.Load() == 0 {
		t.Errorf("one-statement appends: %d and %d; want both instances to have taken that path", a.group.calls.Load(), b.group.calls.Load())
	}
}
