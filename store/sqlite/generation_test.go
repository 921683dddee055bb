package sqlite

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// has asks the filter about one hash.
func has(f *bloom, h uint64) bool {
	ok, _ := f.has2(h, h)
	return ok
}

func TestBloom(t *testing.T) {
	const n = 1 << 17 // a default generation: 65,536 keys and as many ids
	f := newBloom(n)
	for i := range n {
		f.add(keyHash('k', fmt.Sprint("in-", i)))
	}
	for i := range n {
		if !has(f, keyHash('k', fmt.Sprint("in-", i))) {
			t.Fatalf("false negative for key %d", i)
		}
	}
	fp := 0
	for i := range n {
		if has(f, keyHash('k', fmt.Sprint("out-", i))) {
			fp++
		}
	}
	t.Logf("false positive rate %.4f", float64(fp)/n)
	// 16 bits and 7 probes per key in 512-bit blocks: about 0.1%; fail well above it.
	if rate := float64(fp) / n; rate > 0.005 {
		t.Errorf("false positive rate %.4f, want under 0.005", rate)
	}
	if has(f, keyHash('i', "in-1")) && has(f, keyHash('i', "in-2")) && has(f, keyHash('i', "in-3")) {
		t.Error("ids share the keys' bits")
	}
}

// genBundle is a store with generations of 4 events and one session holding 22 events appended
// one at a time (generations 0 to 5, the last one partly filled).
type genBundle struct {
	ctx  context.Context
	dir  string
	st   *Store
	evs  []*contract.EncodedEvent
	sess string
}

