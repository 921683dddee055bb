package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/wire"
)

// ArchiveWithProgress is [Client.Archive], with progress told how far the server has come
// (at most about every 200 ms, only if the archive takes that long). A nil progress is Archive.
func (c *Client) ArchiveWithProgress(ctx context.Context, id string, req api.ArchiveRequest, progress func(wire.Progress)) (*api.ArchiveResponse, error) {
	var out api.ArchiveResponse
	return &out, c.postProgress(ctx, sessionPath(id, "archive"), req, &out, progress)
}

// RestoreWithProgress is [Client.Restore], with progress told how far the server has come
// (at most about every 200 ms, only if the restore takes that long). A nil progress is Restore.
func (c *Client) RestoreWithProgress(ctx context.Context, req api.RestoreRequest, progress func(wire.Progress)) (*api.RestoreResponse, error) {
	var out api.RestoreResponse
	return &out, c.postProgress(ctx, "/v1/archives/restore", req, &out, progress)
}

// postProgress posts a JSON body to an endpoint that can stream its progress (docs/api.md,
// "Progress of archive and restore") and decodes the answer into out. With progress nil it is
// an ordinary request.
func (c *Client) postProgress(ctx context.Context, path string, in, out any, progress func(wire.Progress)) error {
	if progress == nil {
		return c.postJSON(ctx, path, in, out)
	}
	body, err := jsonBody(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, body)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	c.authorize(req)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", api.ProgressMediaType+", application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w (is the server running at %s?)", path, err, c.base)
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != api.ProgressMediaType || resp.StatusCode >= 300 {
		// The ordinary answer: the operation was quick, or failed before it started.
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return fmt.Errorf("POST %s: read response: %w", path, err)
		}
		if resp.StatusCode >= 300 {
			return decodeError(resp.StatusCode, data)
		}
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("POST %s: decode response: %w", path, err)
		}
		return nil
	}
	return readProgressStream(resp.Body, path, out, progress)
}

// readProgressStream reads progress lines, telling progress of each, up to the final line,
// which it decodes into out (or returns as the *api.Error it holds).
func readProgressStream(r io.Reader, path string, out any, progress func(wire.Progress)) error {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var l struct {
				Progress *wire.Progress `json:"progress"`
				Error    *api.Error     `json:"error"`
			}
			if jerr := json.Unmarshal(line, &l); jerr != nil {
				return fmt.Errorf("POST %s: decode progress stream line %q: %w", path, bytes.TrimSpace(line), jerr)
			}
			switch {
			case l.Progress != nil:
				progress(*l.Progress)
				continue
			case l.Error != nil:
				l.Error.Status = api.HTTPStatus(l.Error.Code)
				return l.Error
			}
			if jerr := json.Unmarshal(line, out); jerr != nil {
				return fmt.Errorf("POST %s: decode response: %w", path, jerr)
			}
			return nil
		}
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("POST %s: the progress stream ended before its final answer (connection lost?); check the session's status before retrying", path)
		}
		if err != nil {
			return fmt.Errorf("POST %s: read progress stream: %w", path, err)
		}
	}
}
