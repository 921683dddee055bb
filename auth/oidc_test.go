package auth

import (
	"context"
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// idp is an identity provider served by the test: a discovery document and a JWKS with one
// RSA key of its own.
type idp struct {
	ts         *httptest.Server
	key        *rsa.PrivateKey
	jwksServed atomic.Int64 // GET /jwks answered
}

func newIDP(t *testing.T) *idp {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &idp{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"issuer": p.ts.URL, "jwks_uri": p.ts.URL + "/jwks",
			"authorization_endpoint": p.ts.URL + "/auth", "token_endpoint": p.ts.URL + "/token", "id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		p.jwksServed.Add(1)
		b64 := base64.RawURLEncoding.EncodeToString
		json.NewEncoder(w).Encode(map[string]any{"keys": []any{map[string]any{"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())}}})
	})
	p.ts = httptest.NewServer(mux)
	t.Cleanup(p.ts.Close)
	return p
}

func b64json(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

// sign returns a JWT of claims signed with alg: RS256 with key (nil: the provider's), HS256
// with the provider's public key as the HMAC secret (key confusion), or none.
func (p *idp) sign(t *testing.T, alg string, key *rsa.PrivateKey, claims map[string]any) string {
	t.Helper()
	head := b64json(map[string]any{"alg": alg, "kid": "k1", "typ": "JWT"}) + "." + b64json(claims)
	switch alg {
	case "RS256":
		if key == nil {
			key = p.key
		}
		sum := sha256.Sum256([]byte(head))
		sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		return head + "." + base64.RawURLEncoding.EncodeToString(sig)
	case "HS256":
		der, _ := x509.MarshalPKIXPublicKey(&p.key.PublicKey)
		mac := hmac.New(sha256.New, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
		mac.Write([]byte(head))
		return head + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	}
	return head + "."
}

// TestOIDC verifies tokens of a local provider: a good one maps to its project and scopes by
// the documented rules; expired, wrong audience, wrong issuer, alg none, key confusion, an
// unknown signing key and tokens whose claims grant nothing are refused.
func TestOIDC(t *testing.T) {
	p := newIDP(t)
	ctx := context.Background()
	o, err := NewOIDC(ctx, OIDCOptions{Issuer: p.ts.URL, Audience: "sessiond"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	claims := func(mod func(map[string]any)) map[string]any {
		c := map[string]any{"iss": p.ts.URL, "aud": "sessiond", "sub": "alice", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix(),
			"sessiond_project": "alpha", "scope": "openid sessiond:read sessiond:command profile"}
		if mod != nil {
			mod(c)
		}
		return c
	}
	got, err := o.Verify(ctx, p.sign(t, "RS256", nil, claims(nil)))
	if err != nil {
		t.Fatalf("a good token: %v", err)
	}
	if got.Subject != "oidc:alice" || got.Project != "alpha" || got.Scopes.String() != "read,command" || got.ExpiresAt.IsZero() {
		t.Errorf("principal %+v", got)
	}
	scp, err := o.Verify(ctx, p.sign(t, "RS256", nil, claims(func(c map[string]any) {
		delete(c, "scope")
		c["scp"] = []string{"sessiond:admin", "other"}
		c["aud"] = []string{"other", "sessiond"}
		c["sessiond_project"] = "*"
	})))
	if err != nil || scp.Scopes.String() != "admin" || !scp.AllProjects() {
		t.Errorf("scp claim, audience list, every project: %+v, %v", scp, err)
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	for name, tok := range map[string]string{
		"expired":        p.sign(t, "RS256", nil, claims(func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() })),
		"wrong audience": p.sign(t, "RS256", nil, claims(func(c map[string]any) { c["aud"] = "someone-else" })),
		"wrong issuer":   p.sign(t, "RS256", nil, claims(func(c map[string]any) { c["iss"] = "https://evil.example" })),
		"alg none":       p.sign(t, "none", nil, claims(nil)),
		"key confusion":  p.sign(t, "HS256", nil, claims(nil)),
		"unknown key":    p.sign(t, "RS256", other, claims(nil)),
		"tampered":       strings.Replace(p.sign(t, "RS256", nil, claims(nil)), ".", "."+b64json(map[string]any{"x": 1})[:4], 1),
		"garbage":        "not.a.jwt",
	} {
		if pr, err := o.Verify(ctx, tok); err == nil {
			t.Errorf("%s: accepted as %+v", name, pr)
		} else if errors.Is(err, ErrTokenClaims) {
			t.Errorf("%s: refused for its claims (%v), want refused for its signature or registered claims", name, err)
		}
	}
	for name, mod := range map[string]func(map[string]any){
		"no project": func(c map[string]any) { delete(c, "sessiond_project") },
		"no scope":   func(c map[string]any) { c["scope"] = "openid profile" },
	} {
		if _, err := o.Verify(ctx, p.sign(t, "RS256", nil, claims(mod))); !errors.Is(err, ErrTokenClaims) {
			t.Errorf("%s: %v, want ErrTokenClaims", name, err)
		}
	}
	if _, err := NewOIDC(ctx, OIDCOptions{Issuer: p.ts.URL + "/other", Audience: "sessiond"}); err == nil {
		t.Error("NewOIDC with an issuer the provider does not serve succeeded")
	}
}

// TestOIDCKeyRefetchIsRateLimited: tokens naming a key the provider does not have, which
// anyone can make, do not each make the server fetch the provider's keys again: after the
// first fetch, 50 of them cost no fetch within JWKSRefetchInterval, and one fetch once it has
// passed. Before, every such token fetched the JWKS.
func TestOIDCKeyRefetchIsRateLimited(t *testing.T) {
	p := newIDP(t)
	ctx := context.Background()
	o, err := NewOIDC(ctx, OIDCOptions{Issuer: p.ts.URL, Audience: "sessiond"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	o.keys.now = func() time.Time { return now }
	claims := map[string]any{"iss": p.ts.URL, "aud": "sessiond", "sub": "alice", "exp": now.Add(time.Hour).Unix(),
		"sessiond_project": "alpha", "scope": "sessiond:read"}
	if _, err := o.Verify(ctx, p.sign(t, "RS256", nil, claims)); err != nil {
		t.Fatalf("a good token: %v", err)
	}
	if n := p.jwksServed.Load(); n != 1 {
		t.Fatalf("%d fetches of the keys for the first token, want 1", n)
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	forged := p.sign(t, "RS256", other, claims)
	for range 50 {
		if _, err := o.Verify(ctx, forged); err == nil {
			t.Fatal("a token of an unknown key was accepted")
		}
	}
	if n := p.jwksServed.Load(); n != 1 {
		t.Errorf("50 tokens of an unknown key made %d more fetches of the keys, want none within %s", n-1, JWKSRefetchInterval)
	}
	now = now.Add(JWKSRefetchInterval)
	for range 5 {
		o.Verify(ctx, forged)
	}
	if n := p.jwksServed.Load(); n != 2 {
		t.Errorf("after the interval, %d fetches in all, want 2", n)
	}
	if _, err := o.Verify(ctx, p.sign(t, "RS256", nil, claims)); err != nil {
		t.Errorf("a good token after the refetches: %v", err)
	}
}
