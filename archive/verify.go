package archive

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sessiond/sessiond/store"
)

// VerifyFile checks the archive file at path as [Decode] does — the header, the content's
// length and SHA-256, the content's members and the header's agreement with them — without
// holding the file in memory: the content is hashed and decoded as a stream, and each event
// is handed to visit (its index in the log and its bytes, valid only during the call) and
// dropped. The returned Content has every member but Events (nil). Its memory is that of the
// largest event and of the members other than the events (the record, the runs, the summary),
// whatever the file's size. The header's members must come before "content", as [Encode]
// writes them. An error from visit is returned as it is; a file that is not a valid archive is
// an [*Error] wrapping [ErrInvalid].
func VerifyFile(path string, visit func(i int, raw []byte) error) (*Content, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("verify archive: %w", err)
	}
	defer f.Close()
	h, start, err := readHeaderAt(f)
	if err != nil {
		return nil, "", err
	}
	// The content's SHA-256 first: nothing of a tampered file is decoded.
	sum := sha256.New()
	n, err := io.Copy(sum, io.NewSectionReader(f, start, int64(h.ContentBytes)))
	if err != nil {
		return nil, "", fmt.Errorf("verify archive: read the content: %w", err)
	}
	if n != int64(h.ContentBytes) {
		return nil, "", invalid("content is %d bytes, the header says %d: the file was truncated or edited", n, h.ContentBytes)
	}
	if got := "sha256:" + hex.EncodeToString(sum.Sum(nil)); got != h.Checksum {
		return nil, "", invalid("checksum mismatch: the content hashes to %s but the header says %s; the file was altered, restore another archive", got, h.Checksum)
	}
	// After the content, only the file's closing brace and white space.
	var tail [64]byte
	m, _ := f.ReadAt(tail[:], start+int64(h.ContentBytes))
	if t := bytes.TrimSpace(tail[:m]); m == len(tail) || !bytes.Equal(t, []byte("}")) {
		return nil, "", invalid("not a complete archive file (truncated or corrupt): the content is not the file's last member")
	}
	head := store.ChainGenesis
	c, err := decodeContent(bufio.NewReaderSize(io.NewSectionReader(f, start, int64(h.ContentBytes)), 64<<10), func(i int, raw []byte) error {
		head = store.ChainNext(head, raw)
		if visit == nil {
			return nil
		}
		return visit(i, raw)
	})
	if err != nil {
		return nil, "", err
	}
	if c.SessionID != h.SessionID || c.ArchivedAt != h.ArchivedAt || !sameProject(c.Project, h.Project) || c.Record.SessionID != c.SessionID {
		return nil, "", invalid("the header (session %q, archived at %s) disagrees with the content (session %q, archived at %s)", h.SessionID, h.ArchivedAt, c.SessionID, c.ArchivedAt)
	}
	if err := c.checkChainHead(h.Version, head); err != nil {
		return nil, "", err
	}
	return c, h.Checksum, nil
}

// readHeaderAt reads an archive file's header members up to "content" and returns them with the
// offset of the content's first byte.
func readHeaderAt(f *os.File) (*header, int64, error) {
	truncated := func(err error) error {
		return invalid("not a complete archive file (truncated or corrupt): %v", err)
	}
	br := bufio.NewReader(f)
	dec := json.NewDecoder(br)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, 0, truncated(fmt.Errorf("it does not start with a JSON object"))
	}
	var h header
	seen := map[string]bool{}
	for {
		t, err := dec.Token()
		if err != nil {
			return nil, 0, truncated(err)
		}
		key, ok := t.(string)
		if !ok {
			return nil, 0, truncated(fmt.Errorf("no content member"))
		}
		if seen[key] {
			return nil, 0, invalid("member %q appears twice", key)
		}
		seen[key] = true
		if key == "content" {
			break
		}
		var dst any
		switch key {
		case "format":
			dst = &h.Format
		case "version":
			dst = &h.Version
		case "sessionId":
			dst = &h.SessionID
		case "project":
			dst = &h.Project
		case "archivedAt":
			dst = &h.ArchivedAt
		case "checksum":
			dst = &h.Checksum
		case "contentBytes":
			dst = &h.ContentBytes
		default:
			return nil, 0, invalid("unknown header member %q", key)
		}
		if err := dec.Decode(dst); err != nil {
			return nil, 0, invalid("header member %q: %v", key, err)
		}
	}
	if h.Format != Format {
		return nil, 0, invalid("format is %q, want %q", h.Format, Format)
	}
	if h.Version < 1 || h.Version > Version {
		return nil, 0, invalid("archive version %d is not supported (this sessiond reads 1 to %d); upgrade sessiond", h.Version, Version)
	}
	if !seen["contentBytes"] || !seen["checksum"] || h.ContentBytes < 2 {
		return nil, 0, invalid("the header has no checksum or content length before the content")
	}
	// The content starts after the key, the colon and any white space.
	off := dec.InputOffset()
	var b [1]byte
	for colon := false; ; off++ {
		if _, err := f.ReadAt(b[:], off); err != nil {
			return nil, 0, truncated(err)
		}
		switch c := b[0]; {
		case c == ':' && !colon:
			colon = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case colon:
			return &h, off, nil
		default:
			return nil, 0, truncated(fmt.Errorf("unexpected %q after \"content\"", c))
		}
	}
}

// decodeContent decodes an archive's content from r as [Decode] would (unknown members
// refused), handing each event to visit instead of keeping it.
func decodeContent(r io.Reader, visit func(i int, raw []byte) error) (*Content, error) {
	bad := func(err error) error {
		var inv *Error
		if errors.As(err, &inv) {
			return err
		}
		return invalid("decode archive content: %v", err)
	}
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, bad(fmt.Errorf("the content is not a JSON object"))
	}
	var c Content
	members := map[string]any{
		"sessionId": &c.SessionID, "project": &c.Project, "archivedAt": &c.ArchivedAt,
		"record": &c.Record, "snapshot": &c.Snapshot, "lineage": &c.Lineage,
		"activeBranch": &c.ActiveBranch, "lastSequence": &c.LastSequence,
		"lifecycle": &c.Lifecycle, "note": &c.Note, "summary": &c.Summary, "runs": &c.Runs,
		"chainHead": &c.ChainHead,
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, bad(err)
		}
		key, _ := t.(string)
		if key == "events" {
			if err := decodeEvents(dec, visit); err != nil {
				return nil, bad(err)
			}
			continue
		}
		dst, ok := members[key]
		if !ok {
			return nil, bad(fmt.Errorf("json: unknown field %q", key))
		}
		delete(members, key) // a member twice is refused as unknown the second time
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, bad(err)
		}
		strict := json.NewDecoder(bytes.NewReader(raw))
		strict.DisallowUnknownFields()
		if err := strict.Decode(dst); err != nil {
			return nil, bad(err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, bad(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad(fmt.Errorf("data after the content"))
	}
	return &c, nil
}

// decodeEvents reads the events array from dec, handing each to visit.
func decodeEvents(dec *json.Decoder, visit func(i int, raw []byte) error) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t == nil {
		return nil // "events": null, as Decode takes it
	}
	if t != json.Delim('[') {
		return fmt.Errorf("events is not an array")
	}
	var raw json.RawMessage
	for i := 0; dec.More(); i++ {
		raw = raw[:0]
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		if err := visit(i, raw); err != nil {
			return err
		}
	}
	_, err = dec.Token() // ']'
	return err
}
