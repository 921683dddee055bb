package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
	"github.com/sessiond/sessiond/store/storetest"
)

// TestEncodeDirectParams: every parameter type the one-statement append sends is encoded as
// pgx encodes it in the binary format, NULLs included, and a type the encoder does not know
// for its parameter is refused (the append then takes pgx's own path).
func TestEncodeDirectParams(t *testing.T) {
	seq := int64(41)
	m := pgtype.NewMap()
	for _, c := range []struct {
		name string
		oid  uint32
		arg  any
	}{
		{"bigint", pgtype.Int8OID, int64(-7)},
		{"bigint pointer", pgtype.Int8OID, &seq},
		{"bigint NULL", pgtype.Int8OID, (*int64)(nil)},
		{"text", pgtype.TextOID, "2026-03-01T12:00:00Z"},
		{"empty text", pgtype.TextOID, ""},
		{"bytea", pgtype.ByteaOID, []byte{0, 1, 2, 255}},
		{"bytea NULL", pgtype.ByteaOID, []byte(nil)},
		{"text[]", pgtype.TextArrayOID, []string{"k-1", "", "ключ"}},
		{"empty text[]", pgtype.TextArrayOID, []string{}},
		{"bytea[]", pgtype.ByteaArrayOID, [][]byte{[]byte(`{"a":`), {}, []byte(`}`)}},
		{"empty bytea[]", pgtype.ByteaArrayOID, [][]byte{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A buffer, as pgx's query builder gives: nil means NULL, empty an empty value.
			want, err := m.Encode(c.oid, pgx.BinaryFormatCode, c.arg, make([]byte, 0, 16))
			if err != nil {
				t.Fatal(err)
			}
			// Two parameters, so that the second starts after the first in the buffer.
			params, formats, _, err := encodeDirectParams(nil, []uint32{pgtype.Int8OID, c.oid}, []any{int64(1), c.arg})
			if err != nil {
				t.Fatal(err)
			}
			if got := params[1]; !bytes.Equal(got, want) || (got == nil) != (want == nil) {
				t.Errorf("encoded %x (nil %v), pgx encodes %x (nil %v)", got, got == nil, want, want == nil)
			}
			if formats[0] != pgx.BinaryFormatCode || formats[1] != pgx.BinaryFormatCode {
				t.Errorf("formats %v, want binary", formats)
			}
		})
	}
	for _, c := range []struct {
		name string
		oid  uint32
		arg  any
	}{
		{"text for bigint", pgtype.Int8OID, "1"},
		{"strings for bytea[]", pgtype.ByteaArrayOID, []string{"a"}},
		{"int32", pgtype.Int4OID, int32(1)},
	} {
		t.Run("refuses "+c.name, func(t *testing.T) {
			if _, _, _, err := encodeDirectParams(nil, []uint32{c.oid}, []any{c.arg}); err == nil {
				t.Error("encoded, want an error")
			}
		})
	}
}

// TestLargeBatchAnswers: a batch of more than maxGroupedEvents events (binary parameters, the
// first key looked up alone) is answered as the rules say when it is new, when it is sent again
// (every event a duplicate, from the statement's snapshot), when its first key is new but a
// later one is stored (the insert fails on the unique index; the locking path answers), and
// when a new key comes with a stored eventId (a conflict, nothing written).
func TestLargeBatchAnswers(t *testing.T) {
	st := openURL(t, pgtest.Schema(t))
	ctx := context.Background()
	const sid = "S-large-batch"
	if err := st.CreateSession(ctx, storetest.NewSession(sid, storetest.SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	n := maxGroupedEvents + 8
	batch := func(prefix string) []*contract.EncodedEvent { return largeBatch(t, sid, prefix, n) }
	first := batch("a")
	res, err := st.Append(ctx, sid, first, serviceOpts())
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Duplicate || r.Sequence != int64(i) {
			t.Fatalf("new batch: result %d is %+v, want sequence %d, not a duplicate", i, r, i)
		}
	}
	res, err = st.Append(ctx, sid, first, serviceOpts())
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !r.Duplicate || r.Sequence != int64(i) {
			t.Fatalf("batch sent again: result %d is %+v, want a duplicate of %d", i, r, i)
		}
	}
	mixed := batch("b")
	mixed[3] = first[5] // a stored event, sent again inside a new batch
	res, err = st.Append(ctx, sid, mixed, serviceOpts())
	if err != nil {
		t.Fatal(err)
	}
	next := int64(n)
	for i, r := range res {
		switch {
		case i == 3 && (!r.Duplicate || r.Sequence != 5):
			t.Fatalf("mixed batch: result 3 is %+v, want a duplicate of 5", r)
		case i != 3 && (r.Duplicate || r.Sequence != next):
			t.Fatalf("mixed batch: result %d is %+v, want sequence %d", i, r, next)
		}
		if i != 3 {
			next++
		}
	}
	clash := batch("c")
	clash[7] = storetest.EventWithID(t, sid, first[2].EventID, "c-new-key", "chunk") // a stored eventId under a new key
	_, err = st.Append(ctx, sid, clash, serviceOpts())
	var ce *store.ConflictError
	if !errors.As(err, &ce) || ce.Index != 7 {
		t.Fatalf("stored eventId under a new key: %v, want a conflict at index 7", err)
	}
	events, err := st.ReadEvents(ctx, sid, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(events)) != next {
		t.Fatalf("the log holds %d events, want %d (nothing of the refused batch)", len(events), next)
	}
	for i, e := range events {
		if e.Sequence != int64(i) {
			t.Fatalf("event %d has sequence %d", i, e.Sequence)
		}
	}
}

// TestWireStatementAfterSchemaChange: a column of the prepared statement's result changes
// under it (here its collation, as a later migration run by another instance might): the
// next large appends on the connection prepare the statement again and succeed, instead of
// failing with "cached plan must not change result type" until the connection is closed.
func TestWireStatementAfterSchemaChange(t *testing.T) {
	url, schema := pgtest.NewSchema(t)
	st := openURL(t, url+"&pool_max_conns=2")
	ctx := context.Background()
	const sid = "S-wire-stale"
	if err := st.CreateSession(ctx, storetest.NewSession(sid, storetest.SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	n := maxGroupedEvents + 8
	batch := func(prefix string) []*contract.EncodedEvent { return largeBatch(t, sid, prefix, n) }
	if _, err := st.Append(ctx, sid, batch("warm"), serviceOpts()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.pool.Exec(ctx, `ALTER TABLE `+pgx.Identifier{schema, "events"}.Sanitize()+` ALTER COLUMN event_id TYPE text COLLATE "POSIX"`); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := st.Append(ctx, sid, batch(fmt.Sprintf("after-%d", i)), serviceOpts()); err != nil {
			t.Fatalf("append %d after the schema change: %v", i, err)
		}
	}
}

// largeBatch returns n events of session sid with eventIds "<prefix>-id-<i>" and keys
// "<prefix>-key-<i>": with n > maxGroupedEvents, an append that takes the wire path.
func largeBatch(t *testing.T, sid, prefix string, n int) []*contract.EncodedEvent {
	t.Helper()
	out := make([]*contract.EncodedEvent, n)
	for i := range out {
		out[i] = storetest.EventWithID(t, sid, fmt.Sprintf("%s-id-%d", prefix, i), fmt.Sprintf("%s-key-%d", prefix, i), "chunk")
	}
	return out
}
