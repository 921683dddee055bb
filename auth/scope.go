package auth

import (
	"fmt"
	"slices"
	"strings"
)

// Scope is what a key may do. Each route of the API needs one (docs/security.md).
type Scope string

// The scopes, from least to most power.
const (
	// ScopeRead reads sessions: GET routes, streams, view, transcript, lineage.
	ScopeRead Scope = "read"
	// ScopeAppend writes as a runtime: events, heartbeats, the worker endpoints.
	ScopeAppend Scope = "append"
	// ScopeCommand steers sessions: commands, continuations, creating sessions.
	ScopeCommand Scope = "command"
	// ScopeAdmin manages: session patch, archive, restore, sweep, keys.
	ScopeAdmin Scope = "admin"
)

// Scopes are every scope, in the order above.
var Scopes = []Scope{ScopeRead, ScopeAppend, ScopeCommand, ScopeAdmin}

// ScopeSet is a set of scopes.
type ScopeSet uint8

func (s Scope) bit() ScopeSet {
	if i := slices.Index(Scopes, s); i >= 0 {
		return 1 << i
	}
	return 0
}

// Has reports whether the set holds sc.
func (s ScopeSet) Has(sc Scope) bool { b := sc.bit(); return b != 0 && s&b != 0 }

// Covers reports whether the set holds every scope of o.
func (s ScopeSet) Covers(o ScopeSet) bool { return s&o == o }

// List returns the set's scopes in the order of [Scopes].
func (s ScopeSet) List() []string {
	var out []string
	for _, sc := range Scopes {
		if s.Has(sc) {
			out = append(out, string(sc))
		}
	}
	return out
}

// String returns the scopes joined by commas.
func (s ScopeSet) String() string { return strings.Join(s.List(), ",") }

// AllScopes is the set of every scope: one bit for each of [Scopes] (TestScopes checks it).
const AllScopes ScopeSet = 1<<4 - 1

// SetOf returns the set of the named scopes, or an error naming one that is not a scope.
func SetOf(names []string) (ScopeSet, error) {
	var s ScopeSet
	for _, n := range names {
		b := Scope(n).bit()
		if b == 0 {
			return 0, fmt.Errorf("%q is not a scope; the scopes are read, append, command and admin", n)
		}
		s |= b
	}
	return s, nil
}

// ParseScopes parses a comma-separated list of scopes ("read,append"); it must name at least
// one.
func ParseScopes(list string) (ScopeSet, error) {
	var names []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return 0, fmt.Errorf("no scope given; name at least one of read, append, command, admin")
	}
	return SetOf(names)
}
