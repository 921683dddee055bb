package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sessiond/sessiond/auth"
	"github.com/sessiond/sessiond/contract"
)

// Open streams end when their credential lapses (docs/security.md, "Revocation and open
// streams"). A request is refused at once when its key is revoked, but a stream was
// authorized once, when it opened, and may stay open for days: so the server watches the keys
// behind its open streams. Every credentialCheckInterval, while any stream is open, one
// watcher asks the store which of their keys lapsed, in one read (store.Keys.LapsedKeys,
// never the keyring's cache), and a revocation made through this server asks at once. A stream whose
// credential lapsed (auth.Principal.Lapsed) gets a final CREDENTIAL_REVOKED block from its own
// loop, which waits on the stream's lapse channel beside its other reasons to end
// (Server.await, Server.interrupted).
//
// Why polling and not a notification: the read is one query per interval per instance,
// whatever the number of streams, and answers no row in the common case (BenchmarkCredentialCheck:
// 1,000 streams of 400 keys, 2-3 ms a check on SQLite and 6 ms on PostgreSQL on a 2-core
// machine at a load average of 25, so at most about 1% of a core at 4 checks a second); it
// needs nothing of the store but a read, so SQLite and PostgreSQL behave alike; a lost
// notification or listener connection cannot leave a revoked stream open; and key expiry,
// which no one announces, is found the same way.

// credentialCheckInterval is how often the keys behind open streams are read: a revocation
// made through another instance, or an expiry, ends the streams within it (plus one read).
const credentialCheckInterval = 250 * time.Millisecond

// credentialCheckTimeout bounds one read of the keys; a read that fails keeps the streams
// open (the store being down is no reason to believe a key revoked) and is retried at the
// next interval.
const credentialCheckTimeout = 5 * time.Second

// streamWatch is the credential of one open stream.
type streamWatch struct {
	p      auth.Principal
	lapsed chan struct{} // closed once the credential lapsed
	why    error         // why it lapsed; written before lapsed is closed
}

// streamWatchKey is the context key of a stream's watch (set by authn.openStream, read by
// startSSE).
type streamWatchKey struct{}

// credentialWatch watches the credentials of a server's open streams.
type credentialWatch struct {
	keys *auth.Keyring
	log  *slog.Logger
	kick chan struct{}

	mu      sync.Mutex
	streams map[*streamWatch]struct{}
	failing bool // the last read failed (logged once until a read succeeds)
}

func newCredentialWatch(keys *auth.Keyring, log *slog.Logger) *credentialWatch {
	return &credentialWatch{keys: keys, log: log, kick: make(chan struct{}, 1), streams: map[*streamWatch]struct{}{}}
}

// watch starts watching the credential of a stream p opens; the returned func stops it. A
// principal without keys (an OIDC token, auth off) is not watched: its channel never closes.
func (c *credentialWatch) watch(p auth.Principal) (*streamWatch, func()) {
	w := &streamWatch{p: p, lapsed: make(chan struct{})}
	if len(p.StreamKeys()) == 0 {
		return w, func() {}
	}
	c.mu.Lock()
	c.streams[w] = struct{}{}
	c.mu.Unlock()
	return w, func() {
		c.mu.Lock()
		delete(c.streams, w)
		c.mu.Unlock()
	}
}

// poke asks for a read now: a key was revoked through this server.
func (c *credentialWatch) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// run reads the keys of the open streams every credentialCheckInterval and when poked, until
// stop is closed.
func (c *credentialWatch) run(stop <-chan struct{}) {
	t := time.NewTicker(credentialCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		case <-c.kick:
		}
		c.check()
	}
}

// check reads the keys of the open streams once and ends the streams whose credential lapsed.
func (c *credentialWatch) check() {
	c.mu.Lock()
	var ids []string
	seen := map[string]bool{}
	for w := range c.streams {
		for _, id := range w.p.StreamKeys() {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	c.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), credentialCheckTimeout)
	lapsed, err := c.keys.Lapsed(ctx, ids)
	cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if !c.failing {
			c.log.Warn("the keys of open streams could not be read; the streams stay open and the read is retried", "err", err, "every", credentialCheckInterval)
		}
		c.failing = true
		return
	}
	c.failing = false
	for w := range c.streams {
		if why := w.p.Lapsed(lapsed); why != nil {
			w.why = why
			close(w.lapsed)
			delete(c.streams, w)
		}
	}
}

// lapsed returns the channel closed once the stream's credential lapsed (nil, never ready,
// for a stream whose credential is not watched).
func (sw *sseWriter) lapsed() <-chan struct{} {
	if sw.watch == nil {
		return nil
	}
	return sw.watch.lapsed
}

// credentialLapsed sends the final block of a stream whose credential lapsed.
func (sw *sseWriter) credentialLapsed(cursor int64) {
	sw.finalMessage(contract.CodeCredentialRevoked, fmt.Sprintf("%v, so this stream, which it opened, ends; reconnect with a valid credential and Last-Event-ID: %d", sw.watch.why, cursor))
}
