package postgres

import (
	"sync"

	"github.com/sessiond/sessiond/store"
)

// maxCachedHeads is the most session heads a headCache keeps; past it, it starts afresh.
const maxCachedHeads = 1 << 16

// headCache holds, per session key, where the driver last saw the session's log end: its last
// sequence and the chain hash of that event (store/chain.go), as its own appends committed
// them. The one-statement append (direct.go) computes the new events' bytes and hashes from it
// and writes only if the head is still there, so a stale entry (another instance appended, or
// an import replaced the log) costs a detour through the locking path, which reads the head
// under the session's lock and refreshes the entry; it is never a wrong write.
type headCache struct {
	mu sync.Mutex
	m  map[int64]cachedHead
}

type cachedHead struct {
	last int64
	hash store.ChainHash
}

// get returns the head cached for session sk.
func (c *headCache) get(sk int64) (last int64, hash store.ChainHash, ok bool) {
	c.mu.Lock()
	h, ok := c.m[sk]
	c.mu.Unlock()
	return h.last, h.hash, ok
}

// put records that session sk's log ends at last with hash, unless a later end is recorded
// already (appends to one session commit in sequence order but may return in another).
func (c *headCache) put(sk, last int64, hash store.ChainHash) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.m[sk]; ok && h.last > last {
		return
	}
	if c.m == nil || len(c.m) >= maxCachedHeads {
		c.m = make(map[int64]cachedHead)
	}
	c.m[sk] = cachedHead{last: last, hash: hash}
}

// drop forgets session sk's head (its log was replaced or compacted).
func (c *headCache) drop(sk int64) {
	c.mu.Lock()
	delete(c.m, sk)
	c.mu.Unlock()
}
