package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sessiond/sessiond/store"
)

// Why a credential is refused; the server says which (after the secret matched, so only its
// holder learns that a key is revoked or expired).
var (
	// ErrInvalidKey: no key has this id and secret (unknown id, wrong secret, bad shape).
	ErrInvalidKey = errors.New("the key is not valid")
	// ErrRevokedKey: the key, or the key it was derived from, was revoked.
	ErrRevokedKey = errors.New("the key was revoked")
	// ErrExpiredKey: the key, or the key it was derived from, has expired.
	ErrExpiredKey = errors.New("the key has expired")
)

// KeyringOptions configure a [Keyring].
type KeyringOptions struct {
	// Now returns the current time (default time.Now).
	Now func() time.Time
	// CacheTTL is how long a looked-up key is trusted before it is read again (default 5s):
	// a revocation made through another instance takes effect within it (at once on the
	// instance that made it).
	CacheTTL time.Duration
}

// Keyring creates and verifies API keys kept in a store. It is safe for concurrent use.
//
// Verifying a key costs no store read while the key is cached (CacheTTL) and no write: the
// last use of each key is remembered and written by FlushUses, which the server calls every
// few seconds, in one write for all keys.
type Keyring struct {
	st  store.Keys
	now func() time.Time
	ttl time.Duration

	mu    sync.Mutex
	cache map[string]cachedKey
	uses  map[string]time.Time
}

type cachedKey struct {
	key   store.Key
	found bool
	at    time.Time
}

// maxCachedKeys bounds the cache (unknown ids are cached too, so that a flood of made-up keys
// costs no store reads); past it the cache starts over.
const maxCachedKeys = 10000

// dummyHash is what an unknown id's secret is compared with, so that an unknown id and a
// wrong secret cost the same.
var dummyHash = hashSecret("sessiond: no key has this id")

// NewKeyring returns a keyring over st.
func NewKeyring(st store.Keys, opt KeyringOptions) *Keyring {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.CacheTTL <= 0 {
		opt.CacheTTL = 5 * time.Second
	}
	return &Keyring{st: st, now: opt.Now, ttl: opt.CacheTTL, cache: map[string]cachedKey{}, uses: map[string]time.Time{}}
}

// KeySpec describes a key to create.
type KeySpec struct {
	// Name is a label for people.
	Name string
	// Project is the project the key may act on, or store.AllProjects.
	Project string
	// Scopes are what it may do (at least one).
	Scopes ScopeSet
	// TTL is how long it lives (0: until revoked).
	TTL time.Duration
	// Session limits it to one session.
	Session string
}

// ValidProject reports why p cannot be a key's project ("" when it can): a non-empty
// project name or "*" for every project.
func ValidProject(p string) string {
	switch {
	case p == "":
		return `a key needs a project: a project name, or "*" for every project`
	case len(p) > 256:
		return "a project name is at most 256 bytes"
	}
	return ""
}

// Create makes a new key and returns it whole (the only time the secret is known) with what
// was stored.
func (k *Keyring) Create(ctx context.Context, spec KeySpec) (string, store.Key, error) {
	return k.create(ctx, spec, "")
}

func (k *Keyring) create(ctx context.Context, spec KeySpec, parent string) (string, store.Key, error) {
	if why := ValidProject(spec.Project); why != "" {
		return "", store.Key{}, errors.New(why)
	}
	if spec.Scopes == 0 {
		return "", store.Key{}, errors.New("a key needs at least one scope")
	}
	if spec.TTL < 0 {
		return "", store.Key{}, errors.New("a key's lifetime must be positive")
	}
	now := k.now().UTC().Truncate(time.Millisecond)
	id, secret := newKeyParts()
	rec := store.Key{ID: id, Hash: hashSecret(secret), Name: spec.Name, Project: spec.Project, Scopes: spec.Scopes.List(),
		Session: spec.Session, Parent: parent, CreatedAt: now}
	if spec.TTL > 0 {
		rec.ExpiresAt = now.Add(spec.TTL)
	}
	if err := k.st.CreateKey(ctx, &rec); err != nil {
		return "", store.Key{}, err
	}
	return formatKey(id, secret), rec, nil
}

