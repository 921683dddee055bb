package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// JWKSRefetchInterval is the least time between two fetches of an OIDC provider's keys
// (JWKS): a token whose key is not among the keys fetched last is refused without a fetch
// until it has passed, so tokens naming made-up keys, which anyone can send, cost the
// provider at most one request per interval.
const JWKSRefetchInterval = 30 * time.Second

// jwks is an OIDC provider's signing keys (oidc.KeySet), fetched when first needed and
// again when a token's signature verifies with none of them, at most every JWKSRefetchInterval.
type jwks struct {
	url    string
	client *http.Client
	every  time.Duration
	now    func() time.Time

	mu      sync.Mutex // held during a fetch: concurrent tokens wait for it, none fetch again
	keys    []jose.JSONWebKey
	fetched time.Time // zero: never
	fetches int       // how many fetches were made (tests)
}

// algorithms are the signature algorithms accepted (as the verifier's SupportedSigningAlgs).
var algorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256}

// VerifySignature implements oidc.KeySet: it returns the token's payload when one of the
// provider's keys (those of its key id, or all when it names none) verifies its signature.
func (k *jwks) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, algorithms)
	if err != nil {
		return nil, fmt.Errorf("malformed token: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("the token must have exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fetched.IsZero() {
		if err := k.fetch(ctx); err != nil {
			return nil, err
		}
	}
	if payload, ok := k.verify(jws, kid); ok {
		return payload, nil
	}
	if k.now().Sub(k.fetched) < k.every {
		return nil, fmt.Errorf("no key of the provider verifies the token's signature (key id %.64q); its keys are fetched again at most every %s", kid, k.every)
	}
	if err := k.fetch(ctx); err != nil {
		return nil, err
	}
	if payload, ok := k.verify(jws, kid); ok {
		return payload, nil
	}
	return nil, fmt.Errorf("no key of the provider verifies the token's signature (key id %.64q)", kid)
}

// verify tries the keys of key id kid (every key when kid is empty).
func (k *jwks) verify(jws *jose.JSONWebSignature, kid string) ([]byte, bool) {
	for _, key := range k.keys {
		if kid != "" && key.KeyID != kid {
			continue
		}
		if payload, err := jws.Verify(key); err == nil {
			return payload, true
		}
	}
	return nil, false
}

// fetch reads the provider's keys (k.mu held). A failed fetch counts as one for the interval
// too, so that a provider that is down is not asked on every request.
func (k *jwks) fetch(ctx context.Context) error {
	k.fetched = k.now()
	k.fetches++
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return fmt.Errorf("OIDC keys: %w", err)
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return fmt.Errorf("OIDC keys: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("OIDC keys: GET %s: %s", k.url, resp.Status)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(&set); err != nil {
		return fmt.Errorf("OIDC keys: %s: %w", k.url, err)
	}
	k.keys = set.Keys
	return nil
}
