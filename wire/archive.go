package wire

// Note is what the runtime says about the work when it archives.
type Note struct {
	Done       string `json:"done"`
	InProgress string `json:"inProgress"`
	Next       string `json:"next"`
}

// ArchiveInfo describes an archive file.
type ArchiveInfo struct {
	// Name is the archive's id: RC-<stamp>-<session>.json.
	Name string `json:"name"`
	// Path is the archive file on the server: in the answers of archive, restore and upload,
	// never in the list of archives (GET /v1/archives), which names them only.
	Path       string  `json:"path,omitempty"`
	SessionID  string  `json:"sessionId"`
	Project    *string `json:"project"`
	ArchivedAt string  `json:"archivedAt"`
	Checksum   string  `json:"checksum"`
	Bytes      int64   `json:"bytes"`
}

// Progress is how far a long operation (archive, restore) has come: Done of Total events in
// its current Phase. Phases come in a fixed order per operation (archive: read, write,
// compact; restore: verify, import); within a phase Done never decreases and ends at Total.
type Progress struct {
	// Phase is what the operation is doing: one of the Phase… constants.
	Phase string `json:"phase"`
	// Done is how many of the session's events this phase has handled.
	Done int64 `json:"done"`
	// Total is the number of events of the session.
	Total int64 `json:"total"`
}
