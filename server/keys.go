package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/auth"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/wire"
)

// The key endpoints (admin scope) and the browsers' credentials: stream tokens and the web
// UI's login cookie (docs/security.md).

func (s *Server) handleCreateKey(w http.ResponseWriter, r *http.Request) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var req wire.CreateKeyRequest
	if aerr := decodeStrict(body, &req); aerr != nil {
		writeError(w, aerr)
		return
	}
	p := principalOf(r.Context())
	spec := auth.KeySpec{Name: req.Name, Project: req.Project}
	if spec.Project == "" {
		spec.Project = p.Project
	}
	if spec.Project != p.Project && !p.AllProjects() {
		writeError(w, api.Errorf(contract.CodeForbidden, "this credential makes keys of project %q only; give \"project\":%q or leave it out", p.Project, p.Project))
		return
	}
	if why := auth.ValidProject(spec.Project); why != "" {
		writeError(w, api.Errorf(contract.CodeContractViolation, "project: %s", why))
		return
	}
	if len(req.Name) > 200 {
		writeError(w, api.Errorf(contract.CodeContractViolation, "name: at most 200 bytes"))
		return
	}
	var err error
	if spec.Scopes, err = auth.SetOf(req.Scopes); err != nil || spec.Scopes == 0 {
		msg := "give at least one of read, append, command, admin"
		if err != nil {
			msg = err.Error()
		}
		writeError(w, api.Errorf(contract.CodeContractViolation, "scopes: %s", msg))
		return
	}
	if req.ExpiresIn != "" {
		if spec.TTL, err = auth.ParseLifetime(req.ExpiresIn); err != nil {
			writeError(w, api.Errorf(contract.CodeContractViolation, "expiresIn: %v", err))
			return
		}
	}
	secret, k, err := s.keys.Create(r.Context(), spec)
	if err != nil {
		writeError(w, apiError(err, ""))
		return
	}
	s.requestLogger(w).Info("key created", "key", k.ID, "project", k.Project, "scopes", spec.Scopes.String(), "by", p.Subject)
	w.Header().Set("Location", "/v1/keys/"+k.ID)
	writeJSON(w, http.StatusCreated, wire.CreatedKey{Key: auth.WireKey(k), Secret: secret})
}

func (s *Server) handleListKeys(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r.Context())
	f := store.KeyFilter{}
	if !p.AllProjects() {
		f.Project = p.Project
	}
	ks, err := s.keys.List(r.Context(), f)
	if err != nil {
		writeError(w, apiError(err, ""))
		return
	}
	out := wire.KeyList{Keys: make([]wire.Key, 0, len(ks))}
	for _, k := range ks {
		out.Keys = append(out.Keys, auth.WireKey(k))
	}
	writeJSON(w, http.StatusOK, out)
}

// visibleKey returns the key of the path that the caller may see, or answers
// KEY_NOT_FOUND (also for another project's key: no existence leak).
func (s *Server) visibleKey(w http.ResponseWriter, r *http.Request) (store.Key, bool) {
	id := r.PathValue("keyId")
	notFound := api.Errorf(contract.CodeKeyNotFound, "no key %q; list the keys with GET /v1/keys", id)
	if !auth.ValidKeyID(id) {
		writeError(w, notFound)
		return store.Key{}, false
	}
	k, err := s.keys.Get(r.Context(), id)
	p := principalOf(r.Context())
	switch {
	case errors.Is(err, store.ErrKeyNotFound), err == nil && !p.AllProjects() && k.Project != p.Project:
		writeError(w, notFound)
		return store.Key{}, false
	case err != nil:
		writeError(w, apiError(err, ""))
		return store.Key{}, false
	}
	return k, true
}

func (s *Server) handleGetKey(w http.ResponseWriter, r *http.Request) {
	if k, ok := s.visibleKey(w, r); ok {
		writeJSON(w, http.StatusOK, auth.WireKey(k))
	}
}

