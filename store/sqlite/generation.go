package sqlite

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/sessiond/sessiond/contract"
)

// Generations of a log.
//
// A generation is a run of 2^bits consecutive sequences of a session's log (gen = seq >> bits,
// 65,536 events by default). The open generation is the one the next event goes in; the ones
// before it are sealed: every one of their sequences is taken, so their keys never change
// again (compaction aside, which only removes).
//
// Event ids and idempotency keys are often random (UUIDv4). An index over them takes each
// insert to a page of its own, and SQLite's WAL writes whole pages: with two such indexes an
// append wrote about 9 KB per 470-byte event. So nothing on disk indexes the open generation.
// The writer keeps its keys and ids in memory (openIndex: the hash of each, mapped to the
// event's sequence), built from the generation's rows the first time a session is appended
// to, and kept up to date as appends are released; an append writes its event row and no
// index entry. A key found in memory is checked against the row it points at (hashes may
// collide), so the memory is only a hint where to look, never the truth.
//
// The index also keeps, for each event appended through it since it was built, a digest of the
// event's content (contentSum), so that a resent event (a duplicate) is answered from memory,
// with no read: the same key hash and the same content sum, in an entry whose commit is durable
// (openIndex.published, storedDuplicates). Any other case (no sum: the events the index was
// rebuilt from; a different sum: maybe a conflict) reads the stored event as before.
//
// When an append fills a generation, the same transaction seals it: its keys and ids are
// written into event_keys and event_ids in key order (one pass each: dense pages, written
// once), and a Bloom filter of them is stored in event_filters. A new event is looked up in a
// sealed generation's table only when the filter says its key or id may be there (about 1 in
// 1,000 for one that is not). Filters are cached in memory (at most maxFilterBytes with the
// open indexes; the sessions appended to least recently lose theirs first) and built from the
// tables when a generation has none. A filter may hold more than its generation, never less.
//
// Readers look an event up by id or key in the open index when the writer has published one
// for the generation they see, and in the sealed generations' tables; without an index they
// scan the open generation's rows (at most 2^bits).

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
func keyHash[T ~string | ~[]byte](kind byte, s T) uint64 {
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
func readGenerationBits(ctx context.Context, q rowQuerier) (uint, error) {
	bits, err := readSetting(ctx, q, "generation_bits", 1, 40)
	return uint(bits), err
}

// gen returns the generation of sequence seq; -1 for seq -1 (an empty log).
func (w *writer) gen(seq int64) int64 { return seq >> w.bits }

// sealed returns the first generation of ss that is not sealed: the one its next event goes in.
func (w *writer) sealed(ss *sessState) int64 { return w.gen(ss.last + 1) }

// filter returns the filter of ss's sealed generation g: the cached one, else the stored one,
// else one built from the indexes and stored in the current transaction (an append, which has
// no savepoint, may be refused after this and leave it in the group). Either way it is right:
// it is built from the generation's tables as the same transaction holds them, so it goes with
// them, kept or rolled back (and then the next process builds it again).
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

// scanFilter builds the filter of ss's sealed generation g from its tables and stores it.
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
		if ss != keep && (len(ss.filters) > 0 || ss.open != nil) {
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
	w.dropOpen(ss)
}

// openEntryBytes is what one entry of an open index is counted for against maxFilterBytes
// (a slot of a Go map of uint64 to int32, with its share of the control bytes and slack);
// each event also has a content sum (contentSumBytes).
const openEntryBytes = 24

// contentSum is the digest of an event's content that the open index keeps to answer a
// duplicate without reading it: the first 128 bits of SHA-256 over the event's canonical bytes
// around its sequence (EncodedEvent.Around: the length of the head, the head, the tail). Two
// events have the same sum exactly when they have the same content in the sense of
// EncodedEvent.SameContent (the bytes around the sequence digits are the same; where the digits
// sit is fixed by the canonical JSON around them), barring a SHA-256 collision: equal sums are
// taken for the same content. Why SHA-256, 128 bits: a collision would answer a resent event
// with other content as a duplicate instead of a conflict, so the digest must be collision
// resistant, not merely well spread; SHA-256 needs no secret seed and no assumption about a
// non-cryptographic hash, and truncated to 128 bits an accidental collision among any number of
// events a store will ever hold is out of reach (2^-128 per comparison), while a deliberate one
// (2^64 work) would only mislead its maker about its own retry, since the answer writes
// nothing. It costs about 0.3–0.5 µs for a 470-byte event (SHA-NI), computed by the appending
// caller's goroutine (Store.Append), not by the writer; the sums live in memory only, never on
// disk, so the choice can change freely. The zero sum means unknown.
type contentSum [16]byte

// contentSumBytes is what one content sum is counted for against maxFilterBytes.
const contentSumBytes = 16

// contentSumOf returns ev's contentSum.
func contentSumOf(ev *contract.EncodedEvent) contentSum {
	head, tail := ev.Around()
	h := sha256.New()
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(head)))
	h.Write(n[:])
	h.Write(head)
	h.Write(tail)
	var full [sha256.Size]byte
	var sum contentSum
	copy(sum[:], h.Sum(full[:0]))
	return sum
}

