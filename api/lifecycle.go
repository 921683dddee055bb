package api

import (
	"github.com/sessiond/sessiond/wire"
)

// WarmRequest is the body of POST /v1/sessions/{id}/warm (may be empty).
type WarmRequest struct {
	// Hours is the window's length (default 5, or the server's --window).
	Hours float64 `json:"hours,omitempty"`
	// Restart opens a new window even when one is still open.
	Restart bool `json:"restart,omitempty"`
}

// ArchiveRequest is the body of POST /v1/sessions/{id}/archive (may be empty).
type ArchiveRequest struct {
	Note wire.Note `json:"note"`
	// Compact removes the session's events from the store once the archive is verified.
	Compact bool `json:"compact,omitempty"`
	// UpdatedByGate says who archives (owner, handoff, user, mission; default owner).
	UpdatedByGate string `json:"updated_by_gate,omitempty"`
}

// ArchiveResponse is the answer of archive: the archive written and the session as it now is.
type ArchiveResponse struct {
	Archive   wire.ArchiveInfo `json:"archive"`
	Events    int              `json:"events"`
	Compacted int64            `json:"compacted"`
	Session   Session          `json:"session"`
}

// ArchiveList is the body of GET /v1/archives, newest first. It names the archives (restore
// takes a name) and never shows where the server keeps them: no archive has a path.
type ArchiveList struct {
	Archives []wire.ArchiveInfo `json:"archives"`
}

// RestoreRequest is the body of POST /v1/archives/restore: the archive to restore, by Name, or
// the newest archive of Project ("-" for sessions without a project).
type RestoreRequest struct {
	Name    string `json:"name,omitempty"`
	Project string `json:"project,omitempty"`
}

// RestoreResponse is the answer of POST /v1/archives/restore.
type RestoreResponse struct {
	Archive  wire.ArchiveInfo `json:"archive"`
	Events   int              `json:"events"`
	Replaced bool             `json:"replaced"`
	// How says what restore did: "imported" (the session was not in the store),
	// "over-compacted" (its archived, compacted row was replaced) or "reactivated" (it was
	// archived with its log still in the store, which was kept as it is).
	How     string  `json:"how"`
	Session Session `json:"session"`
}
