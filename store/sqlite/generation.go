package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Generations of a log.
//
// Event ids and idempotency keys are often random (UUIDv4). In one index over a whole log, each
// random key lands on its own page: in a log of a million events the index no longer fits the
// page cache, every insert walks a deep tree and dirties a page of its own, and appends ran at
// 60% of the speed of a new log. So the unique indexes are on (sk, gen, key), where a
// generation is a run of 2^bits consecutive sequences (gen = seq >> bits, 65,536 events by
// default): an append inserts into the current generation's subtree, which is as small in an old
// log as in a new one.
//
// The indexes then enforce uniqueness within a generation only; the writer enforces it across
// generations. A generation is sealed once the log has moved past it: every one of its
// sequences is taken, so its keys never change again (compaction aside, which only removes).
// Each sealed generation of a session has a Bloom filter of its keys and ids, built from the
// indexes the first time the writer needs it (one scan of the generation, once), stored in
// event_filters, and cached in memory (at most maxFilterBytes in all; the sessions appended to
// least recently lose theirs first). A new event is looked up in a sealed generation's index
// only when the filter says its key or id may be there (about 1 in 1,000 for one that is not);
// in generations a batch has itself moved past, and in the current one, it is always looked up.
// A filter may hold more than its generation, never less: a filter built inside a savepoint
// that rolls back describes a generation that was sealed before it, so it stays right.
//
// Readers look an event up by id or key with one index lookup per generation, newest first
// (eventByGen).

// maxFilterBytes bounds the memory of the writer's filters; past it, the filters of the
// sessions appended to least recently are dropped (and rebuilt when next needed).
var maxFilterBytes = 64 << 20 // a variable for tests

// filterBitsPerKey sizes the filters: 16 bits per key and 7 bits set per key give a false
// positive rate of about 0.1% for a blocked filter (measured by TestBloom).
const (
	filterBitsPerKey = 16
	filterProbes     = 7
)

// keyHash hashes an idempotency key (kind 'k') or an event id (kind 'i') for the filters: the
// same string as a key and as an id must not share bits. Filters are stored, so the hash must
// never change: FNV-1a (64 bits), then MurmurHash3's finalizer to spread its bits.
func keyHash(kind byte, s string) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	h = (h ^ uint64(kind)) * prime
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * prime
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// bloom is a blocked Bloom filter: the bits of a key all fall in one 64-byte block, so a lookup
// touches one cache line.
type bloom struct {
	blocks [][8]uint64
}

func newBloom(keys int) *bloom {
	n := max((keys*filterBitsPerKey+511)/512, 1)
	return &bloom{blocks: make([][8]uint64, n)}
}

func (b *bloom) bytes() int { return len(b.blocks) * 64 }

// encode returns the filter as stored: its blocks, little-endian.
func (b *bloom) encode() []byte {
	out := make([]byte, 0, b.bytes())
	for i := range b.blocks {
		for _, w := range b.blocks[i] {
			out = binary.LittleEndian.AppendUint64(out, w)
		}
	}
	return out
}

// decodeBloom is the inverse of encode.
func decodeBloom(data []byte) (*bloom, error) {
	if len(data) == 0 || len(data)%64 != 0 {
		return nil, fmt.Errorf("stored filter of %d bytes, want a multiple of 64", len(data))
	}
	b := &bloom{blocks: make([][8]uint64, len(data)/64)}
	for i := range b.blocks {
		for j := range b.blocks[i] {
			b.blocks[i][j] = binary.LittleEndian.Uint64(data[i*64+j*8:])
		}
	}
	return b, nil
}

// locate returns h's block and the bits that choose its positions in the block.
func (b *bloom) locate(h uint64) (*[8]uint64, uint64) {
	i := ((h >> 32) * uint64(len(b.blocks))) >> 32
	return &b.blocks[i], h * 0x9E3779B97F4A7C15 >> 1
}

func (b *bloom) add(h uint64) {
	blk, y := b.locate(h)
	for range filterProbes {
		p := y & 511
		blk[p>>6] |= 1 << (p & 63)
		y >>= 9
	}
}

// has2 reports whether each of two hashes may have been added (false: it certainly was not).
// Both blocks are located before either is read, so that the two memory loads overlap.
func (b *bloom) has2(h1, h2 uint64) (bool, bool) {
	blk1, y1 := b.locate(h1)
	blk2, y2 := b.locate(h2)
	return blockHas(blk1, y1), blockHas(blk2, y2)
}

