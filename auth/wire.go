package auth

import (
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/wire"
)

// WireKey is a stored key as the API and the CLI show it: never its hash.
func WireKey(k store.Key) wire.Key {
	out := wire.Key{ID: k.ID, Name: k.Name, Project: k.Project, Scopes: k.Scopes, Session: k.Session, Parent: k.Parent,
		CreatedAt: contract.FormatTime(k.CreatedAt)}
	if out.Scopes == nil {
		out.Scopes = []string{}
	}
	for _, t := range []struct {
		at  time.Time
		out *string
	}{{k.ExpiresAt, &out.ExpiresAt}, {k.RevokedAt, &out.RevokedAt}, {k.LastUsedAt, &out.LastUsedAt}} {
		if !t.at.IsZero() {
			*t.out = contract.FormatTime(t.at)
		}
	}
	return out
}