// contentSums returns the contentSum of each event.
func contentSums(events []*contract.EncodedEvent) []contentSum {
	out := make([]contentSum, len(events))
	for i, ev := range events {
		out[i] = contentSumOf(ev)
	}
	return out
}

// openIndex holds the key and id hashes of the events of a session's open generation gen:
// hash (keyHash 'k' for a key, 'i' for an id) -> the event's offset in the generation. A hash
// that two strings share (possible, never seen) keeps its further offsets in more. The writer
// adds to it under mu and readers look up under it; dead marks an index the writer dropped.
//
// sums[off] is the contentSum of the event at offset off when the writer appended it through
// this index (zero for the events it was built from, and past the end). The writer adds
// entries when an append has succeeded, before its transaction commits: readers
// answer from a sum only below published, the entries whose commit the writer has numbered
// (publishSums), and only once that commit is durable and the index still live (an
// index is dropped, dead, before a failed commit is settled).
type openIndex struct {
	gen       int64
	mu        sync.RWMutex
	offs      map[uint64]int32
	more      map[uint64][]int32
	sums      []contentSum
	published int
	dead      bool

	queued bool // the writer's: x is in writer.sumsPending
}

// setSum records the content sum of the event at offset off (the writer, under mu).
func (x *openIndex) setSum(off int32, sum contentSum) {
	if n, had := int(off)+1, len(x.sums); had < n {
		x.sums = slices.Grow(x.sums, n-had)[:n]
		clear(x.sums[had:]) // no sum for the offsets in between
	}
	x.sums[off] = sum
}

// sumCandidate is a sequence that may hold a key, with the content sum a reader may answer
// from (zero when there is none, or it is not published yet).
type sumCandidate struct {
	seq int64
	sum contentSum
}

// readSums is readCandidates for a duplicate: the candidates of hash h, each with its
// published content sum; live is false (no candidates) when the index is dead.
func (x *openIndex) readSums(dst []sumCandidate, h uint64, bits uint) (cands []sumCandidate, live bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.dead {
		return nil, false
	}
	var buf [4]int64
	base := x.gen << bits
	for _, seq := range x.candidates(buf[:0], h, bits) {
		c := sumCandidate{seq: seq}
		if off := int(seq - base); off < x.published {
			c.sum = x.sums[off]
		}
		dst = append(dst, c)
	}
	return dst, true
}

// isDead reports whether the writer dropped x.
func (x *openIndex) isDead() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.dead
}

func (x *openIndex) add(h uint64, off int32) {
	if _, ok := x.offs[h]; !ok {
		x.offs[h] = off
		return
	}
	if x.more == nil {
		x.more = map[uint64][]int32{}
	}
	x.more[h] = append(x.more[h], off)
}

// readCandidates is candidates for a reader: it takes mu, and answers live false (no
// candidates) when the index is dead or, with gen >= 0, is not generation gen's.
func (x *openIndex) readCandidates(dst []int64, h uint64, bits uint, gen int64) (cands []int64, live bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.dead || (gen >= 0 && x.gen != gen) {
		return nil, false
	}
	return x.candidates(dst, h, bits), true
}

// candidates appends to dst the sequences whose key or id may have hash h (the caller holds
// mu for reading, or is the writer).
func (x *openIndex) candidates(dst []int64, h uint64, bits uint) []int64 {
	off, ok := x.offs[h]
	if !ok {
		return dst
	}
	base := x.gen << bits
	dst = append(dst, base+int64(off))
	for _, o := range x.more[h] {
		dst = append(dst, base+int64(o))
	}
	return dst
}

func (x *openIndex) entries() int { return len(x.offs) }

// bytes is what x is counted for against maxFilterBytes.
func (x *openIndex) bytes() int { return openEntryBytes*x.entries() + contentSumBytes*len(x.sums) }

