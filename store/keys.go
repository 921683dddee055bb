package store

import (
	"context"
	"errors"
	"strings"
	"time"
)

// API keys (docs/security.md). A key's secret is never stored: the server keeps the SHA-256 of
// the secret (Hash) under a short public id (ID), the part of the key a person may show and
// log. A key belongs to one project ("*" for every project), has scopes, and may be limited to
// one session (a browser's stream token) or derived from another key (a web UI login), in
// which case it is valid only while that key is.

// AllProjects is the Project of a key that may act on every project's sessions.
const AllProjects = "*"

// Key is a stored API key.
type Key struct {
	// ID is the key's public id, unique, part of the key itself (sk_<id>_<secret>).
	ID string
	// Hash is the SHA-256 of the key's secret part.
	Hash []byte
	// Name is a label for people.
	Name string
	// Project is the project whose sessions the key may act on, or AllProjects.
	Project string
	// Scopes are the key's scopes (read, append, command, admin), sorted.
	Scopes []string
	// Session, when set, is the only session the key may act on (a stream token).
	Session string
	// Parent, when set, is the id of the key this one was derived from, which it is refused
	// without (revoked or expired), or the subject ("oidc:<sub>") of the OIDC token it was
	// derived from, whose limits it counts against.
	Parent string
	// CreatedAt is when the key was made; ExpiresAt when it stops working (zero: never);
	// RevokedAt when it was revoked (zero: it was not); LastUsedAt when it was last seen on a
	// request (zero: never; updated in batches, see TouchKeys).
	CreatedAt  time.Time
	ExpiresAt  time.Time
	RevokedAt  time.Time
	LastUsedAt time.Time
}

// KeyFilter selects keys for ListKeys. Empty fields match every key.
type KeyFilter struct {
	// Project selects the keys of one project (AllProjects selects the keys for every
	// project, not every key).
	Project string
	// Derived includes the keys derived from others (stream tokens, web UI logins); they are
	// left out by default.
	Derived bool
}

// Keys is the part of [Store] that keeps API keys.
type Keys interface {
	// CreateKey stores a new key. It returns ErrKeyExists when the id is taken.
	CreateKey(ctx context.Context, k *Key) error
	// Key returns the key with that id, or ErrKeyNotFound.
	Key(ctx context.Context, id string) (Key, error)
	// ListKeys returns the keys matching f, oldest first.
	ListKeys(ctx context.Context, f KeyFilter) ([]Key, error)
	// LapsedKeys returns, in one read and in no particular order, the keys whose id is among
	// ids (at most MaxLapsedKeys of them) that are revoked or expired at now (ExpiresAt at or
	// before it); an id no key has is left out. The server reads the keys behind its open
	// streams with it, to end the streams of a revoked or expired key: it answers nothing in
	// the common case, and the revocation and expiry columns are tested before the ids.
	LapsedKeys(ctx context.Context, ids []string, now time.Time) ([]Key, error)
	// RevokeKey marks the key revoked at the time given (a key already revoked keeps its
	// first revocation time) and returns it, or ErrKeyNotFound.
	RevokeKey(ctx context.Context, id string, at time.Time) (Key, error)
	// TouchKeys records when each key (by id) was last used, in one write: a key's
	// LastUsedAt only moves forward; unknown ids are ignored. Callers batch the uses of many
	// requests into one call.
	TouchKeys(ctx context.Context, used map[string]time.Time) error
	// DeleteExpiredKeys deletes the derived keys (Parent set) that expired before cutoff and
	// returns how many it deleted. Keys made by people stay, expired or not, for the record.
	DeleteExpiredKeys(ctx context.Context, cutoff time.Time) (int64, error)
}

// MaxLapsedKeys is the most ids one LapsedKeys call takes; callers split longer lists.
const MaxLapsedKeys = 500

// Errors of the key store.
var (
	ErrKeyNotFound = errors.New("key not found")
	ErrKeyExists   = errors.New("key id already exists")
)

// KeyRow is a key as both drivers store it: times in Unix milliseconds (0 for none) and the
// scopes joined by commas. Drivers convert with [KeyToRow] and [KeyRow.Key].
type KeyRow struct {
	ID, Name, Project, Scopes, Session, Parent  string
	Hash                                        []byte
	CreatedMS, ExpiresMS, RevokedMS, LastUsedMS int64
}

// KeyToRow returns the row of k.
func KeyToRow(k *Key) KeyRow {
	return KeyRow{ID: k.ID, Hash: k.Hash, Name: k.Name, Project: k.Project, Scopes: strings.Join(k.Scopes, ","),
		Session: k.Session, Parent: k.Parent, CreatedMS: msOf(k.CreatedAt), ExpiresMS: msOf(k.ExpiresAt),
		RevokedMS: msOf(k.RevokedAt), LastUsedMS: msOf(k.LastUsedAt)}
}

// Key returns the key of the row.
func (r KeyRow) Key() Key {
	var scopes []string
	if r.Scopes != "" {
		scopes = strings.Split(r.Scopes, ",")
	}
	return Key{ID: r.ID, Hash: r.Hash, Name: r.Name, Project: r.Project, Scopes: scopes, Session: r.Session,
		Parent: r.Parent, CreatedAt: timeOf(r.CreatedMS), ExpiresAt: timeOf(r.ExpiresMS),
		RevokedAt: timeOf(r.RevokedMS), LastUsedAt: timeOf(r.LastUsedMS)}
}

func msOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func timeOf(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// KeyColumns are the columns of the api_keys table in the order of [KeyRow.Dest].
const KeyColumns = `id, hash, name, project, scopes, session_id, parent, created_ms, expires_ms, revoked_ms, last_used_ms`

// Dest returns pointers to the row's fields in the order of [KeyColumns], for Scan.
func (r *KeyRow) Dest() []any {
	return []any{&r.ID, &r.Hash, &r.Name, &r.Project, &r.Scopes, &r.Session, &r.Parent, &r.CreatedMS, &r.ExpiresMS, &r.RevokedMS, &r.LastUsedMS}
}

// Args returns the row's fields in the order of [KeyColumns], for an INSERT.
func (r *KeyRow) Args() []any {
	return []any{r.ID, r.Hash, r.Name, r.Project, r.Scopes, r.Session, r.Parent, r.CreatedMS, r.ExpiresMS, r.RevokedMS, r.LastUsedMS}
}
