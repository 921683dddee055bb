package search

import (
	"context"
	"hash/fnv"
)

// Backend is a driver's search index: documents keyed by session and sequence, the durable
// cursor of each session (how far of its log is indexed), and the query. The Indexer is its
// only writer; every method is safe for concurrent use. store/sqlite and store/postgres each
// implement it, and searchtest's suite checks both the same way.
type Backend interface {
	// Pending returns the sessions whose log and index differ: events past the index's cursor,
	// or a compaction (or a restore after one) the index has not followed yet.
	Pending(ctx context.Context) ([]Pending, error)
	// Apply commits the batches, of distinct sessions, in one transaction: for each, the
	// documents, the dropped ones and the session's new cursor. A batch whose session's cursor
	// is no longer its From (another instance indexed it meanwhile) is left out; its index in
	// bs is in moved. On an error nothing is written.
	Apply(ctx context.Context, bs []*Batch) (moved []int, err error)
	// Search returns the results of q after q.After, in q.Order, at most q.Limit+1 (one more
	// than a page, so that the caller knows whether there is a next page). Filters on the
	// session (project, agent, role, status) and on the run (status) compare their values now.
	Search(ctx context.Context, q *Query) ([]Result, error)
	// Docs returns the index's cursor of the session (-1 when none) and its documents'
	// digests in sequence order: what a rebuild must reproduce (Check).
	Docs(ctx context.Context, sessionID string) (cursor int64, docs []Digest, err error)
	// Sessions returns the ids of the sessions the index holds a cursor for.
	Sessions(ctx context.Context) ([]string, error)
	// Reset empties the index: every document and every cursor (a rebuild follows).
	Reset(ctx context.Context) error
}

// Pending is a session whose index is behind its log.
type Pending struct {
	SessionID string
	// Indexed is the index's cursor (the last sequence indexed, -1 for none) and Last the
	// log's last sequence.
	Indexed, Last int64
	// Compacted is the log's CompactedThrough (-1 when none); Dropped how far the index has
	// dropped documents for a compaction (-1 when none).
	Compacted, Dropped int64
}

// Batch is one transaction of the index for one session.
type Batch struct {
	SessionID string
	// From is the cursor the batch expects the session to have (-1 for none); Through the one
	// it sets: the last sequence of the log it covers.
	From, Through int64
	// Reset deletes every document of the session first (a restore brought compacted events
	// back): the batch then indexes from the start.
	Reset bool
	// DropThrough, when not below 0, deletes the documents with sequence <= DropThrough
	// and records it as the session's Dropped.
	DropThrough int64
	// Docs are the new documents, in sequence order.
	Docs []Doc
}

// Digest is what the index keeps of a document besides its tokens: enough to compare it with a
// rebuild.
type Digest struct {
	Sequence int64
	Key      int64
	Kind     string
	RunID    string
	Tool     string
	Code     string
	// Hash is FieldsHash of the document's fields.
	Hash int64
}

// FieldsHash is a 63-bit FNV-1a hash of the document's field texts, kept with each document so
// that a check can tell whether the index holds the text a rebuild would (the tokens
// themselves are not readable back from a contentless index).
func FieldsHash(d *Doc) int64 {
	h := fnv.New64a()
	for _, f := range d.Fields {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return int64(h.Sum64() >> 1)
}

// DigestOf returns the digest a document's index entry must have (its Key aside, which
// depends on the other documents of the same millisecond).
func DigestOf(d *Doc) Digest {
	return Digest{Sequence: d.Sequence, Kind: d.Kind, RunID: d.RunID, Tool: d.Tool, Code: d.Code, Hash: FieldsHash(d)}
}