// openIndex returns ss's open index, building it from the open generation's rows when the
// writer has none (first append since Open, after an eviction, a compaction or an import).
func (w *writer) openIndex(ss *sessState) (*openIndex, error) {
	g := w.gen(ss.last + 1)
	if ss.open != nil && ss.open.gen == g {
		return ss.open, nil
	}
	w.dropOpen(ss)
	x := &openIndex{gen: g, offs: map[uint64]int32{}}
	if g<<w.bits <= ss.last {
		rows, err := w.st.openRows.QueryContext(w.ctx, ss.sk, g<<w.bits)
		if err != nil {
			return nil, fatal("load the open generation", err)
		}
		var id, key sql.RawBytes
		var seq int64
		for rows.Next() {
			if err := rows.Scan(&seq, &id, &key); err != nil {
				rows.Close()
				return nil, fatal("load the open generation", err)
			}
			off := int32(seq - g<<w.bits)
			x.add(keyHash('k', key), off)
			x.add(keyHash('i', id), off)
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return nil, fatal("load the open generation", err)
		}
		rows.Close()
	}
	w.setOpen(ss, x)
	w.maybeEvict(ss)
	return x, nil
}

// setOpen makes x ss's open index. Readers are shown it once the group commits (publishOpen).
func (w *writer) setOpen(ss *sessState, x *openIndex) {
	ss.open = x
	ss.openBytes = x.bytes()
	w.filterBytes += ss.openBytes
	w.unpublished = append(w.unpublished, ss)
}

// publishOpen shows readers the open indexes set in the group just committed (commit n): those
// its sessions still have. An index built inside a group holds what the group's transaction
// sees, which may lack events that committed snapshots still hold (a compaction of the same
// group deleted them), and a reader trusts a published index's absence (eventBy). Published
// only once the commit is numbered, an index's absence makes the reader wait for that commit
// to be durable (visible), as a scan that finds the events gone would. Until then readers of
// the session find no index and scan the open generation's rows of their snapshot.
func (w *writer) publishOpen() {
	for _, ss := range w.unpublished {
		if ss.open != nil {
			w.s.openIdx.Store(ss.sk, ss.open)
		}
	}
	clear(w.unpublished)
	w.unpublished = w.unpublished[:0]
}

// dropOpen forgets ss's open index (readers see it dead).
func (w *writer) dropOpen(ss *sessState) {
	if ss.open == nil {
		return
	}
	ss.open.mu.Lock()
	ss.open.dead = true
	ss.open.mu.Unlock()
	w.s.openIdx.CompareAndDelete(ss.sk, ss.open)
	w.filterBytes -= ss.openBytes
	ss.open, ss.openBytes = nil, 0
}

// insertedEvent is an event an append inserted: its sequence, the hashes of its key and id,
// and its content sum.
type insertedEvent struct {
	seq     int64
	key, id uint64
	sum     contentSum
}

// noteInserted adds the events of an append that succeeded (and only then: the events of a
// refused append were never inserted) to ss's open index. The event that
// fills a generation seals it (seal) and opens the next one, empty.
func (w *writer) noteInserted(ss *sessState, evs []insertedEvent) error {
	x := ss.open
	if x != nil {
		x.mu.Lock()
	}
	for _, e := range evs {
		g := w.gen(e.seq)
		if x != nil && x.gen != g {
			// Not the generation the index is of (never expected): drop the index, the
			// next append rebuilds it from the rows.
			x.mu.Unlock()
			w.dropOpen(ss)
			x = nil
		}
		if x != nil {
			off := int32(e.seq - g<<w.bits)
			x.add(e.key, off)
			x.add(e.id, off)
			if e.sum != (contentSum{}) {
				x.setSum(off, e.sum)
				if !x.queued {
					x.queued = true
					w.sumsPending = append(w.sumsPending, x)
				}
			}
		}
		if e.seq != (g+1)<<w.bits-1 {
			continue
		}
		if x != nil {
			x.mu.Unlock()
		}
		if err := w.seal(ss, g); err != nil {
			return err
		}
		x = &openIndex{gen: g + 1, offs: map[uint64]int32{}}
		w.setOpen(ss, x)
		x.mu.Lock()
	}
	if x != nil {
		w.filterBytes -= ss.openBytes
		ss.openBytes = x.bytes()
		w.filterBytes += ss.openBytes
		x.mu.Unlock()
	}
	w.maybeEvict(ss)
	return nil
}

