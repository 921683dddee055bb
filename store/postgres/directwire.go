package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// A one-statement append of more than maxGroupedEvents events (which runs on its own, never in
// a group) is sent with its parameters encoded here, in PostgreSQL's binary format, straight
// into one buffer: pgx encodes an array parameter element by element through interfaces and
// reflection, into a buffer it shrinks back to 256 bytes after every statement, so a batch of
// 64 events (about 40 KB of parameters) was copied through a dozen reallocations each time,
// the largest share of the driver's own CPU per event. Smaller appends, whose parameters are a
// few hundred bytes, keep pgx's path. The statement is prepared
// once per connection under a name of its own (directStatementName), and its rows are read in
// the binary format too.

// directStatementName names the prepared statement of qDirects' variant v on a connection.
func directStatementName(v int) string { return "sessiond_direct_" + strconv.Itoa(v) }

// Binary formats of the parameter and result types of qDirect (the OIDs of pg_type).
const (
	oidInt8      = 20
	oidText      = 25
	oidBytea     = 17
	oidTextArray = 1009
	oidByteArray = 1001
)

// maxWireBuf is the largest buffer wireBufs keeps (a batch of 64 events of about 500 bytes
// takes 40 KB; one of large events is not worth keeping).
const maxWireBuf = 1 << 20

// wireBufs recycles the buffers parameters are encoded into.
var wireBufs = sync.Pool{New: func() any { return new([]byte) }}

// wireDirect says whether the Store may send one-statement appends by runWire: its
// connections prepare and keep named statements (pgx's default mode). A connection string that
// asks for another mode keeps pgx's own path: cache_describe, for one, is what a pooler in
// transaction mode needs, where a named statement prepared on one server connection may be
// executed on another.
func (s *Store) wireDirect() bool {
	return s.pool.Config().ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement
}

// runWire runs c's statement alone on a connection of the pool, its parameters encoded by
// encodeDirectParams, and sets c's answer as directCall.answer does. When the server refuses
// the prepared statement itself (its plan went stale after a schema change, or the server no
// longer has it), nothing ran: the statement is prepared again and run once more. After any
// other failure but a unique violation it is deallocated, so that the connection's next
// append prepares it afresh rather than failing the same way until the connection is closed.
func (s *Store) runWire(ctx context.Context, c *directCall) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		c.out, c.final, c.ok, c.err = appendOutcome{}, nil, false, fmt.Errorf("acquire a connection: %w", err)
		return
	}
	defer conn.Release()
	for attempt := 0; ; attempt++ {
		s.runWireOn(ctx, conn, c)
		var pgErr *pgconn.PgError
		if !c.failed || !errors.As(c.err, &pgErr) {
			return
		}
		// The statement as the connection holds it is of no more use.
		_ = conn.Conn().Deallocate(ctx, directStatementName(c.variant))
		if attempt > 0 || !staleStatement(pgErr.Code) {
			return
		}
	}
}

// staleStatement reports whether a server error code says that a prepared statement could not
// run as prepared, before it did anything: "cached plan must not change result type" (a
// column's type or collation changed under it; feature_not_supported) or an unknown statement.
func staleStatement(code string) bool { return code == "0A000" || code == "26000" }

// runWireOn is runWire on an acquired connection, once.
func (s *Store) runWireOn(ctx context.Context, conn *pgxpool.Conn, c *directCall) {
	c.failed = false
	sd, err := conn.Conn().Prepare(ctx, directStatementName(c.variant), c.q)
	if err != nil {
		c.out, c.final, c.ok, c.err = appendOutcome{}, nil, false, fmt.Errorf("append in one statement: prepare: %w", err)
		return
	}
	bp := wireBufs.Get().(*[]byte)
	params, formats, buf, err := encodeDirectParams((*bp)[:0], sd.ParamOIDs, c.args)
	defer func() {
		if cap(buf) <= maxWireBuf {
			*bp = buf[:0]
			wireBufs.Put(bp)
		}
	}()
	if err != nil {
		// Not a type this encoder knows: pgx's own path.
		rows, _ := conn.Query(ctx, c.q, c.args...)
		c.answer(rows)
		return
	}
	rr := conn.Conn().PgConn().ExecPrepared(ctx, sd.Name, params, formats, []int16{pgx.BinaryFormatCode})
	c.out, c.final, c.ok, c.err = readDirectWire(rr, c.sid, c.sk, c.events, c.opts)
	var pgErr *pgconn.PgError
	c.failed = errors.As(c.err, &pgErr)
	if c.failed && pgErr.Code == codeUniqueViolation {
		c.err = nil // nothing written: take the locking path (readDirect)
	}
}

