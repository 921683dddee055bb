package archive

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/wire"
)

// readHeader reads the header of an archive file without reading its content.
func readHeader(path string) (header, error) {
	var h header
	f, err := os.Open(path)
	if err != nil {
		return h, err
	}
	defer f.Close()
	dec := json.NewDecoder(io.LimitReader(f, 64<<10))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return h, fmt.Errorf("%s is not an archive file", path)
	}
	fields := map[string]any{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return h, err
		}
		key, _ := tok.(string)
		if key == "content" {
			break
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return h, err
		}
		fields[key] = v
	}
	b, _ := json.Marshal(fields)
	if err := json.Unmarshal(b, &h); err != nil || h.Format != Format {
		return h, fmt.Errorf("%s is not an archive file", path)
	}
	return h, nil
}

// List lists the archive files in dir, newest first (then by name): those of project
// when it is not empty ("-" for sessions without a project, as the CLI and GET /v1/archives
// take it), else all. Temporary files and files that are not archives are skipped; listed
// files are not verified (restore does).
func List(dir, project string) ([]wire.ArchiveInfo, error) {
	switch project {
	case "":
		return ListProject(dir, nil)
	case "-":
		none := ""
		return ListProject(dir, &none)
	}
	return ListProject(dir, &project)
}

// ListProject lists the archive files in dir as [List] does, selecting the project exactly as
// session records hold it: nil lists every project's, "" the archives of sessions without a
// project, any other string that project's ("-" included).
func ListProject(dir string, project *string) ([]wire.ArchiveInfo, error) {
	var dirs []string
	if project == nil {
		ents, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			return []wire.ArchiveInfo{}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list archives: %w", err)
		}
		for _, e := range ents {
			if e.IsDir() {
				dirs = append(dirs, filepath.Join(dir, e.Name()))
			}
		}
	} else {
		dirs = []string{filepath.Join(dir, ProjectDir(project))}
	}
	out := []wire.ArchiveInfo{}
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list archives: %w", err)
		}
		for _, e := range ents {
			if !e.Type().IsRegular() || !ValidName(e.Name()) {
				continue
			}
			p := filepath.Join(d, e.Name())
			h, err := readHeader(p)
			if err != nil {
				continue
			}
			if project != nil && (h.Project == nil && *project != "" || h.Project != nil && *h.Project != *project) {
				continue
			}
			fi, _ := e.Info()
			var size int64
			if fi != nil {
				size = fi.Size()
			}
			out = append(out, wire.ArchiveInfo{Name: e.Name(), Path: p, SessionID: h.SessionID, Project: h.Project, ArchivedAt: h.ArchivedAt, Checksum: h.Checksum, Bytes: size})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ArchivedAt != out[j].ArchivedAt {
			return out[i].ArchivedAt > out[j].ArchivedAt
		}
		return out[i].Name > out[j].Name
	})
	return out, nil
}

// Find returns the path of the archive called name in dir, or an [*Error] wrapping [ErrNotFound]. name
// must be an archive name (RC-….json, no path separators).
func Find(dir, name string) (string, error) {
	if !ValidName(name) {
		return "", notFound("%q is not an archive name (RC-<stamp>-<session>.json); list them with sessiond session restore --list", name)
	}
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("find archive: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name(), name)
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			if err := Within(dir, p); err != nil {
				return "", err
			}
			return p, nil
		}
	}
	return "", notFound("no archive %q in %s", name, dir)
}

// Save verifies an archive file's bytes (from another host) and stores them in dir under
// the name and project directory they would have been written with. Saving the same file
// twice is a no-op; another file under the same name is refused ([ErrInvalid]).
func Save(dir string, data []byte) (*wire.ArchiveInfo, error) {
	c, sum, err := Decode(data)
	if err != nil {
		return nil, err
	}
	return SaveDecoded(dir, data, c, sum)
}

// SaveDecoded is Save for data already decoded: c and sum are what Decode(data) returned.
func SaveDecoded(dir string, data []byte, c *Content, sum string) (*wire.ArchiveInfo, error) {
	return saveVerified(dir, c, sum, int64(len(data)), func() io.Reader { return bytes.NewReader(data) })
}

// SaveFile is Save for the archive file at path, already verified: c and sum are what
// VerifyFile(path, …) returned. It copies the file into place as a stream: its memory does not
// grow with the file's size. The file at path is left as it is.
func SaveFile(dir, path string, c *Content, sum string) (*wire.ArchiveInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("save archive: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("save archive: %w", err)
	}
	return saveVerified(dir, c, sum, st.Size(), func() io.Reader { return io.NewSectionReader(f, 0, st.Size()) })
}

// saveVerified stores the verified archive of c (size bytes, read from open()) in dir under
// the name and project directory it would have been written with; the same file stored again is
// a no-op, another file under the same name is refused.
func saveVerified(dir string, c *Content, sum string, size int64, open func() io.Reader) (*wire.ArchiveInfo, error) {
	at, err := contract.ParseTime(c.ArchivedAt)
	if err != nil {
		return nil, invalid("archivedAt: %v", err)
	}
	sub := filepath.Join(dir, ProjectDir(c.Project))
	path := filepath.Join(sub, FileName(c.SessionID, at))
	if err := Within(dir, path); err != nil {
		return nil, err
	}
	info := &wire.ArchiveInfo{Name: filepath.Base(path), Path: path, SessionID: c.SessionID, Project: c.Project, ArchivedAt: c.ArchivedAt, Checksum: sum, Bytes: size}
	if old, err := os.Open(path); err == nil {
		same, err := sameBytes(old, open())
		old.Close()
		if err != nil {
			return nil, fmt.Errorf("save archive: compare with %s: %w", path, err)
		}
		if same {
			return info, nil
		}
		return nil, invalid("another archive is already stored as %s", path)
	}
	if err := WriteFileAtomicFrom(dir, sub, path, open()); err != nil {
		return nil, fmt.Errorf("save archive: %w", err)
	}
	return info, nil
}

// sameBytes reports whether a and b read the same bytes, comparing them a block at a time.
func sameBytes(a, b io.Reader) (bool, error) {
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(a, ba)
		nb, eb := io.ReadFull(b, bb)
		if !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		endA := ea == io.EOF || ea == io.ErrUnexpectedEOF
		endB := eb == io.EOF || eb == io.ErrUnexpectedEOF
		switch {
		case ea != nil && !endA:
			return false, ea
		case eb != nil && !endB:
			return false, eb
		case endA || endB:
			return endA && endB, nil
		}
	}
}
