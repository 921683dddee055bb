package client

import (
	"bytes"
	"context"
	"net/http"
	"net/url"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/wire"
)

func (c *Client) postJSON(ctx context.Context, path string, in, out any) error {
	body, err := jsonBody(in)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPost, path, body, "application/json", out)
}

func sessionPath(id, what string) string { return "/v1/sessions/" + url.PathEscape(id) + "/" + what }

// Heartbeat records a heartbeat for the session (a stale session becomes running again).
func (c *Client) Heartbeat(ctx context.Context, id string) (*api.Session, error) {
	var out api.Session
	return &out, c.do(ctx, http.MethodPost, sessionPath(id, "heartbeat"), nil, "", &out)
}

// Assess estimates a task's hours and risk from history and cuts it into phases.
func (c *Client) Assess(ctx context.Context, id string, req wire.AssessRequest) (*wire.Assessment, error) {
	var out wire.Assessment
	return &out, c.postJSON(ctx, sessionPath(id, "assess"), req, &out)
}

// Warm starts the session's work window and says when it closes.
func (c *Client) Warm(ctx context.Context, id string, req api.WarmRequest) (*wire.Window, error) {
	var out wire.Window
	return &out, c.postJSON(ctx, sessionPath(id, "warm"), req, &out)
}

// Archive writes the session to an archive file on the server and marks it archived.
func (c *Client) Archive(ctx context.Context, id string, req api.ArchiveRequest) (*api.ArchiveResponse, error) {
	var out api.ArchiveResponse
	return &out, c.postJSON(ctx, sessionPath(id, "archive"), req, &out)
}

// Status reports hours since the last archive, the window, staleness and a recommendation.
func (c *Client) Status(ctx context.Context, id string) (*wire.StatusReport, error) {
	var out wire.StatusReport
	return &out, c.do(ctx, http.MethodGet, sessionPath(id, "status"), nil, "", &out)
}

// Archives lists the server's archives, newest first: of project when not empty ("-" for
// sessions without a project), else all.
func (c *Client) Archives(ctx context.Context, project string) (*api.ArchiveList, error) {
	var out api.ArchiveList
	q := ""
	if project != "" {
		q = "?project=" + url.QueryEscape(project)
	}
	return &out, c.do(ctx, http.MethodGet, "/v1/archives"+q, nil, "", &out)
}

// UploadArchive sends an archive file (from another host) to the server, which verifies and
// stores it; restore it then by name.
func (c *Client) UploadArchive(ctx context.Context, data []byte) (*wire.ArchiveInfo, error) {
	var out wire.ArchiveInfo
	return &out, c.do(ctx, http.MethodPost, "/v1/archives", bytes.NewReader(data), "application/json", &out)
}

// Restore restores an archive (by name, or the latest of a project) into the server's store.
func (c *Client) Restore(ctx context.Context, req api.RestoreRequest) (*api.RestoreResponse, error) {
	var out api.RestoreResponse
	return &out, c.postJSON(ctx, "/v1/archives/restore", req, &out)
}

// Sweep runs the stale sweeper now.
func (c *Client) Sweep(ctx context.Context) (*wire.SweepResult, error) {
	var out wire.SweepResult
	return &out, c.do(ctx, http.MethodPost, "/v1/sweep", nil, "", &out)
}
