package auth

import (
	"errors"
	"time"

	"github.com/sessiond/sessiond/store"
)

// Principal is who a request acts as: a key or an OIDC token's subject, with what it may do.
type Principal struct {
	// Subject names the actor in logs and records: "key:<id>" for an API key (a derived key
	// names its parent too: "key:<id> via <parent>") or "oidc:<sub>" for a token.
	Subject string
	// KeyID is the id of the API key used ("" for an OIDC token); RootKeyID the key a derived
	// key comes from (itself for a key made by a person, and for a key derived from an OIDC
	// token).
	KeyID     string
	RootKeyID string
	// Owner is who the principal's limits (rate, open streams) count against, and what the
	// keys derived from it chain to: its root key's id, or "oidc:<sub>" for an OIDC token and
	// for every key derived from one. Empty for Anonymous.
	Owner string
	// Derived: the key was derived from another credential (a stream token, a login).
	Derived bool
	// Project is the project whose sessions the principal may act on, or store.AllProjects.
	Project string
	// Scopes are what it may do.
	Scopes ScopeSet
	// Session, when set, is the only session it may act on (a stream token).
	Session string
	// ExpiresAt is when its credential expires (zero: never).
	ExpiresAt time.Time
}

// Anonymous is the principal of every request on a server without authentication: every
// scope on every project.
var Anonymous = Principal{Subject: "anonymous", Project: store.AllProjects, Scopes: AllScopes}

// AllProjects reports whether the principal may act on every project's sessions.
func (p Principal) AllProjects() bool { return p.Project == store.AllProjects }

// MaySee reports whether the principal may act on a session of project (the session's record
// project, "" when it has none) and id.
func (p Principal) MaySee(id, project string) bool {
	if p.Session != "" && p.Session != id {
		return false
	}
	return p.AllProjects() || p.Project == project
}

// StreamKeys returns the ids of the keys whose revocation or expiry ends the streams the
// principal opens ([Principal.Lapsed]): the key it used and, for a derived key, the key it
// comes from. An OIDC token has none: it cannot be revoked, and its expiry does not end an
// open stream.
func (p Principal) StreamKeys() []string {
	switch {
	case p.KeyID == "":
		return nil
	case p.RootKeyID != p.KeyID:
		return []string{p.KeyID, p.RootKeyID}
	}
	return []string{p.KeyID}
}

// Lapsed says whether a stream the principal opened must end, given the keys among
// StreamKeys that are revoked or expired now (id to ErrRevokedKey or ErrExpiredKey, as
// [Keyring.Lapsed] answers): it returns why, or nil. A stream ends when any key of the chain
// is revoked, or when the key people made (the root) expires; a derived key's own expiry only
// bounds when it may open a stream (a stream token lives minutes, its stream as long as the
// key it comes from).
func (p Principal) Lapsed(lapsed map[string]error) error {
	for _, id := range p.StreamKeys() {
		err := lapsed[id]
		if errors.Is(err, ErrRevokedKey) || err != nil && (id != p.KeyID || !p.Derived) {
			return err
		}
	}
	return nil
}
