package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
)

// The hash chain of a session's log (tamper evidence), decided here once for every driver,
// for fsck, archives and exports.
//
// Each event has a hash: SHA-256 over its predecessor's hash (32 bytes) followed by the event's
// stored bytes (StoredEvent.Data, the canonical JSON with its sequence, exactly what readers
// receive):
//
//	hash(n) = SHA-256(hash(n-1) || data(n))
//
// Every link is computed at append, in order; the drivers store the hash with every
// ChainEvery-th event (ChainMarked: sequences 15, 31, 47, ...) and the last event's in the
// session's head. Storing all of them cost 12% more bytes written per event in W1 and 15% in
// W2 (docs/benchmarks.md), over the 10% the design allows; a mark every 16 events costs about
// 2 bytes an event and still places a rewritten event within 16 sequences (fsck), and the head
// covers the whole log.
//
// The predecessor of a session's first event (sequence 0) is ChainGenesis, 32 zero bytes. A
// fork is a session of its own: its first event chains to ChainGenesis too (its events are new
// events built from the parent's, not copies of the parent's bytes, and its lineage in the
// session record says where it came from). The session's head (on both drivers the
// session_heads row) keeps the last sequence and the last event's hash, written in the commit
// of every append; a compaction records the hash of the last event it deletes as the session's
// chain base, the predecessor of the first event it keeps. So a log verifies when, starting
// from its base (ChainGenesis when none is recorded), every stored event's hash is the chain
// hash of its bytes and the last one is the head.
//
// Stores made before the chain existed are brought to it by their migration, which computes
// every stored event's hash in order. A session compacted before that has no recorded base: its
// first kept event chains to ChainGenesis, as if it began the log (its predecessor is gone).

// ChainEvery is how many events apart the stored hashes of a log are (ChainMarked).
const ChainEvery = 16

// ChainMarked reports whether the event at sequence seq is stored with its hash: every
// ChainEvery-th event, 15, 31, 47, ...
func ChainMarked(seq int64) bool { return seq%ChainEvery == ChainEvery-1 }

// ChainHash is one link of the chain: a SHA-256 digest.
type ChainHash = [sha256.Size]byte

// ChainGenesis is the predecessor of the first event of every session's log: 32 zero bytes.
var ChainGenesis ChainHash

// ChainNext returns the hash of the event whose stored bytes are data and whose predecessor's
// hash is prev: SHA-256(prev || data).
func ChainNext(prev ChainHash, data []byte) ChainHash {
	h := sha256.New()
	h.Write(prev[:])
	h.Write(data)
	var out ChainHash
	h.Sum(out[:0])
	return out
}

// Chainer computes successive links of a chain with one hash state, allocating nothing per
// link: for long runs of events (verifying an export, a backfill).
type Chainer struct {
	h    hash.Hash
	head ChainHash
}

// NewChainer returns a Chainer whose next link follows prev.
func NewChainer(prev ChainHash) *Chainer { return &Chainer{h: sha256.New(), head: prev} }

// Add returns the hash of the event whose stored bytes are data, following the last one added
// (or prev), and makes it the head.
func (c *Chainer) Add(data []byte) ChainHash {
	c.h.Reset()
	c.h.Write(c.head[:])
	c.h.Write(data)
	c.h.Sum(c.head[:0])
	return c.head
}

// Head returns the hash of the last event added (prev when none was).
func (c *Chainer) Head() ChainHash { return c.head }

// ChainEvents returns the hashes of evs, events that follow the event whose hash is prev, in
// order (hashes[i] is evs[i]'s). A driver calls it on AppendPlan.Added with its session's head
// hash, stores hashes[i] with evs[i] when ChainMarked(evs[i].Sequence), and the last one as the
// new head, in the same commit.
func ChainEvents(prev ChainHash, evs []StoredEvent) []ChainHash {
	if len(evs) == 0 {
		return nil
	}
	out := make([]ChainHash, len(evs))
	if len(evs) == 1 {
		out[0] = ChainNext(prev, evs[0].Data)
		return out
	}
	c := NewChainer(prev)
	for i := range evs {
		out[i] = c.Add(evs[i].Data)
	}
	return out
}

// ChainHead returns the head a log's head row holds, as stored: hash when it is 32 bytes, or
// ChainGenesis when it is nil (an empty log). ok is false for any other length (damage).
func ChainHead(stored []byte) (h ChainHash, ok bool) {
	if stored == nil {
		return ChainGenesis, true
	}
	if len(stored) != len(h) {
		return h, false
	}
	copy(h[:], stored)
	return h, true
}

// ParseChainHash parses a hash written as 64 lower-case hexadecimal digits.
func ParseChainHash(s string) (ChainHash, error) {
	var h ChainHash
	if len(s) != 2*len(h) {
		return h, fmt.Errorf("a chain hash is %d hexadecimal digits, got %d", 2*len(h), len(s))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("a chain hash is hexadecimal: %w", err)
	}
	return h, nil
}

// ChainStored returns the hash a driver stores with the event at seq whose hash is h: h when
// the event is marked (ChainMarked), else nil.
func ChainStored(seq int64, h *ChainHash) []byte {
	if ChainMarked(seq) {
		return h[:]
	}
	return nil
}

// ChainThrough returns the hash of the last of evs: stored events in sequence order without a
// gap, the first of which follows the event whose hash is base. An event stored with its hash
// (StoredEvent.Hash) resets the running hash to it, so evs need only start at the last marked
// event before the one wanted. A driver compacting a log through sequence n reads the events
// from the last marked one at or before n (or its first kept event) through n, with the
// session's base, to record the new base.
func ChainThrough(base ChainHash, evs []StoredEvent) (ChainHash, error) {
	h := base
	for _, e := range evs {
		if e.Hash == nil {
			h = ChainNext(h, e.Data)
			continue
		}
		var ok bool
		if h, ok = ChainHead(e.Hash); !ok {
			return h, fmt.Errorf("the event at sequence %d has a chain hash of %d bytes, not %d: the store is damaged (run sessiond fsck)", e.Sequence, len(e.Hash), len(h))
		}
	}
	return h, nil
}
