package auth

import (
	"time"

	"github.com/sessiond/sessiond/store"
)

// Principal is who a request acts as: a key or an OIDC token's subject, with what it may do.
type Principal struct {
	// Subject names the actor in logs and records: "key:<id>" for an API key (a derived key
	// names its parent too: "key:<id> via <parent>") or "oidc:<sub>" for a token.
	Subject string
	// KeyID is the id of the API key used ("" for an OIDC token); RootKeyID the key a derived
	// key comes from (itself for a key made by a person). Rate limits count per RootKeyID.
	KeyID     string
	RootKeyID string
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
