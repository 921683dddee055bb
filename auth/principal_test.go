package auth

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sessiond/sessiond/store/sqlite"
)

// TestPrincipalLapsed checks which lapsed keys end a principal's streams: any revocation in
// its chain, the expiry of the key people made, never a derived key's own expiry.
func TestPrincipalLapsed(t *testing.T) {
	key := Principal{KeyID: "k", RootKeyID: "k", Owner: "k"}
	token := Principal{KeyID: "t", RootKeyID: "k", Owner: "k", Derived: true}
	oidcToken := Principal{KeyID: "o", RootKeyID: "o", Owner: "oidc:bob", Derived: true}
	oidc := Principal{Subject: "oidc:bob", Owner: "oidc:bob"}
	for _, c := range []struct {
		name   string
		p      Principal
		lapsed map[string]error
		want   error
	}{
		{"key holds", key, nil, nil},
		{"key revoked", key, map[string]error{"k": ErrRevokedKey}, ErrRevokedKey},
		{"key expired", key, map[string]error{"k": ErrExpiredKey}, ErrExpiredKey},
		{"another key revoked", key, map[string]error{"x": ErrRevokedKey}, nil},
		{"token's key revoked", token, map[string]error{"k": ErrRevokedKey}, ErrRevokedKey},
		{"token's key expired", token, map[string]error{"k": ErrExpiredKey}, ErrExpiredKey},
		{"token revoked", token, map[string]error{"t": ErrRevokedKey}, ErrRevokedKey},
		{"token expired", token, map[string]error{"t": ErrExpiredKey}, nil},
		{"OIDC token's token revoked", oidcToken, map[string]error{"o": ErrRevokedKey}, ErrRevokedKey},
		{"OIDC token's token expired", oidcToken, map[string]error{"o": ErrExpiredKey}, nil},
		{"OIDC token", oidc, map[string]error{"": ErrRevokedKey}, nil},
	} {
		if got := c.p.Lapsed(c.lapsed); !errors.Is(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("%s: Lapsed = %v, want %v", c.name, got, c.want)
		}
	}
	if len(oidc.StreamKeys()) != 0 {
		t.Errorf("an OIDC token's stream keys: %v, want none", oidc.StreamKeys())
	}
}

// TestDeriveFromOIDC checks that a key derived from an OIDC token records the token's subject
// as its parent, and counts against it (Owner), and that a principal without an owner cannot
// derive.
func TestDeriveFromOIDC(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	kr := NewKeyring(st, KeyringOptions{})
	p := Principal{Subject: "oidc:bob", Owner: "oidc:bob", Project: "alpha", Scopes: AllScopes, ExpiresAt: time.Now().Add(time.Hour)}
	tok, rec, err := kr.Derive(ctx, p, KeySpec{Scopes: AllScopes, TTL: time.Minute, Session: "S"})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Parent != "oidc:bob" {
		t.Errorf("Parent %q, want oidc:bob", rec.Parent)
	}
	tp, err := kr.Verify(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if tp.Owner != "oidc:bob" || tp.Subject != "key:"+rec.ID+" via oidc:bob" || !tp.Derived {
		t.Errorf("the token's principal %+v: want owner oidc:bob", tp)
	}
	if _, _, err := kr.Derive(ctx, Principal{Subject: "x", Scopes: AllScopes, Project: "alpha"}, KeySpec{Scopes: AllScopes, TTL: time.Minute}); err == nil {
		t.Error("Derive without an owner succeeded")
	}
}
