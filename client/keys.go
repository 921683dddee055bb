package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/sessiond/sessiond/wire"
)

// CreateKey makes an API key (admin scope); the answer holds its secret, shown this once.
func (c *Client) CreateKey(ctx context.Context, req wire.CreateKeyRequest) (*wire.CreatedKey, error) {
	body, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	var out wire.CreatedKey
	if err := c.do(ctx, http.MethodPost, "/v1/keys", body, "application/json", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListKeys lists the API keys the caller may see (admin scope).
func (c *Client) ListKeys(ctx context.Context) (*wire.KeyList, error) {
	var out wire.KeyList
	if err := c.do(ctx, http.MethodGet, "/v1/keys", nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RevokeKey revokes the API key with that id (admin scope).
func (c *Client) RevokeKey(ctx context.Context, id string) (*wire.Key, error) {
	var out wire.Key
	if err := c.do(ctx, http.MethodPost, "/v1/keys/"+url.PathEscape(id)+"/revoke", nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// StreamToken makes a short-lived read-only token for one session's event stream, for a
// browser's EventSource (docs/security.md).
func (c *Client) StreamToken(ctx context.Context, sessionID string) (*wire.StreamToken, error) {
	var out wire.StreamToken
	if err := c.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(sessionID)+"/stream-token", nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Whoami says who the client's credential acts as.
func (c *Client) Whoami(ctx context.Context) (*wire.Whoami, error) {
	var out wire.Whoami
	if err := c.do(ctx, http.MethodGet, "/v1/whoami", nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}