// Derive makes a key for p that can do no more than p: a browser's stream token (spec.Session
// set, read only) or a web UI login. Its project is p's, its scopes must be among p's, and it
// expires no later than p's credential. Its parent is p's Owner: the key p comes from, which
// it is refused without, or the subject of p's token, whose limits it counts against.
func (k *Keyring) Derive(ctx context.Context, p Principal, spec KeySpec) (string, store.Key, error) {
	if !p.Scopes.Covers(spec.Scopes) {
		return "", store.Key{}, fmt.Errorf("a derived key may have only scopes of its parent (%s)", p.Scopes)
	}
	spec.Project = p.Project
	if p.Session != "" {
		spec.Session = p.Session
	}
	if !p.ExpiresAt.IsZero() {
		if left := p.ExpiresAt.Sub(k.now()); left < spec.TTL {
			spec.TTL = left
		}
		if spec.TTL <= 0 {
			return "", store.Key{}, ErrExpiredKey
		}
	}
	if p.Owner == "" || p.Owner == legacyOIDCParent {
		return "", store.Key{}, errors.New("a key is derived from a key or a token's subject, and this principal has neither")
	}
	return k.create(ctx, spec, p.Owner)
}

// A key derived from a token that is not a key (OIDC) has the token's owner ("oidc:<sub>") as
// its Parent, anything but a key id: its limits count against that subject. Keys derived
// before that have legacyOIDCParent, which names no one: each counts as its own owner until it
// expires.
const (
	oidcParentPrefix = "oidc:"
	legacyOIDCParent = "-"
)

// Verify returns the principal of an API key, or ErrInvalidKey, ErrRevokedKey or
// ErrExpiredKey. The secret is compared with the stored hash in constant time, and an unknown
// id costs a comparison too.
func (k *Keyring) Verify(ctx context.Context, key string) (Principal, error) {
	id, secret, err := ParseKey(key)
	if err != nil {
		return Principal{}, ErrInvalidKey
	}
	rec, found, err := k.lookup(ctx, id)
	if err != nil {
		return Principal{}, err
	}
	want := dummyHash
	if found && len(rec.Hash) == len(dummyHash) {
		want = rec.Hash
	}
	if subtle.ConstantTimeCompare(hashSecret(secret), want) != 1 || !found {
		return Principal{}, ErrInvalidKey
	}
	now := k.now()
	if err := usable(rec, now); err != nil {
		return Principal{}, err
	}
	p := Principal{Subject: "key:" + rec.ID, KeyID: rec.ID, RootKeyID: rec.ID, Owner: rec.ID, Project: rec.Project, Session: rec.Session,
		ExpiresAt: rec.ExpiresAt, Derived: rec.Parent != ""}
	p.Scopes, err = SetOf(rec.Scopes)
	if err != nil {
		return Principal{}, fmt.Errorf("key %s: stored scopes: %w", rec.ID, err)
	}
	switch {
	case rec.Parent == "" || rec.Parent == legacyOIDCParent:
	case !ValidKeyID(rec.Parent): // a token's subject
		p.Owner = rec.Parent
		p.Subject += " via " + rec.Parent
	default:
		parent, found, err := k.lookup(ctx, rec.Parent)
		if err != nil {
			return Principal{}, err
		}
		if !found {
			return Principal{}, ErrRevokedKey
		}
		if err := usable(parent, now); err != nil {
			return Principal{}, err
		}
		p.RootKeyID, p.Owner = parent.ID, parent.ID
		p.Subject += " via key:" + parent.ID
	}
	k.mu.Lock()
	k.uses[rec.ID] = now
	k.mu.Unlock()
	return p, nil
}

