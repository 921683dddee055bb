package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/archive"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
)

// TestArchiveUploadVerified: an uploaded archive is kept only when it passes everything
// restore checks. A file whose checksum matches but whose session id is "../../etc", or whose
// event breaks the contract, is refused with ARCHIVE_INVALID and nothing is stored (no archive,
// no temporary file); a file over MaxArchiveBytes is refused with TOO_LARGE; the list of
// archives names them and shows no server path. Before, any file whose checksum matched was
// stored, the upload was read into memory up to 1 GiB, and the list showed absolute paths.
func TestArchiveUploadVerified(t *testing.T) {
	ctx := context.Background()
	src := setup(t, server.Options{}, session.Options{ArchiveDir: t.TempDir()})
	src.createSession(t, "S-up")
	src.do(t, "POST", "/v1/sessions/S-up/events", "", event("S-up", 1))
	ar, err := src.cl.Archive(ctx, "S-up", api.ArchiveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(ar.Archive.Path)
	if err != nil {
		t.Fatal(err)
	}
	// reencode changes the content and writes a file with a matching checksum.
	reencode := func(change func(*archive.Content)) []byte {
		t.Helper()
		c, _, err := archive.Decode(good)
		if err != nil {
			t.Fatal(err)
		}
		change(c)
		data, err := archive.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := archive.Decode(data); err != nil {
			t.Fatalf("the altered file does not pass the checksum: %v", err)
		}
		return data
	}
	traversal := reencode(func(c *archive.Content) {
		const id = "../../etc"
		c.SessionID, c.Record.SessionID = id, id
		for i, ev := range c.Events {
			c.Events[i] = json.RawMessage(strings.ReplaceAll(string(ev), `"S-up"`, `"../../etc"`))
		}
	})
	badEvent := reencode(func(c *archive.Content) {
		c.Events[0] = json.RawMessage(strings.Replace(string(c.Events[0]), `"role":"assistant"`, `"role":"wizard"`, 1))
	})

	dir := t.TempDir()
	dst := setup(t, server.Options{MaxArchiveBytes: int64(len(good)) + 100}, session.Options{ArchiveDir: dir})
	for name, data := range map[string][]byte{"path-traversal session id": traversal, "event that breaks the contract": badEvent} {
		_, err := dst.cl.UploadArchive(ctx, data)
		if apiCode(err) != api.CodeArchiveInvalid {
			t.Errorf("%s: upload answered %v, want ARCHIVE_INVALID", name, err)
		}
	}
	if _, err := dst.cl.UploadArchive(ctx, append(good, make([]byte, 200)...)); apiCode(err) != api.CodeTooLarge {
		t.Errorf("upload over MaxArchiveBytes: %v, want TOO_LARGE", err)
	}
	var files []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 0 {
		t.Fatalf("refused uploads left files: %v", files)
	}
	info, err := dst.cl.UploadArchive(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	if info.Path != "" || info.Name != ar.Archive.Name {
		t.Errorf("upload answered %+v; want the name and no server path", info)
	}
	list, err := dst.cl.Archives(ctx, "")
	if err != nil || len(list.Archives) != 1 || list.Archives[0].Name != ar.Archive.Name {
		t.Fatalf("Archives = %+v, %v", list, err)
	}
	raw := dst.do(t, "GET", "/v1/archives", "", "").body
	if strings.Contains(raw, dir) || strings.Contains(raw, `"path"`) || strings.Contains(raw, `"dir"`) {
		t.Errorf("the list shows the server's file system: %s", raw)
	}
}
