package auth

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/sqlite"
)

func TestParseKey(t *testing.T) {
	id, secret := newKeyParts()
	good := formatKey(id, secret)
	if gotID, gotSecret, err := ParseKey(good); err != nil || gotID != id || gotSecret != secret {
		t.Fatalf("ParseKey(%q) = %q, %q, %v", good, gotID, gotSecret, err)
	}
	for _, bad := range []string{
		"", "sk_", good[:len(good)-1], good + "A", strings.Replace(good, "sk_", "pk_", 1),
		"sk_" + strings.ToUpper(id) + "_" + secret, "sk_" + id + "-" + secret,
		"sk_" + id + "_" + secret[:42] + "=", "sk_" + id + "_" + secret[:42] + "+",
		"sk_" + id + "_" + secret[:42] + "B", // not canonical base64url: its last bits are not zero
	} {
		if _, _, err := ParseKey(bad); !errors.Is(err, ErrMalformedKey) {
			t.Errorf("ParseKey(%q) = %v, want ErrMalformedKey", bad, err)
		}
	}
}

func TestBearerToken(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"Bearer abc", "abc", true}, {"bearer abc", "abc", true}, {"BEARER abc", "abc", true},
		{"Bearer", "", false}, {"Bearer ", "", false}, {"Basic abc", "", false}, {"Bearer a b", "", false},
		{"Bearer  abc", "", false}, {"Bearerabc", "", false}, {"", "", false},
	} {
		got, ok := BearerToken(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("BearerToken(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestParseLifetime(t *testing.T) {
	for in, want := range map[string]time.Duration{"90d": 90 * 24 * time.Hour, "720h": 720 * time.Hour, "15m": 15 * time.Minute} {
		if got, err := ParseLifetime(in); err != nil || got != want {
			t.Errorf("ParseLifetime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0d", "-1h", "0s", "d", "1.5d", "x", "99999999d"} {
		if _, err := ParseLifetime(bad); err == nil {
			t.Errorf("ParseLifetime(%q) accepted", bad)
		}
	}
}

func TestScopes(t *testing.T) {
	set, err := ParseScopes("admin, read")
	if err != nil || set.String() != "read,admin" || !set.Has(ScopeRead) || set.Has(ScopeAppend) {
		t.Errorf("ParseScopes = %v (%s), %v", set, set, err)
	}
	for _, bad := range []string{"", ",", "reed", "read,write"} {
		if _, err := ParseScopes(bad); err == nil {
			t.Errorf("ParseScopes(%q) accepted", bad)
		}
	}
	if !AllScopes.Covers(set) || set.Covers(AllScopes) {
		t.Error("Covers is wrong")
	}
	// AllScopes is a constant, so it cannot be computed from Scopes: it must be their set.
	var all ScopeSet
	for _, sc := range Scopes {
		all |= sc.bit()
	}
	if AllScopes != all || AllScopes.String() != "read,append,command,admin" {
		t.Errorf("AllScopes = %b (%s), want the set of every scope in Scopes, %b", AllScopes, AllScopes, all)
	}
}

// TestKeyring checks create, verify, revoke, expiry and derived keys against a real store.
func TestKeyring(t *testing.T) {
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	kr := NewKeyring(st, KeyringOptions{Now: func() time.Time { return now }, CacheTTL: time.Hour})
	read, _ := ParseScopes("read,append")
	key, rec, err := kr.Create(ctx, KeySpec{Name: "ci", Project: "alpha", Scopes: read, TTL: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if id, secret, err := ParseKey(key); err != nil || id != rec.ID || !bytes.Equal(rec.Hash, hashSecret(secret)) || bytes.Contains(rec.Hash, []byte(secret)) || len(rec.Hash) != 32 {
		t.Errorf("stored hash %x: want the SHA-256 of the key's secret (ParseKey: %v)", rec.Hash, err)
	}
	p, err := kr.Verify(ctx, key)
	if err != nil || p.Project != "alpha" || p.Scopes != read || p.Subject != "key:"+rec.ID {
		t.Fatalf("Verify = %+v, %v", p, err)
	}
	// A derived key can do no more than its parent and dies with it.
	if _, _, err := kr.Derive(ctx, p, KeySpec{Scopes: AllScopes, TTL: time.Minute}); err == nil {
		t.Error("Derive with more scopes than the parent succeeded")
	}
	tok, trec, err := kr.Derive(ctx, p, KeySpec{Scopes: scopeOf(ScopeRead), TTL: 48 * time.Hour, Session: "S-1"})
	if err != nil {
		t.Fatal(err)
	}
	if !trec.ExpiresAt.Equal(rec.ExpiresAt) || trec.Parent != rec.ID || trec.Project != "alpha" {
		t.Errorf("derived key %+v: want the parent's expiry, id and project", trec)
	}
	tp, err := kr.Verify(ctx, tok)
	if err != nil || tp.Session != "S-1" || tp.RootKeyID != rec.ID || !tp.Derived {
		t.Errorf("Verify(derived) = %+v, %v", tp, err)
	}
	// The same key with its secret's first character changed (to another base64url
	// character, so the key keeps its shape) is a wrong secret.
	wrong := []byte(key)
	if i := len(keyPrefix) + keyIDLen + 1; wrong[i] == 'A' {
		wrong[i] = 'B'
	} else {
		wrong[i] = 'A'
	}
	if _, err := kr.Verify(ctx, string(wrong)); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("wrong secret: %v", err)
	}
	if _, err := kr.Revoke(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Verify(ctx, key); !errors.Is(err, ErrRevokedKey) {
		t.Errorf("revoked key: %v", err)
	}
	if _, err := kr.Verify(ctx, tok); !errors.Is(err, ErrRevokedKey) {
		t.Errorf("key derived from a revoked key: %v", err)
	}
	key2, _, err := kr.Create(ctx, KeySpec{Project: store.AllProjects, Scopes: read, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Hour)
	if _, err := kr.Verify(ctx, key2); !errors.Is(err, ErrExpiredKey) {
		t.Errorf("expired key: %v", err)
	}
	if _, _, err := kr.Create(ctx, KeySpec{Scopes: read}); err == nil {
		t.Error("a key without a project was made")
	}
}

func scopeOf(s Scope) ScopeSet { return s.bit() }

// FuzzParseKey: ParseKey never panics, and what it accepts formats back to itself.
func FuzzParseKey(f *testing.F) {
	id, secret := newKeyParts()
	f.Add(formatKey(id, secret))
	f.Add("sk_0123456789abcdef_" + strings.Repeat("A", 43))
	f.Add("sk_\x00")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		id, secret, err := ParseKey(s)
		if err != nil {
			return
		}
		if formatKey(id, secret) != s || !ValidKeyID(id) {
			t.Fatalf("ParseKey(%q) accepted %q %q", s, id, secret)
		}
	})
}

// FuzzBearerToken: BearerToken never panics and never returns a token with a space.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer x", "bearer  y", "Basic z", "Bearer\tq", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, ok := BearerToken(s)
		if ok && (tok == "" || strings.ContainsAny(tok, " \t\r\n")) {
			t.Fatalf("BearerToken(%q) = %q", s, tok)
		}
	})
}