func usable(rec store.Key, now time.Time) error {
	switch {
	case !rec.RevokedAt.IsZero():
		return ErrRevokedKey
	case !rec.ExpiresAt.IsZero() && !now.Before(rec.ExpiresAt):
		return ErrExpiredKey
	}
	return nil
}

// lookup returns the key with id from the cache or the store.
func (k *Keyring) lookup(ctx context.Context, id string) (store.Key, bool, error) {
	now := k.now()
	k.mu.Lock()
	c, ok := k.cache[id]
	k.mu.Unlock()
	if ok && now.Sub(c.at) < k.ttl && now.Sub(c.at) >= 0 {
		return c.key, c.found, nil
	}
	rec, err := k.st.Key(ctx, id)
	found := err == nil
	if err != nil && !errors.Is(err, store.ErrKeyNotFound) {
		return store.Key{}, false, fmt.Errorf("look up key %s: %w", id, err)
	}
	k.mu.Lock()
	if len(k.cache) >= maxCachedKeys {
		clear(k.cache)
	}
	k.cache[id] = cachedKey{key: rec, found: found, at: now}
	k.mu.Unlock()
	return rec, found, nil
}

// Revoke revokes the key with id; it stops working at once through this keyring, and within
// CacheTTL through others.
func (k *Keyring) Revoke(ctx context.Context, id string) (store.Key, error) {
	rec, err := k.st.RevokeKey(ctx, id, k.now().UTC())
	k.mu.Lock()
	delete(k.cache, id)
	k.mu.Unlock()
	return rec, err
}

// Lapsed reads from the store (not the cache, so that a revocation made through another
// instance shows at once), in reads of at most store.MaxLapsedKeys ids, which of the keys with
// ids are revoked or expired now, each with ErrRevokedKey or ErrExpiredKey. A key the store
// no longer has (a derived key pruned an hour after it expired) is not in the answer: it can
// no longer be revoked. The cache takes the records read, so that requests with a revoked key
// are refused at once here too.
func (k *Keyring) Lapsed(ctx context.Context, ids []string) (map[string]error, error) {
	out := map[string]error{}
	for chunk := range slices.Chunk(ids, store.MaxLapsedKeys) {
		now := k.now()
		recs, err := k.st.LapsedKeys(ctx, chunk, now)
		if err != nil {
			return nil, fmt.Errorf("read the keys of open streams: %w", err)
		}
		k.mu.Lock()
		for _, rec := range recs {
			if _, ok := k.cache[rec.ID]; ok {
				k.cache[rec.ID] = cachedKey{key: rec, found: true, at: now}
			}
		}
		k.mu.Unlock()
		for _, rec := range recs {
			if err := usable(rec, now); err != nil {
				out[rec.ID] = err
			}
		}
	}
	return out, nil
}

// Get returns the key with id, as stored (read from the store, not the cache).
func (k *Keyring) Get(ctx context.Context, id string) (store.Key, error) { return k.st.Key(ctx, id) }

// List returns the keys matching f.
func (k *Keyring) List(ctx context.Context, f store.KeyFilter) ([]store.Key, error) {
	return k.st.ListKeys(ctx, f)
}

// FlushUses writes the last use of every key verified since the previous flush, in one
// write, and prunes the derived keys that expired more than an hour ago. On error the uses
// are kept for the next flush.
func (k *Keyring) FlushUses(ctx context.Context) error {
	k.mu.Lock()
	uses := k.uses
	k.uses = map[string]time.Time{}
	k.mu.Unlock()
	if len(uses) == 0 {
		return nil
	}
	if err := k.st.TouchKeys(ctx, uses); err != nil {
		k.mu.Lock()
		for id, at := range uses {
			if at.After(k.uses[id]) {
				k.uses[id] = at
			}
		}
		k.mu.Unlock()
		return err
	}
	if _, err := k.st.DeleteExpiredKeys(ctx, k.now().Add(-time.Hour)); err != nil {
		return err
	}
	return nil
}