func setupGenerations(t *testing.T) *genBundle {
	t.Helper()
	b := &genBundle{ctx: context.Background(), dir: t.TempDir(), sess: "S-gen"}
	setGenerationBits(t, b.dir, 2)
	b.st = openAt(t, b.dir)
	if err := b.st.CreateSession(b.ctx, storetest.NewSession(b.sess, storetest.SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	for i := range 22 {
		ev := storetest.EventWithID(t, b.sess, fmt.Sprintf("ev-%d", i), fmt.Sprintf("key-%d", i), fmt.Sprintf("chunk %d", i))
		res, err := b.st.Append(b.ctx, b.sess, []*contract.EncodedEvent{ev}, store.AppendOptions{})
		if err != nil || res[0].Sequence != int64(i) || res[0].Duplicate {
			t.Fatalf("append %d: %+v, %v", i, res, err)
		}
		b.evs = append(b.evs, ev)
	}
	return b
}

// TestGenerationsUniqueAcrossGenerations: a key or id of any earlier generation is found, by
// the writer (duplicates and conflicts) and by readers, before and after a restart (which
// drops the filters), and when a batch crosses into a new generation.
func TestGenerationsUniqueAcrossGenerations(t *testing.T) {
	b := setupGenerations(t)
	check := func(t *testing.T) {
		t.Helper()
		for i, ev := range b.evs {
			res, err := b.st.Append(b.ctx, b.sess, []*contract.EncodedEvent{ev}, store.AppendOptions{})
			if err != nil || !res[0].Duplicate || res[0].Sequence != int64(i) {
				t.Errorf("repeat of event %d: %+v, %v; want a duplicate of sequence %d", i, res, err, i)
			}
			changed := storetest.EventWithID(t, b.sess, ev.EventID, ev.IdempotencyKey, "other content")
			_, err = b.st.Append(b.ctx, b.sess, []*contract.EncodedEvent{changed}, store.AppendOptions{})
			var ce *store.ConflictError
			if !errors.As(err, &ce) || ce.Reason != store.ConflictIdempotencyKey || ce.Existing != int64(i) {
				t.Errorf("key %q with other content: %v; want an idempotency key conflict with sequence %d", ev.IdempotencyKey, err, i)
			}
			reused := storetest.EventWithID(t, b.sess, ev.EventID, "fresh-"+ev.IdempotencyKey, "x")
			_, err = b.st.Append(b.ctx, b.sess, []*contract.EncodedEvent{reused}, store.AppendOptions{})
			if !errors.As(err, &ce) || ce.Reason != store.ConflictEventID || ce.Existing != int64(i) {
				t.Errorf("eventId %q under a new key: %v; want an eventId conflict with sequence %d", ev.EventID, err, i)
			}
			for what, get := range map[string]func() (store.StoredEvent, error){
				"EventByID":             func() (store.StoredEvent, error) { return b.st.EventByID(b.ctx, b.sess, ev.EventID) },
				"EventByIdempotencyKey": func() (store.StoredEvent, error) { return b.st.EventByIdempotencyKey(b.ctx, b.sess, ev.IdempotencyKey) },
			} {
				got, err := get()
				if err != nil || got.Sequence != int64(i) || string(got.Data) != string(ev.JSON(int64(i))) {
					t.Errorf("%s of event %d: sequence %d, %v", what, i, got.Sequence, err)
				}
			}
		}
		if _, err := b.st.EventByID(b.ctx, b.sess, "ev-none"); !errors.Is(err, store.ErrEventNotFound) {
			t.Errorf("EventByID of an unknown id: %v, want ErrEventNotFound", err)
		}
	}
	t.Run("open", check)
	if err := b.st.Close(); err != nil {
		t.Fatal(err)
	}
	b.st = openAt(t, b.dir)
	t.Run("reopened", check)

	// 22 events: the next batch starts at 22 (generation 5) and runs into generations 6 and 7;
	// its fifth event repeats sequence 3 and its last repeats its own second.
	t.Run("batch across generations", func(t *testing.T) {
		batch := []*contract.EncodedEvent{
			storetest.EventWithID(t, b.sess, "ev-new-0", "key-new-0", "n0"),
			storetest.EventWithID(t, b.sess, "ev-new-1", "key-new-1", "n1"),
			storetest.EventWithID(t, b.sess, "ev-new-2", "key-new-2", "n2"),
			storetest.EventWithID(t, b.sess, "ev-new-3", "key-new-3", "n3"),
			b.evs[3],
			storetest.EventWithID(t, b.sess, "ev-new-4", "key-new-4", "n4"),
			storetest.EventWithID(t, b.sess, "ev-new-1", "key-new-1", "n1"),
		}
		res, err := b.st.Append(b.ctx, b.sess, batch, store.AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := []store.AppendResult{{EventID: "ev-new-0", Sequence: 22}, {EventID: "ev-new-1", Sequence: 23}, {EventID: "ev-new-2", Sequence: 24},
			{EventID: "ev-new-3", Sequence: 25}, {EventID: "ev-3", Sequence: 3, Duplicate: true}, {EventID: "ev-new-4", Sequence: 26},
			{EventID: "ev-new-1", Sequence: 23, Duplicate: true}}
		if fmt.Sprint(res) != fmt.Sprint(want) {
			t.Errorf("got %v\nwant %v", res, want)
		}
		// An id of the generation this batch sealed, in the next batch.
		_, err = b.st.Append(b.ctx, b.sess, []*contract.EncodedEvent{storetest.EventWithID(t, b.sess, "ev-new-2", "key-other", "x")}, store.AppendOptions{})
		var ce *store.ConflictError
		if !errors.As(err, &ce) || ce.Reason != store.ConflictEventID || ce.Existing != 24 {
			t.Errorf("eventId of sequence 24 under a new key: %v", err)
		}
	})
}

// TestGenerationsFilterEviction: with a budget too small for the filters of two sessions, the
// writer drops and rebuilds them, and still finds every key.
func TestGenerationsFilterEviction(t *testing.T) {
	old := maxFilterBytes
	maxFilterBytes = 1
	t.Cleanup(func() { maxFilterBytes = old })
	b := setupGenerations(t)
	other := "S-other"
	if err := b.st.CreateSession(b.ctx, storetest.NewSession(other, storetest.SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	var others []*contract.EncodedEvent
	for i := range 12 {
		ev := storetest.EventWithID(t, other, fmt.Sprintf("o-%d", i), fmt.Sprintf("okey-%d", i), "o")
		if _, err := b.st.Append(b.ctx, other, []*contract.EncodedEvent{ev}, store.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		others = append(others, ev)
	}
	for round := range 2 {
		for i := range 8 {
			for _, c := range []struct {
				sess string
				ev   *contract.EncodedEvent
			}{{b.sess, b.evs[i]}, {other, others[i]}} {
				res, err := b.st.Append(b.ctx, c.sess, []*contract.EncodedEvent{c.ev}, store.AppendOptions{})
				if err != nil || !res[0].Duplicate || res[0].Sequence != int64(i) {
					t.Fatalf("round %d: repeat of %s sequence %d: %+v, %v", round, c.sess, i, res, err)
				}
			}
		}
	}
}

// TestGenerationsImport: a session written by ImportSession (a restore) has its keys found in
// every generation.
func TestGenerationsImport(t *testing.T) {
	b := setupGenerations(t)
	dir := t.TempDir()
	setGenerationBits(t, dir, 2)
	dst := openAt(t, dir)
	imp := &store.Import{Lifecycle: store.Lifecycle{}}
	var err error
	if imp.Session, err = b.st.GetSession(b.ctx, b.sess); err != nil {
		t.Fatal(err)
	}
	if imp.Events, err = b.st.ReadEvents(b.ctx, b.sess, -1, 0); err != nil {
		t.Fatal(err)
	}
	if imp.Runs, err = b.st.Runs(b.ctx, b.sess); err != nil {
		t.Fatal(err)
	}
	if err := dst.ImportSession(b.ctx, imp); err != nil {
		t.Fatal(err)
	}
	for i, ev := range b.evs {
		res, err := dst.Append(b.ctx, b.sess, []*contract.EncodedEvent{ev}, store.AppendOptions{})
		if err != nil || !res[0].Duplicate || res[0].Sequence != int64(i) {
			t.Errorf("repeat of imported event %d: %+v, %v", i, res, err)
		}
	}
}

// TestGenerationsMigration: a database written before generations (schema version 4) is
// migrated on Open with its events and their uniqueness intact.
func TestGenerationsMigration(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, exec := databaseAtVersion(t, dir, 4)
	sess := storetest.NewSession("S-old", storetest.SessionSpec{})
	row, err := store.EncodeSession(sess)
	if err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO sessions (sk, id, status, agent_id, project, record, snapshot, last_seq) VALUES (1, 'S-old', 'running', 'agent-1', '', ?, ?, 2)`, row.Record, row.Snapshot)
	var evs []*contract.EncodedEvent
	for i := range 3 {
		ev := storetest.EventWithID(t, "S-old", fmt.Sprintf("ev-%d", i), fmt.Sprintf("key-%d", i), "old")
		exec(`INSERT INTO events (sk, seq, event_id, idem_key, event_type, run_id, data) VALUES (1, ?, ?, ?, ?, '', ?)`, i, ev.EventID, ev.IdempotencyKey, ev.EventType, ev.JSON(int64(i)))
		evs = append(evs, ev)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	st := openAt(t, dir)
	got, err := st.ReadEvents(ctx, "S-old", -1, 0)
	if err != nil || len(got) != 3 {
		t.Fatalf("read after migration: %d events, %v", len(got), err)
	}
	for i, ev := range evs {
		res, err := st.Append(ctx, "S-old", []*contract.EncodedEvent{ev}, store.AppendOptions{})
		if err != nil || !res[0].Duplicate || res[0].Sequence != int64(i) {
			t.Errorf("repeat of migrated event %d: %+v, %v", i, res, err)
		}
		if e, err := st.EventByID(ctx, "S-old", ev.EventID); err != nil || e.Sequence != int64(i) {
			t.Errorf("EventByID of migrated event %d: %d, %v", i, e.Sequence, err)
		}
	}
	res, err := st.Append(ctx, "S-old", []*contract.EncodedEvent{storetest.EventWithID(t, "S-old", "ev-3", "key-3", "new")}, store.AppendOptions{})
	if err != nil || res[0].Sequence != 3 {
		t.Errorf("append after migration: %+v, %v", res, err)
	}
}

// TestGenerationsRolledBackBatch: a batch that crossed into a new generation and was then
// refused leaves nothing behind in the filters: the events later written in its place are
// found.
func TestGenerationsRolledBackBatch(t *testing.T) {
	b := setupGenerations(t) // sequences 0-21; generation 5 holds 20 and 21
	refused := []*contract.EncodedEvent{
		storetest.EventWithID(t, b.sess, "ev-r0", "key-r0", "r"), // 22
		storetest.EventWithID(t, b.sess, "ev-r1", "key-r1", "r"), // 23, generation 5 full
		storetest.EventWithID(t, b.sess, "ev-r2", "key-r2", "r"), // 24, generation 6
		storetest.EventWithID(t, b.sess, "ev-0", "key-0", "other content"),
	}
	var ce *store.ConflictError
	if _, err := b.st.Append(b.ctx, b.sess, refused, store.AppendOptions{}); !errors.As(err, &ce) {
		t.Fatalf("append of a batch ending with a conflict: %v", err)
	}
	var later []*contract.EncodedEvent
	for i := range 8 { // 22 to 29: generations 5 (sealed), 6 (sealed) and 7
		ev := storetest.EventWithID(t, b.sess, fmt.Sprintf("ev-l%d", i), fmt.Sprintf("key-l%d", i), "l")
		res, err := b.st.Append(b.ctx, b.sess, []*contract.EncodedEvent{ev}, store.AppendOptions{})
		if err != nil || res[0].Sequence != int64(22+i) {
			t.Fatalf("append %d: %+v, %v", i, res, err)
		}
		later = append(later, ev)
	}
	for i, ev := range later {
		res, err := b.st.Append(b.ctx, b.sess, []*contract.EncodedEvent{ev}, store.AppendOptions{})
		if err != nil || !res[0].Duplicate || res[0].Sequence != int64(22+i) {
			t.Errorf("repeat of sequence %d: %+v, %v", 22+i, res, err)
		}
		reused := storetest.EventWithID(t, b.sess, ev.EventID, "fresh-"+ev.IdempotencyKey, "x")
		if _, err := b.st.Append(b.ctx, b.sess, []*contract.EncodedEvent{reused}, store.AppendOptions{}); !errors.As(err, &ce) || ce.Reason != store.ConflictEventID {
			t.Errorf("eventId of sequence %d under a new key: %v", 22+i, err)
		}
	}
}

// TestGenerationsKeyDecidesFirst: an event whose key the current generation holds with other
// content and whose eventId an earlier generation holds is an idempotency-key conflict, as in
// every driver (store.PlanAppend: the key decides first, over the whole log), before and after a
// restart; with the same content it is a duplicate.
func TestGenerationsKeyDecidesFirst(t *testing.T) {
	b := setupGenerations(t) // sequences 0-21; generation 5 holds 20 and 21
	check := func(t *testing.T) {
		clash := storetest.EventWithID(t, b.sess, "ev-3", "key-20", "other content")
		_, err := b.st.Append(b.ctx, b.sess, []*contract.EncodedEvent{clash}, store.AppendOptions{})
		var ce *store.ConflictError
		if !errors.As(err, &ce) || ce.Reason != store.ConflictIdempotencyKey || ce.Existing != 20 || ce.Index != 0 {
			t.Errorf("key of sequence 20 with the eventId of sequence 3: %v; want an idempotency key conflict with sequence 20", err)
		}
		idOnly := storetest.EventWithID(t, b.sess, "ev-3", "key-fresh", "x")
		_, err = b.st.Append(b.ctx, b.sess, []*contract.EncodedEvent{idOnly}, store.AppendOptions{})
		if !errors.As(err, &ce) || ce.Reason != store.ConflictEventID || ce.Existing != 3 {
			t.Errorf("eventId of sequence 3 under a new key: %v; want an eventId conflict with sequence 3", err)
		}
		res, err := b.st.Append(b.ctx, b.sess, []*contract.EncodedEvent{b.evs[20]}, store.AppendOptions{})
		if err != nil || !res[0].Duplicate || res[0].Sequence != 20 {
			t.Errorf("repeat of sequence 20: %+v, %v", res, err)
		}
		if last, err := b.st.LastSequence(b.ctx, b.sess); err != nil || last != 21 {
			t.Errorf("last sequence %d, %v; want 21", last, err)
		}
	}
	t.Run("open", check)
	if err := b.st.Close(); err != nil {
		t.Fatal(err)
	}
	b.st = openAt(t, b.dir)
	t.Run("reopened", check)
}

// TestGenerationsMemoryBound: the open generation lists of many sessions count against the
// filter budget and are dropped past it, and every key is still found.
func TestGenerationsMemoryBound(t *testing.T) {
	old := maxFilterBytes
	maxFilterBytes = 2048
	t.Cleanup(func() { maxFilterBytes = old })
	ctx := context.Background()
	dir := t.TempDir()
	setGenerationBits(t, dir, 2)
	st := openAt(t, dir)
	const sessions, per = 40, 3 // an open list each (128 bytes), no sealed generation
	evs := map[string][]*contract.EncodedEvent{}
	for s := range sessions {
		id := fmt.Sprintf("S-%02d", s)
		if err := st.CreateSession(ctx, storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
			t.Fatal(err)
		}
		for i := range per {
			ev := storetest.EventWithID(t, id, fmt.Sprintf("ev-%d", i), fmt.Sprintf("key-%d", i), "m")
			if _, err := st.Append(ctx, id, []*contract.EncodedEvent{ev}, store.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			evs[id] = append(evs[id], ev)
		}
	}
	var held int
	r := &request{ctx: ctx, op: func(w *writer) error { held = w.filterBytes; return nil }}
	if err := st.submit(ctx, r); err != nil || r.err != nil {
		t.Fatal(err, r.err)
	}
	if held > maxFilterBytes+128 {
		t.Errorf("filters and lists hold %d bytes, budget %d", held, maxFilterBytes)
	}
	for id, list := range evs {
		for i, ev := range list {
			res, err := st.Append(ctx, id, []*contract.EncodedEvent{ev}, store.AppendOptions{})
			if err != nil || !res[0].Duplicate || res[0].Sequence != int64(i) {
				t.Errorf("%s: repeat of sequence %d: %+v, %v", id, i, res, err)
			}
		}
	}
}