func (s *Server) handleRevokeKey(w http.ResponseWriter, r *http.Request) {
	k, ok := s.visibleKey(w, r)
	if !ok {
		return
	}
	k, err := s.revokeKey(r.Context(), k.ID)
	if err != nil {
		writeError(w, apiError(err, ""))
		return
	}
	s.requestLogger(w).Info("key revoked", "key", k.ID, "by", principalOf(r.Context()).Subject)
	writeJSON(w, http.StatusOK, auth.WireKey(k))
}

// revokeKey revokes the key with id and has the streams it opened (or a key derived from it
// did) ended now, not at the next check of open streams' keys.
func (s *Server) revokeKey(ctx context.Context, id string) (store.Key, error) {
	k, err := s.keys.Revoke(ctx, id)
	s.authn.watch.poke()
	return k, err
}

// handleStreamToken makes a read-only token for one session's event stream, for a browser's
// EventSource, which cannot send an Authorization header: it goes in ?token= and is refused
// anywhere else.
func (s *Server) handleStreamToken(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.svc.LastSequence(r.Context(), id); err != nil {
		writeError(w, apiError(err, id))
		return
	}
	p := principalOf(r.Context())
	tok, k, err := s.keys.Derive(r.Context(), p, auth.KeySpec{Name: "stream token", Scopes: scopeSet(auth.ScopeRead), TTL: s.opt.StreamTokenTTL, Session: id})
	if err != nil {
		writeError(w, apiError(err, ""))
		return
	}
	writeJSON(w, http.StatusCreated, wire.StreamToken{Token: tok, ExpiresAt: contract.FormatTime(k.ExpiresAt),
		URL: "/v1/sessions/" + url.PathEscape(id) + "/events/stream?token=" + url.QueryEscape(tok)})
}

func scopeSet(sc auth.Scope) auth.ScopeSet {
	set, _ := auth.SetOf([]string{string(sc)})
	return set
}

func whoami(p auth.Principal, on bool) wire.Whoami {
	out := wire.Whoami{Subject: p.Subject, Project: p.Project, Scopes: p.Scopes.List(), Session: p.Session, Auth: on}
	if !p.ExpiresAt.IsZero() {
		out.ExpiresAt = contract.FormatTime(p.ExpiresAt)
	}
	return out
}

func (s *Server) handleWhoami(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, whoami(principalOf(r.Context()), s.authn.on))
}

// handleLogin turns the key of the Authorization header into the web UI's login cookie: a
// key derived from it (same project and scopes, LoginTTL, refused once the key is revoked),
// HttpOnly and SameSite=Strict, so the page's scripts never hold a key and other sites cannot
// use it.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r.Context())
	if !s.authn.on {
		writeJSON(w, http.StatusOK, whoami(p, false))
		return
	}
	tok, k, err := s.keys.Derive(r.Context(), p, auth.KeySpec{Name: "web UI login", Scopes: p.Scopes, TTL: s.opt.LoginTTL})
	if err != nil {
		writeError(w, apiError(err, ""))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: tok, Path: "/", Expires: k.ExpiresAt, HttpOnly: true,
		Secure: s.cookieSecure(r), SameSite: http.SameSiteStrictMode})
	p.ExpiresAt = k.ExpiresAt
	writeJSON(w, http.StatusOK, whoami(p, true))
}

// cookieSecure reports whether the login cookie is marked Secure (sent over https only): when
// r came over TLS, or always with Options.CookieSecure (TLS ended by a proxy in front).
func (s *Server) cookieSecure(r *http.Request) bool { return r.TLS != nil || s.opt.CookieSecure }

// handleLogout clears the login cookie (and revokes the key it held, when it is valid).
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil && s.authn.on {
		if p, err := s.keys.Verify(r.Context(), c.Value); err == nil && p.Derived {
			if _, err := s.revokeKey(r.Context(), p.KeyID); err != nil {
				s.requestLogger(w).Warn("revoke the login's key", "err", err)
			}
		}
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.cookieSecure(r), SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}