// encodeDirectParams encodes args in the binary format of the parameter types oids, one after
// the other into buf, and returns each one's bytes (nil for SQL NULL), their formats and the
// buffer (buf, or a larger one), which holds them all. It knows
// the types of qDirect's parameters: bigint (int64, *int64), text (string), bytea ([]byte),
// text[] ([]string) and bytea[] ([][]byte); any other pair is an error.
func encodeDirectParams(buf []byte, oids []uint32, args []any) ([][]byte, []int16, []byte, error) {
	if len(oids) != len(args) {
		return nil, nil, buf, fmt.Errorf("%d parameters for %d arguments", len(oids), len(args))
	}
	size := 0
	for _, a := range args {
		switch v := a.(type) {
		case []string:
			size += 20 + 4*len(v)
			for _, s := range v {
				size += len(s)
			}
		case [][]byte:
			size += 20 + 4*len(v)
			for _, b := range v {
				size += len(b)
			}
		case string:
			size += len(v)
		case []byte:
			size += len(v)
		default:
			size += 8
		}
	}
	if cap(buf) < size {
		buf = make([]byte, 0, size)
	}
	params := make([][]byte, len(args))
	formats := make([]int16, len(args))
	for i, a := range args {
		formats[i] = pgx.BinaryFormatCode
		start := len(buf)
		switch v := a.(type) {
		case int64:
			if oids[i] != oidInt8 {
				return nil, nil, buf, errWireType
			}
			buf = binary.BigEndian.AppendUint64(buf, uint64(v))
		case *int64:
			if oids[i] != oidInt8 {
				return nil, nil, buf, errWireType
			}
			if v == nil {
				continue // NULL
			}
			buf = binary.BigEndian.AppendUint64(buf, uint64(*v))
		case string:
			if oids[i] != oidText {
				return nil, nil, buf, errWireType
			}
			buf = append(buf, v...)
		case []byte:
			if oids[i] != oidBytea {
				return nil, nil, buf, errWireType
			}
			if v == nil {
				continue // NULL
			}
			buf = append(buf, v...)
		case []string:
			if oids[i] != oidTextArray {
				return nil, nil, buf, errWireType
			}
			buf = appendArrayHeader(buf, oidText, len(v))
			for _, s := range v {
				buf = binary.BigEndian.AppendUint32(buf, uint32(len(s)))
				buf = append(buf, s...)
			}
		case [][]byte:
			if oids[i] != oidByteArray {
				return nil, nil, buf, errWireType
			}
			buf = appendArrayHeader(buf, oidBytea, len(v))
			for _, b := range v {
				buf = binary.BigEndian.AppendUint32(buf, uint32(len(b)))
				buf = append(buf, b...)
			}
		default:
			return nil, nil, buf, errWireType
		}
		params[i] = buf[start:len(buf):len(buf)]
	}
	return params, formats, buf, nil
}

// errWireType is an argument that encodeDirectParams does not encode for its parameter's type.
var errWireType = errors.New("append in one statement: a parameter of a type not encoded here")

// appendArrayHeader appends the header of a one-dimensional array of n elements of type elem
// without NULLs, lower bound 1 (array_recv's format; an empty array too has its dimension, of
// length 0, as pgx sends it).
func appendArrayHeader(buf []byte, elem uint32, n int) []byte {
	buf = binary.BigEndian.AppendUint32(buf, 1) // dimensions
	buf = binary.BigEndian.AppendUint32(buf, 0) // no NULL
	buf = binary.BigEndian.AppendUint32(buf, elem)
	buf = binary.BigEndian.AppendUint32(buf, uint32(n))
	return binary.BigEndian.AppendUint32(buf, 1) // lower bound
}

// readDirectWire is readDirect for the rows of a statement sent by runWire, in the binary
// format: the kind (text), a bigint, two texts and a bytea, any but the first possibly NULL.
func readDirectWire(rr *pgconn.ResultReader, sid string, sk int64, events []*contract.EncodedEvent, opts store.AppendOptions) (out appendOutcome, final error, done bool, err error) {
	lk := &appendLookup{sk: sk, last: -1, byKey: map[string]existingEvent{}, byID: map[string]int64{}, maxOrd: -1}
	wrote := false
	var prev int64
	var bad error
	for rr.NextRow() {
		vals := rr.Values()
		if bad != nil {
			continue
		}
		if len(vals) != 5 || len(vals[0]) != 1 || len(vals[1]) != 8 {
			bad = fmt.Errorf("append in one statement: unexpected row of %d columns", len(vals))
			continue
		}
		v := int64(binary.BigEndian.Uint64(vals[1]))
		switch vals[0][0] {
		case 'a':
			wrote, prev = true, v
		case 's':
			lk.last = v
		case 'd':
			key, id := string(vals[3]), string(vals[2])
			lk.byKey[key] = existingEvent{seq: v, data: append([]byte(nil), vals[4]...)}
			lk.byID[id] = v
		}
	}
	if _, err := rr.Close(); err != nil {
		return out, nil, false, fmt.Errorf("append in one statement: %w", err)
	}
	if bad != nil {
		return out, nil, false, bad
	}
	return directAnswer(sid, lk, wrote, prev, events, opts)
}
