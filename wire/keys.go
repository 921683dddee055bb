package wire

// Keys and browser credentials (docs/security.md).

// CreateKeyRequest is the body of POST /v1/keys.
type CreateKeyRequest struct {
	// Name is a label for people (at most 200 bytes).
	Name string `json:"name,omitempty"`
	// Project is the project the key may act on, or "*" for every project (only a key of
	// every project may make one). Default: the caller's project.
	Project string `json:"project,omitempty"`
	// Scopes are what the key may do: read, append, command, admin (at least one).
	Scopes []string `json:"scopes"`
	// ExpiresIn is the key's lifetime: a Go duration ("720h") or days ("90d"); empty: until
	// revoked.
	ExpiresIn string `json:"expiresIn,omitempty"`
}

// Key is an API key as the API shows it: never its secret.
type Key struct {
	// ID is the key's public id, the part after "sk_" of the key.
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Project string   `json:"project"`
	Scopes  []string `json:"scopes"`
	// Session is the only session a stream token may read.
	Session string `json:"session,omitempty"`
	// Parent is the id of the key a derived key (stream token, login) comes from, or the
	// subject ("oidc:<sub>") of the OIDC token it was minted with.
	Parent     string `json:"parent,omitempty"`
	CreatedAt  string `json:"createdAt"`
	ExpiresAt  string `json:"expiresAt,omitempty"`
	RevokedAt  string `json:"revokedAt,omitempty"`
	LastUsedAt string `json:"lastUsedAt,omitempty"`
}

// CreatedKey is the answer of POST /v1/keys: the key, and its secret, shown this once.
type CreatedKey struct {
	Key Key `json:"key"`
	// Secret is the whole key (sk_<id>_<secret>) to send as Authorization: Bearer <secret>.
	Secret string `json:"secret"`
}

// KeyList is the answer of GET /v1/keys.
type KeyList struct {
	Keys []Key `json:"keys"`
}

// StreamToken is the answer of POST /v1/sessions/{id}/stream-token: a read-only token for
// one session's event stream, for a browser's EventSource.
type StreamToken struct {
	Token     string `json:"token"`
	ExpiresAt string `json:"expiresAt"`
	// URL is the stream's path with the token, ready for new EventSource(url).
	URL string `json:"url"`
}

// Whoami is the answer of GET /v1/whoami and POST /v1/login: who the request acts as.
type Whoami struct {
	// Subject is "key:<id>", "oidc:<sub>" or "anonymous" (a server without authentication).
	Subject string   `json:"subject"`
	Project string   `json:"project"`
	Scopes  []string `json:"scopes"`
	// Session is the only session the credential may act on, if any.
	Session   string `json:"session,omitempty"`
	ExpiresAt string `json:"expiresAt,omitempty"`
	// Auth says whether the server requires credentials.
	Auth bool `json:"auth"`
}