// publishSums lets readers answer from the content sums the writer added to open indexes in the
// current group (openIndex.published). It runs once the group's commit is numbered, before
// COMMIT: a reader that sees the sums then waits for that commit to be durable (Store.visible),
// and a commit that fails drops every open index (writer.failAll) before it is settled.
func (w *writer) publishSums() {
	for _, x := range w.sumsPending {
		x.mu.Lock()
		x.published = len(x.sums)
		x.mu.Unlock()
		x.queued = false
	}
	clear(w.sumsPending)
	w.sumsPending = w.sumsPending[:0]
}

// seal writes the tables and the filter of ss's generation g, which the log has just moved
// past, in the current transaction. The filter comes from the open index when the writer has
// it, else from the tables when first needed.
func (w *writer) seal(ss *sessState, g int64) error {
	lo, hi := g<<w.bits, (g+1)<<w.bits-1
	if _, err := w.st.sealKeys.ExecContext(w.ctx, ss.sk, g, lo, hi); err != nil {
		return fatal(fmt.Sprintf("seal generation %d: keys", g), err)
	}
	if _, err := w.st.sealIDs.ExecContext(w.ctx, ss.sk, g, lo, hi); err != nil {
		return fatal(fmt.Sprintf("seal generation %d: ids", g), err)
	}
	x := ss.open
	if x == nil || x.gen != g {
		return nil
	}
	f := newBloom(2 << w.bits)
	for h := range x.offs {
		f.add(h)
	}
	if _, err := w.st.storeFilter.ExecContext(w.ctx, ss.sk, g, f.encode()); err != nil {
		return fatal("store generation filter", err)
	}
	w.dropOpen(ss)
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

// openMatch looks hash h (of kind 'k' with key, or 'i' with id) up in ss's open index and
// returns the event whose key (or id) it is: its sequence and bytes.
func (w *writer) openMatch(ss *sessState, kind byte, s string) (seq int64, data []byte, found bool, err error) {
	var buf [4]int64
	for _, c := range ss.open.candidates(buf[:0], keyHash(kind, s), w.bits) {
		// Scanned into the loop's own variables: their addresses escape, which moves them to
		// the heap, and a new event (no candidate) then allocates nothing.
		var id, key string
		var row []byte
		err := w.st.eventAt.QueryRowContext(w.ctx, ss.sk, c).Scan(&id, &key, &row)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return 0, nil, false, fatal("look up event", err)
		}
		if (kind == 'k' && key == s) || (kind == 'i' && id == s) {
			return c, row, true, nil
		}
	}
	return 0, nil, false, nil
}

// findStored looks up an event's key (hash hk) and id (hash hid; none when id is "", which is
// never an event id) in ss's log: the open generation through its index, then the sealed
// generations (those before sealed) newest first (retries are usually of recent events),
// through their filters, in one pass over the filters. The key is what decides first: the id
// is looked for only when no generation holds the key. The open index must be loaded.
func (w *writer) findStored(ss *sessState, key, id string, hk, hid uint64, sealed int64) (keySeq int64, keyData []byte, keyFound bool, idSeq int64, idFound bool, err error) {
	if keySeq, keyData, keyFound, err = w.openMatch(ss, 'k', key); keyFound || err != nil {
		return keySeq, keyData, keyFound, 0, false, err
	}
	var idGens [4]int64 // the sealed generations that may hold the id; almost always none
	maybeID := idGens[:0]
	for g := sealed - 1; g >= 0; g-- {
		f, err := w.filter(ss, g)
		if err != nil {
			return 0, nil, false, 0, false, err
		}
		kHit, iHit := f.has2(hk, hid)
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
	if id == "" {
		return 0, nil, false, 0, false, nil
	}
	if idSeq, _, idFound, err = w.openMatch(ss, 'i', id); idFound || err != nil {
		return 0, nil, false, idSeq, idFound, err
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

// probeKey looks the key up in sealed generation g's table.
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

// qSealKeys and qSealIDs write the keys and ids of session ?1's generation ?2 (sequences ?3 to
// ?4) into its table, in key order.
var (
	qSealKeys = `INSERT INTO event_keys (sk, gen, idem_key, seq) ` +
		inBothTables(`SELECT sk, ?2, idem_key, seq FROM %[1]s WHERE rid BETWEEN (?1 << 32) + ?3 AND (?1 << 32) + ?4`) + ` ORDER BY 3`
	qSealIDs = `INSERT INTO event_ids (sk, gen, event_id, seq) ` +
		inBothTables(`SELECT sk, ?2, event_id, seq FROM %[1]s WHERE rid BETWEEN (?1 << 32) + ?3 AND (?1 << 32) + ?4`) + ` ORDER BY 3`
)