func blockHas(blk *[8]uint64, y uint64) bool {
	for range filterProbes {
		p := y & 511
		if blk[p>>6]&(1<<(p&63)) == 0 {
			return false
		}
		y >>= 9
	}
	return true
}

// readGenerationBits reads the database's generation size.
func readGenerationBits(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (uint, error) {
	var bits int64
	if err := q.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = 'generation_bits'`).Scan(&bits); err != nil {
		return 0, fmt.Errorf("read generation_bits setting: %w", err)
	}
	if bits < 1 || bits > 40 {
		return 0, fmt.Errorf("generation_bits setting is %d, want 1 to 40", bits)
	}
	return uint(bits), nil
}

// gen returns the generation of sequence seq; -1 for seq -1 (an empty log).
func (w *writer) gen(seq int64) int64 { return seq >> w.bits }

// sealed returns the first generation of ss that is not sealed: the one its next event goes in.
func (w *writer) sealed(ss *sessState) int64 { return w.gen(ss.last + 1) }

// filter returns the filter of ss's sealed generation g: the cached one, else the stored one,
// else one built from the indexes (and stored, in the current savepoint: should it roll back,
// the next process builds it again).
func (w *writer) filter(ss *sessState, g int64) (*bloom, error) {
	if g < int64(len(ss.filters)) && ss.filters[g] != nil {
		return ss.filters[g], nil
	}
	f, err := w.loadFilter(ss, g)
	if err != nil {
		return nil, err
	}
	w.cacheFilter(ss, g, f)
	w.maybeEvict(ss)
	return f, nil
}

func (w *writer) loadFilter(ss *sessState, g int64) (*bloom, error) {
	var data []byte
	err := w.st.loadFilter.QueryRowContext(w.ctx, ss.sk, g).Scan(&data)
	if err == nil {
		f, err := decodeBloom(data)
		if err != nil {
			return nil, fatal(fmt.Sprintf("load filter of generation %d", g), err)
		}
		return f, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fatal("load generation filter", err)
	}
	return w.scanFilter(ss, g)
}

// scanFilter builds the filter of ss's generation g from the indexes and stores it.
func (w *writer) scanFilter(ss *sessState, g int64) (*bloom, error) {
	f := newBloom(2 << w.bits)
	for _, p := range []struct {
		kind byte
		stmt *sql.Stmt
	}{{'k', w.st.genKeys}, {'i', w.st.genIDs}} {
		rows, err := p.stmt.QueryContext(w.ctx, ss.sk, g)
		if err != nil {
			return nil, fatal("build generation filter", err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				rows.Close()
				return nil, fatal("build generation filter", err)
			}
			f.add(keyHash(p.kind, s))
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return nil, fatal("build generation filter", err)
		}
		rows.Close()
	}
	if _, err := w.st.storeFilter.ExecContext(w.ctx, ss.sk, g, f.encode()); err != nil {
		return nil, fatal("store generation filter", err)
	}
	return f, nil
}

// maybeEvict keeps the filters and open lists within maxFilterBytes: past it, those of the
// sessions appended to least recently (keep's aside) are dropped until three quarters of the
// budget is left. Should keep alone hold more, the next attempt waits until another sixteenth
// of the budget has been taken, so that appends to one huge session do not scan the cache each
// time.
func (w *writer) maybeEvict(keep *sessState) {
	if w.filterBytes <= maxFilterBytes || w.filterBytes <= w.evictedTo+maxFilterBytes/16 {
		return
	}
	var victims []*sessState
	for _, ss := range w.cache {
		if ss != keep && (len(ss.filters) > 0 || cap(ss.open) > 0) {
			victims = append(victims, ss)
		}
	}
	slices.SortFunc(victims, func(a, b *sessState) int { return cmp.Compare(a.used, b.used) })
	for _, ss := range victims {
		if w.filterBytes <= maxFilterBytes*3/4 {
			break
		}
		w.dropFilters(ss)
	}
	w.evictedTo = w.filterBytes
}

func (w *writer) dropFilters(ss *sessState) {
	for _, f := range ss.filters {
		if f != nil {
			w.filterBytes -= f.bytes()
		}
	}
	ss.filters = nil
	w.filterBytes -= 8 * cap(ss.open)
	ss.open, ss.openLive = nil, false
}

// insertedEvent is an event an append inserted: its sequence and the hashes of its key and id.
type insertedEvent struct {
	seq     int64
	key, id uint64
}

// noteInserted records the events of an append whose savepoint was released (and only then:
// what a rolled-back append inserted never reaches the lists) in ss's open generation list.
// The list starts with a generation's first event; with its last event the list is complete
// and becomes the generation's filter, stored and cached, so sealing a generation costs no
// scan. A generation whose first event was written before a restart has no list and gets its
// filter from a scan when first needed.
func (w *writer) noteInserted(ss *sessState, evs []insertedEvent) error {
	for _, e := range evs {
		g := w.gen(e.seq)
		if e.seq == g<<w.bits {
			w.filterBytes -= 8 * cap(ss.open)
			ss.open, ss.openGen, ss.openLive = make([]uint64, 0, 16), g, true
			w.filterBytes += 8 * cap(ss.open)
		}
		if !ss.openLive || ss.openGen != g {
			continue
		}
		before := cap(ss.open)
		ss.open = append(ss.open, e.key, e.id)
		w.filterBytes += 8 * (cap(ss.open) - before)
		if e.seq == (g+1)<<w.bits-1 {
			if err := w.sealOpen(ss); err != nil {
				return err
			}
		}
	}
	w.maybeEvict(ss)
	return nil
}

// sealOpen turns ss's complete open list into the filter of its generation.
func (w *writer) sealOpen(ss *sessState) error {
	g := ss.openGen
	f := newBloom(2 << w.bits)
	for _, h := range ss.open {
		f.add(h)
	}
	if _, err := w.st.storeFilter.ExecContext(w.ctx, ss.sk, g, f.encode()); err != nil {
		return fatal("store generation filter", err)
	}
	w.filterBytes -= 8 * cap(ss.open)
	ss.open, ss.openLive = nil, false
	w.cacheFilter(ss, g, f)
	return nil
}

// cacheFilter keeps f as the filter of ss's generation g.
func (w *writer) cacheFilter(ss *sessState, g int64, f *bloom) {
	for int64(len(ss.filters)) <= g {
		ss.filters = append(ss.filters, nil)
	}
	if old := ss.filters[g]; old != nil {
		w.filterBytes -= old.bytes()
	}
	ss.filters[g] = f
	w.filterBytes += f.bytes()
}

// findKey looks the idempotency key up in generations hi down to lo of ss, as findStored does.
func (w *writer) findKey(ss *sessState, key string, sealed, lo, hi int64) (seq int64, data []byte, found bool, err error) {
	seq, data, found, _, _, err = w.findStored(ss, key, "", keyHash('k', key), 0, sealed, lo, hi)
	return seq, data, found, err
}

// findStored looks up an event's key (hash hk) and id (hash hid; none when id is "", which is
// never an event id) in generations hi down to lo of ss (newest first: retries are usually of
// recent events), through the filters in generations before sealed, in one pass over the
// filters. The key is what decides first: the id is looked for only when no generation holds
// the key.
func (w *writer) findStored(ss *sessState, key, id string, hk, hid uint64, sealed, lo, hi int64) (keySeq int64, keyData []byte, keyFound bool, idSeq int64, idFound bool, err error) {
	var idGens [4]int64 // the generations that may hold the id; almost always none
	maybeID := idGens[:0]
	for g := hi; g >= lo; g-- {
		kHit, iHit := true, true
		if g < sealed {
			f, err := w.filter(ss, g)
			if err != nil {
				return 0, nil, false, 0, false, err
			}
			kHit, iHit = f.has2(hk, hid)
		}
		if iHit && id != "" {
			maybeID = append(maybeID, g)
		}
		if !kHit {
			continue
		}
		if keySeq, keyData, keyFound, err = w.probeKey(ss, g, key); keyFound || err != nil {
			return keySeq, keyData, keyFound, 0, false, err
		}
	}
	for _, g := range maybeID {
		err := w.st.eventByID.QueryRowContext(w.ctx, ss.sk, g, id).Scan(&idSeq)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return 0, nil, false, 0, false, fatal("look up event id", err)
		}
		return 0, nil, false, idSeq, true, nil
	}
	return 0, nil, false, 0, false, nil
}

// probeKey looks the key up in generation g's index.
func (w *writer) probeKey(ss *sessState, g int64, key string) (seq int64, data []byte, found bool, err error) {
	err = w.st.eventByKey.QueryRowContext(w.ctx, ss.sk, g, key).Scan(&seq, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil, false, nil
	}
	if err != nil {
		return 0, nil, false, fatal("look up idempotency key", err)
	}
	return seq, data, true, nil
}
