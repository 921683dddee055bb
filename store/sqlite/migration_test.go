package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// TestSealedKeyIndexMigration: a database of schema version 7 (unique indexes on every
// generation) with generations of 4 events, one session of 10 events (generations 0 and 1
// sealed, 2 open) and one of 8 (both generations sealed, the next one empty), is migrated on
// Open: the sealed generations get their tables, the old indexes are gone, and every key and id
// is still found by the writer (duplicates, conflicts) and by readers.
func TestSealedKeyIndexMigration(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, exec := databaseAtVersion(t, dir, 7)
	exec(`UPDATE settings SET value = 2 WHERE name = 'generation_bits'`)
	sizes := map[string]int{"S-ten": 10, "S-eight": 8}
	evs := map[string][]*contract.EncodedEvent{}
	sk := 0
	for _, id := range []string{"S-ten", "S-eight"} {
		sk++
		row, err := store.EncodeSession(storetest.NewSession(id, storetest.SessionSpec{}))
		if err != nil {
			t.Fatal(err)
		}
		exec(`INSERT INTO sessions (sk, id, status, agent_id, project, record, snapshot, last_seq) VALUES (?, ?, 'running', 'agent-1', '', ?, ?, ?)`, sk, id, row.Record, row.Snapshot, sizes[id]-1)
		for i := range sizes[id] {
			ev := storetest.EventWithID(t, id, fmt.Sprintf("ev-%d", i), fmt.Sprintf("key-%d", i), "old")
			exec(`INSERT INTO events (sk, seq, gen, event_id, idem_key, event_type, run_id, data) VALUES (?, ?, ?, ?, ?, ?, '', ?)`, sk, i, i>>2, ev.EventID, ev.IdempotencyKey, ev.EventType, ev.JSON(int64(i)))
			evs[id] = append(evs[id], ev)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	st := openAt(t, dir)
	var keys, ids, indexes int
	if err := st.rdb.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM event_keys), (SELECT count(*) FROM event_ids),
		(SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name IN ('events_key', 'events_id'))`).Scan(&keys, &ids, &indexes); err != nil {
		t.Fatal(err)
	}
	if keys != 16 || ids != 16 || indexes != 0 {
		t.Errorf("after migration: %d sealed keys, %d sealed ids (want 8 + 8 of each), %d old indexes (want 0)", keys, ids, indexes)
	}
	for id, list := range evs {
		for i, ev := range list {
			if e, err := st.EventByID(ctx, id, ev.EventID); err != nil || e.Sequence != int64(i) {
				t.Errorf("%s: EventByID of migrated event %d: %d, %v", id, i, e.Sequence, err)
			}
			if e, err := st.EventByIdempotencyKey(ctx, id, ev.IdempotencyKey); err != nil || e.Sequence != int64(i) {
				t.Errorf("%s: EventByIdempotencyKey of migrated event %d: %d, %v", id, i, e.Sequence, err)
			}
			res, err := st.Append(ctx, id, []*contract.EncodedEvent{ev}, store.AppendOptions{})
			if err != nil || !res[0].Duplicate || res[0].Sequence != int64(i) {
				t.Errorf("%s: repeat of migrated event %d: %+v, %v", id, i, res, err)
			}
			var ce *store.ConflictError
			reused := storetest.EventWithID(t, id, ev.EventID, "fresh-"+ev.IdempotencyKey, "x")
			if _, err := st.Append(ctx, id, []*contract.EncodedEvent{reused}, store.AppendOptions{}); !errors.As(err, &ce) || ce.Reason != store.ConflictEventID || ce.Existing != int64(i) {
				t.Errorf("%s: eventId of migrated event %d under a new key: %v", id, i, err)
			}
		}
		next := storetest.EventWithID(t, id, "ev-new", "key-new", "new")
		res, err := st.Append(ctx, id, []*contract.EncodedEvent{next}, store.AppendOptions{})
		if err != nil || res[0].Sequence != int64(sizes[id]) || res[0].Duplicate {
			t.Errorf("%s: append after migration: %+v, %v", id, res, err)
		}
	}
}

// TestSealedGenerationsAfterRestartAndCompaction: with generations of 4 events, keys of sealed
// and open generations are duplicates after a restart (the open index rebuilt from the rows);
// after a compaction the events left are still found, and the sealed tables hold no entry of a
// compacted event.
func TestSealedGenerationsAfterRestartAndCompaction(t *testing.T) {
	b := setupGenerations(t) // 22 events, generations 0-4 sealed, 5 open
	var keys int
	if err := b.st.rdb.QueryRowContext(b.ctx, `SELECT count(*) FROM event_keys`).Scan(&keys); err != nil || keys != 20 {
		t.Fatalf("sealed keys: %d, %v; want 20", keys, err)
	}
	repeatAll := func(t *testing.T, from int) {
		t.Helper()
		for i := from; i < len(b.evs); i++ {
			res, err := b.st.Append(b.ctx, b.sess, []*contract.EncodedEvent{b.evs[i]}, store.AppendOptions{})
			if err != nil || !res[0].Duplicate || res[0].Sequence != int64(i) {
				t.Errorf("repeat of sequence %d: %+v, %v", i, res, err)
			}
			if e, err := b.st.EventByIdempotencyKey(b.ctx, b.sess, b.evs[i].IdempotencyKey); err != nil || e.Sequence != int64(i) {
				t.Errorf("EventByIdempotencyKey of sequence %d: %d, %v", i, e.Sequence, err)
			}
		}
	}
	repeatAll(t, 0)
	if err := b.st.Close(); err != nil {
		t.Fatal(err)
	}
	b.st = openAt(t, b.dir)
	repeatAll(t, 0)
	if _, err := b.st.CompactEvents(b.ctx, b.sess, 9); err != nil {
		t.Fatal(err)
	}
	if err := b.st.rdb.QueryRowContext(b.ctx, `SELECT count(*) FROM event_keys WHERE seq <= 9`).Scan(&keys); err != nil || keys != 0 {
		t.Errorf("sealed keys of compacted events: %d, %v; want 0", keys, err)
	}
	repeatAll(t, 10)
	if _, err := b.st.EventByID(b.ctx, b.sess, b.evs[3].EventID); !errors.Is(err, store.ErrEventNotFound) {
		t.Errorf("EventByID of a compacted event: %v", err)
	}
}

// databaseAtVersion creates the store's database in dir as an older release left it: the first
// version migrations applied and schema_version saying so. It returns the open database and an
// exec that fails the test on an error.
func databaseAtVersion(t *testing.T, dir string, version int) (*sql.DB, func(q string, args ...any)) {
	t.Helper()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", dsn(filepath.Join(dir, DBFile), roleWriter))
	if err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, m := range ms[:version] {
		exec(m.SQL)
	}
	exec(`CREATE TABLE schema_version (version INTEGER NOT NULL)`)
	exec(fmt.Sprintf(`INSERT INTO schema_version (version) VALUES (%d)`, version))
	return db, exec
}

// TestChainMigration: a database of schema version 13 (no hash chain) with a session of 20
// events, one compacted through sequence 1 (events 2 to 19 kept, one of them still in the tail;
// restored by an import, which wrote no head row before 0014)
// and one without events is migrated on Open: every stored event gets its chain hash in
// sequence order (the compacted one's chain starting from the genesis at its first kept
// event, with no base recorded; stored with every 16th event), each head the hash of its last event; appends after the
// migration go on from those heads.
func TestChainMigration(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, exec := databaseAtVersion(t, dir, 13)
	for sk, id := range map[int]string{1: "S-whole", 2: "S-compacted", 3: "S-empty"} {
		row, err := store.EncodeSession(storetest.NewSession(id, storetest.SessionSpec{}))
		if err != nil {
			t.Fatal(err)
		}
		exec(`INSERT INTO sessions (sk, id, status, agent_id, project, record, snapshot, last_seq) VALUES (?, ?, 'running', 'agent-1', '', ?, ?, -1)`, sk, id, row.Record, row.Snapshot)
		if id == "S-empty" {
			continue
		}
		if id == "S-whole" {
			exec(`INSERT INTO session_heads (sk, last_seq) VALUES (?, 19)`, sk)
		} else {
			exec(`UPDATE sessions SET last_seq = 19 WHERE sk = ?`, sk) // imported: no head row (ImportSession wrote none before 0014)
		}
		for i := range 20 {
			if id == "S-compacted" && i < 2 {
				continue
			}
			ev := storetest.EventWithID(t, id, fmt.Sprintf("ev-%d", i), fmt.Sprintf("key-%d", i), "old")
			table, pos := "events", ""
			if i == 19 {
				table, pos = "event_tail", fmt.Sprintf("%d, ", sk)
			}
			cols := "rid, sk, seq, gen, event_id, idem_key, event_type, run_id, data"
			if pos != "" {
				cols = "pos, " + cols
			}
			exec(`INSERT INTO `+table+` (`+cols+`) VALUES (`+pos+`?, ?, ?, 0, ?, ?, ?, '', ?)`, int64(sk)<<32+int64(i), sk, i, ev.EventID, ev.IdempotencyKey, ev.EventType, ev.JSON(int64(i)))
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	st := openAt(t, dir)
	chainOf := func(id string) (hashes, want [][]byte, last, head, base []byte) {
		t.Helper()
		rows, err := st.rdb.QueryContext(ctx, inBothTables(`SELECT rid, data, hash FROM %[1]s WHERE sk = (SELECT sk FROM sessions WHERE id = ?1)`)+` ORDER BY rid`, id)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var evs []store.StoredEvent
		for rows.Next() {
			var rid int64
			var e store.StoredEvent
			if err := rows.Scan(&rid, &e.Data, &e.Hash); err != nil {
				t.Fatal(err)
			}
			e.Sequence = rid & (1<<32 - 1)
			evs = append(evs, e)
			hashes = append(hashes, e.Hash)
		}
		for i, h := range store.ChainEvents(store.ChainGenesis, evs) {
			want = append(want, bytes.Clone(store.ChainStored(evs[i].Sequence, &h)))
			last = bytes.Clone(h[:])
		}
		if err := st.rdb.QueryRowContext(ctx, `SELECT head_hash, base_hash FROM session_heads WHERE sk = (SELECT sk FROM sessions WHERE id = ?)`, id).Scan(&head, &base); err != nil && !errors.Is(err, sql.ErrNoRows) {
			t.Fatal(err)
		}
		return hashes, want, last, head, base
	}
	for _, id := range []string{"S-whole", "S-compacted"} {
		hashes, want, last, head, base := chainOf(id)
		if fmt.Sprint(hashes) != fmt.Sprint(want) || len(bytes.Join(want, nil)) != 32 || !bytes.Equal(head, last) || base != nil {
			t.Errorf("%s after migration: hashes %x, want %x; head %x, want %x; base %x (want none)", id, hashes, want, head, last, base)
		}
		next := storetest.EventWithID(t, id, "ev-new", "key-new", "new")
		if res, err := st.Append(ctx, id, []*contract.EncodedEvent{next}, store.AppendOptions{}); err != nil || res[0].Sequence != 20 {
			t.Fatalf("%s: append after migration: %+v, %v", id, res, err)
		}
		hashes, want, last, head, _ = chainOf(id)
		if fmt.Sprint(hashes) != fmt.Sprint(want) || !bytes.Equal(head, last) {
			t.Errorf("%s after an append: hashes %x, want %x; head %x, want %x", id, hashes, want, head, last)
		}
	}
	if _, _, _, head, _ := chainOf("S-empty"); head != nil {
		t.Errorf("S-empty: head hash %x, want none", head)
	}
}
