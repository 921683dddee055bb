package postgres

import (
	"bytes"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
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
