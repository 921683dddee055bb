package archive

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/wire"
)

// The archive file format (docs/lifecycle.md).
const (
	// Format is the "format" of every archive file.
	Format = "sessiond-archive"
	// Version is the version this code writes and the newest it reads. Version 2 added the
	// content's chainHead.
	Version = 2
	// noProject is the directory of the archives of sessions without a project.
	noProject = "_no-project"
	// maxNameBytes bounds a file or directory name built from a session id or project.
	maxNameBytes = 80
)

// Summary is derived from the log (the transcript fold) when the archive is written.
type Summary struct {
	Plan             *contract.PlanPayload      `json:"plan"`
	OpenTasks        []contract.TaskPayload     `json:"openTasks"`
	PendingApprovals []contract.ApprovalPayload `json:"pendingApprovals"`
	LastSummary      *contract.SummaryPayload   `json:"lastSummary"`
	Usage            wire.Usage                 `json:"usage"`
	Events           int                        `json:"events"`
	Runs             int                        `json:"runs"`
}

// Content is the checksummed content of an archive file.
type Content struct {
	SessionID    string                 `json:"sessionId"`
	Project      *string                `json:"project"`
	ArchivedAt   string                 `json:"archivedAt"`
	Record       contract.SessionRecord `json:"record"` // as stored before archiving
	Snapshot     contract.Snapshot      `json:"snapshot"`
	Lineage      *contract.Lineage      `json:"lineage"`
	ActiveBranch *contract.ActiveBranch `json:"activeBranch"`
	LastSequence int64                  `json:"lastSequence"`
	Lifecycle    wire.Lifecycle         `json:"lifecycle"`
	Note         wire.Note              `json:"note"`
	Summary      Summary                `json:"summary"`
	Runs         []contract.Run         `json:"runs"`
	// Events are the stored events, byte for byte, in sequence order.
	Events []json.RawMessage `json:"events"`
	// ChainHead is the hash chain's head over Events (store/chain.go: from store.ChainGenesis,
	// the hash of the last event), 64 hexadecimal digits: the session's head hash as the store
	// held it at LastSequence when the log was archived. Set by Encode (SetChainHead);
	// required from version 2 on, absent from version 1 files. Decode and VerifyFile refuse an
	// archive whose events do not chain to it, and fsck compares it with the store's head.
	ChainHead string `json:"chainHead,omitempty"`
}

// SetChainHead sets c.ChainHead to the chain's head over c.Events.
func (c *Content) SetChainHead() {
	h := store.ChainGenesis
	for _, e := range c.Events {
		h = store.ChainNext(h, e)
	}
	c.ChainHead = hex.EncodeToString(h[:])
}

// checkChainHead compares the chain's head over the events (head) with the recorded one, which
// a file of version 2 or later must have.
func (c *Content) checkChainHead(version int, head store.ChainHash) error {
	if c.ChainHead == "" {
		if version >= 2 {
			return invalid("the content has no chainHead (required from archive version 2 on): the file was edited")
		}
		return nil
	}
	want, err := store.ParseChainHash(c.ChainHead)
	if err != nil {
		return invalid("chainHead: %v", err)
	}
	if want != head {
		return invalid("the events do not chain to the archive's chainHead %s (they chain to %x): an event was altered after the archive was written; restore another archive", c.ChainHead, head[:])
	}
	return nil
}

// header is the envelope of an archive file. The header fields repeat facts of the
// content so that a listing reads only the start of each file; restore checks they agree.
type header struct {
	Format       string  `json:"format"`
	Version      int     `json:"version"`
	SessionID    string  `json:"sessionId"`
	Project      *string `json:"project"`
	ArchivedAt   string  `json:"archivedAt"`
	Checksum     string  `json:"checksum"` // "sha256:<hex>" of the content's bytes
	ContentBytes int     `json:"contentBytes"`
}

type file struct {
	header
	Content json.RawMessage `json:"content"`
}

// Encode returns the bytes of an archive file holding c, with its chainHead computed over
// c.Events (c.SetChainHead: c is updated).
func Encode(c *Content) ([]byte, error) {
	c.SetChainHead()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // events stay byte for byte
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("encode archive content: %w", err)
	}
	content := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	sum := sha256.Sum256(content)
	h := header{Format: Format, Version: Version, SessionID: c.SessionID, Project: c.Project,
		ArchivedAt: c.ArchivedAt, Checksum: "sha256:" + hex.EncodeToString(sum[:]), ContentBytes: len(content)}
	hb, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(hb)+len(content)+16)
	out = append(out, hb[:len(hb)-1]...)
	out = append(out, `,"content":`...)
	out = append(out, content...)
	out = append(out, "}\n"...)
	return out, nil
}

// Decode verifies an archive file and returns its content and header checksum. It
// refuses (an [*Error] wrapping [ErrInvalid]) a file that is not complete JSON (truncated), has another format
// or a newer version, whose content's SHA-256 is not the checksum (tampered), or whose header
// disagrees with the content.
func Decode(data []byte) (*Content, string, error) {
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, "", invalid("not a complete archive file (truncated or corrupt): %v", err)
	}
	if f.Format != Format {
		return nil, "", invalid("format is %q, want %q", f.Format, Format)
	}
	if f.Version < 1 || f.Version > Version {
		return nil, "", invalid("archive version %d is not supported (this sessiond reads 1 to %d); upgrade sessiond", f.Version, Version)
	}
	if len(f.Content) != f.ContentBytes {
		return nil, "", invalid("content is %d bytes, the header says %d: the file was truncated or edited", len(f.Content), f.ContentBytes)
	}
	sum := sha256.Sum256(f.Content)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != f.Checksum {
		return nil, "", invalid("checksum mismatch: the content hashes to %s but the header says %s; the file was altered, restore another archive", got, f.Checksum)
	}
	var c Content
	dec := json.NewDecoder(bytes.NewReader(f.Content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, "", invalid("decode archive content: %v", err)
	}
	if c.SessionID != f.SessionID || c.ArchivedAt != f.ArchivedAt || !sameProject(c.Project, f.Project) || c.Record.SessionID != c.SessionID {
		return nil, "", invalid("the header (session %q, archived at %s) disagrees with the content (session %q, archived at %s)", f.SessionID, f.ArchivedAt, c.SessionID, c.ArchivedAt)
	}
	head := store.ChainGenesis
	for _, e := range c.Events {
		head = store.ChainNext(head, e)
	}
	if err := c.checkChainHead(f.Version, head); err != nil {
		return nil, "", err
	}
	return &c, f.Checksum, nil
}

func sameProject(a, b *string) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}
