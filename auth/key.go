package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// An API key is "sk_" + its public id (16 lowercase hex digits, 64 random bits) + "_" + its
// secret (43 characters of unpadded base64url, 256 random bits). The store keeps the id and
// the SHA-256 of the secret; the secret is shown once, when the key is made.
const (
	keyPrefix    = "sk_"
	keyIDLen     = 16
	keySecretLen = 43
	// KeyLen is the length of a whole key.
	KeyLen = len(keyPrefix) + keyIDLen + 1 + keySecretLen
)

// ErrMalformedKey reports a string that is not an API key's shape.
var ErrMalformedKey = errors.New("not an API key (sk_<16 hex digits>_<43 base64url characters>)")

// newKeyParts returns a fresh random id and secret.
func newKeyParts() (id, secret string) {
	var idb [keyIDLen / 2]byte
	var sb [32]byte
	rand.Read(idb[:])
	rand.Read(sb[:])
	return hex.EncodeToString(idb[:]), base64.RawURLEncoding.EncodeToString(sb[:])
}

// formatKey returns the key of id and secret.
func formatKey(id, secret string) string { return keyPrefix + id + "_" + secret }

// ParseKey splits an API key into its public id and its secret, or returns ErrMalformedKey.
// It looks only at the shape: whether the key exists is the [Keyring]'s question.
func ParseKey(key string) (id, secret string, err error) {
	if len(key) != KeyLen || !strings.HasPrefix(key, keyPrefix) || key[len(keyPrefix)+keyIDLen] != '_' {
		return "", "", ErrMalformedKey
	}
	id = key[len(keyPrefix) : len(keyPrefix)+keyIDLen]
	secret = key[len(keyPrefix)+keyIDLen+1:]
	if !ValidKeyID(id) {
		return "", "", ErrMalformedKey
	}
	if b, err := base64.RawURLEncoding.Strict().DecodeString(secret); err != nil || len(b) != 32 {
		return "", "", ErrMalformedKey
	}
	return id, secret, nil
}

// LooksLikeKey reports whether s has an API key's prefix (and so is not an OIDC token).
func LooksLikeKey(s string) bool { return strings.HasPrefix(s, keyPrefix) }

// ValidKeyID reports whether s is the shape of a key's public id: 16 lowercase hex digits.
func ValidKeyID(s string) bool {
	if len(s) != keyIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func hashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// BearerToken returns the credential of an Authorization header value ("Bearer <token>", the
// scheme in any case, one space), or false when the value is not of that form.
func BearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", false
	}
	return token, true
}

// ParseLifetime parses a key's lifetime: a Go duration ("720h", "15m") or a number of days
// ("90d"). It must be positive.
func ParseLifetime(s string) (time.Duration, error) {
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days <= 0 || days > 36500 {
			return 0, fmt.Errorf("lifetime %q: a number of days from 1 to 36500, like 90d", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d <= 0 {
			return 0, fmt.Errorf("lifetime %q: a positive duration like 90d, 720h or 15m", s)
		}
	}
	return d, nil
}
