package session

import (
	"context"

	"github.com/sessiond/sessiond/store"
)

// Every id a request carries is authorized where it is used (docs/security.md, "Every id is
// authorized where it is used"). The server authenticates a request and puts the caller's
// [Scope] in its context; [Permits] is the one decision, asked by the server for the session
// in the path and by this package wherever it resolves an id itself: a fork's or an
// edit-and-rerun's source thread, a lineage's ancestors and descendants. The check lives in
// the domain rather than only at the server's edge because the domain is where those ids
// are read (inside typed command payloads, or found by walking lineage): an edge that
// pre-checked a list of body fields would miss the next payload field, and could not check
// the ids the domain discovers. A session outside the scope is answered exactly as a missing
// one: the code paths are the same from the lookup on.

// Scope is what a caller may reach. auth.Principal is one.
type Scope interface {
	// MaySee reports whether the caller may read or act on session id, whose record's
	// project is project ("" when it has none).
	MaySee(id, project string) bool
}

type scopeKey struct{}

// WithScope returns ctx carrying sc: from then on, the service treats every session sc
// may not see as missing.
func WithScope(ctx context.Context, sc Scope) context.Context {
	return context.WithValue(ctx, scopeKey{}, sc)
}

// Permits reports whether the caller of ctx may read or act on session id of project ("" for
// none). Without a scope in ctx (a server without authentication, the CLI acting on its own
// store) every session is permitted.
func Permits(ctx context.Context, id, project string) bool {
	sc, ok := ctx.Value(scopeKey{}).(Scope)
	return !ok || sc.MaySee(id, project)
}

// visibleSession returns session id if the caller of ctx may see it, else
// store.ErrSessionNotFound, the very error the store answers for a session that does not
// exist (unwrapped, so that no message built from it can differ).
func (s *Service) visibleSession(ctx context.Context, id string) (*store.Session, error) {
	sess, err := s.st.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	if !Permits(ctx, id, sess.Record.Project.Get()) {
		return nil, store.ErrSessionNotFound
	}
	return sess, nil
}
