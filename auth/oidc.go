package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// OIDC tokens (docs/security.md, "OIDC"). A bearer credential that is not an API key is taken
// as a JWT from the identity provider at the configured issuer: its signature is checked
// against the provider's published keys (JWKS, fetched by discovery and again when a token's
// signature verifies with none of them, at most every JWKSRefetchInterval), RS256 or ES256 only (so "alg: none" and an HMAC token signed with
// the public key are refused), its iss must be the issuer, its aud must hold the audience, and
// it must not have expired. Its claims then map to a principal by these rules:
//
//   - the subject is the sub claim ("oidc:<sub>");
//   - the project is the string claim named by OIDCOptions.ProjectClaim (default
//     "sessiond_project"); "*" is every project; a token without it is refused;
//   - the scopes are the values "sessiond:read", "sessiond:append", "sessiond:command" and
//     "sessiond:admin" found in the scope claim (a space-separated string) or the scp claim (a
//     string array); other values are ignored; a token with none is refused.

// OIDCOptions configure [NewOIDC].
type OIDCOptions struct {
	// Issuer is the identity provider's issuer URL (its discovery document is at
	// Issuer/.well-known/openid-configuration).
	Issuer string
	// Audience is the value the token's aud claim must hold.
	Audience string
	// ProjectClaim names the claim that holds the project (default "sessiond_project").
	ProjectClaim string
	// Client fetches the discovery document and the keys (default http.DefaultClient).
	Client *http.Client
}

// ScopePrefix is the prefix of the scope values of a token that grant sessiond's scopes.
const ScopePrefix = "sessiond:"

// OIDC verifies the tokens of one identity provider.
type OIDC struct {
	verifier *oidc.IDTokenVerifier
	claim    string
	keys     *jwks
}

// NewOIDC reads the provider's discovery document and returns a verifier of its tokens. ctx
// bounds the discovery only.
func NewOIDC(ctx context.Context, opt OIDCOptions) (*OIDC, error) {
	if opt.Issuer == "" || opt.Audience == "" {
		return nil, errors.New("OIDC needs an issuer and an audience")
	}
	if opt.ProjectClaim == "" {
		opt.ProjectClaim = "sessiond_project"
	}
	hc := opt.Client
	if hc == nil {
		hc = http.DefaultClient
	}
	disc, err := discover(ctx, hc, opt.Issuer)
	if err != nil {
		return nil, err
	}
	ks := &jwks{url: disc.JWKSURI, client: hc, every: JWKSRefetchInterval, now: time.Now}
	v := oidc.NewVerifier(disc.Issuer, ks, &oidc.Config{ClientID: opt.Audience, SupportedSigningAlgs: []string{oidc.RS256, oidc.ES256}})
	if disc.Issuer != opt.Issuer {
		return nil, fmt.Errorf("OIDC discovery: the provider's issuer is %q, not %q", disc.Issuer, opt.Issuer)
	}
	return &OIDC{verifier: v, claim: opt.ProjectClaim, keys: ks}, nil
}

type discovery struct {
	Issuer  string `json:"issuer"`
	JWKSURI string `json:"jwks_uri"`
}

func discover(ctx context.Context, hc *http.Client, issuer string) (*discovery, error) {
	u := strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("OIDC discovery: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("OIDC discovery: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("OIDC discovery: GET %s: %s", u, resp.Status)
	}
	var d discovery
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(&d); err != nil {
		return nil, fmt.Errorf("OIDC discovery: %s: %w", u, err)
	}
	if d.JWKSURI == "" {
		return nil, fmt.Errorf("OIDC discovery: %s has no jwks_uri", u)
	}
	return &d, nil
}

// ErrTokenClaims reports a valid token whose claims give no project or no scope.
var ErrTokenClaims = errors.New("the token's claims grant nothing")

// Verify returns the principal of a token, or an error saying why it is refused (a wrapped
// ErrTokenClaims when it verifies but its claims grant nothing).
func (o *OIDC) Verify(ctx context.Context, raw string) (Principal, error) {
	tok, err := o.verifier.Verify(ctx, raw)
	if err != nil {
		return Principal{}, err
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return Principal{}, err
	}
	project, _ := claims[o.claim].(string)
	if project == "" {
		return Principal{}, fmt.Errorf("%w: no %s claim (a project name, or \"*\" for every project)", ErrTokenClaims, o.claim)
	}
	if why := ValidProject(project); why != "" {
		return Principal{}, fmt.Errorf("%w: %s", ErrTokenClaims, why)
	}
	var values []string
	if s, ok := claims["scope"].(string); ok {
		values = strings.Fields(s)
	}
	if arr, ok := claims["scp"].([]any); ok {
		for _, v := range arr {
			if s, ok := v.(string); ok {
				values = append(values, s)
			}
		}
	}
	var scopes ScopeSet
	for _, v := range values {
		if name, ok := strings.CutPrefix(v, ScopePrefix); ok {
			scopes |= Scope(name).bit()
		}
	}
	if scopes == 0 {
		return Principal{}, fmt.Errorf("%w: no sessiond scope in scope or scp (sessiond:read, sessiond:append, sessiond:command, sessiond:admin)", ErrTokenClaims)
	}
	return Principal{Subject: oidcParentPrefix + tok.Subject, Owner: oidcParentPrefix + tok.Subject, Project: project, Scopes: scopes, ExpiresAt: tok.Expiry}, nil
}
