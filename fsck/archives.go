package fsck

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sessiond/sessiond/archive"
)

// archiveFile is what the scan learnt of one archive file.
type archiveFile struct {
	path      string
	sessionID string
	checksum  string
	lastSeq   int64
	chainHead string // the content's chainHead ("" in a version 1 archive)
	// problem is why the file failed verification; "" when it verified.
	problem string
}

// archives are the archive files of the directory, by name.
type archives struct {
	byName map[string]*archiveFile
}

// scanArchives verifies every archive file of dir (each project directory's RC-*.json
// files): it must decode, and its content's SHA-256 must be its header's checksum. A missing
// dir holds no archives. counted is called after each file.
func scanArchives(ctx context.Context, dir string, counted func()) (*archives, []Finding, error) {
	a := &archives{byName: map[string]*archiveFile{}}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return a, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("fsck: read the archive directory: %w", err)
	}
	var findings []Finding
	for _, pe := range ents {
		if !pe.IsDir() {
			continue
		}
		pdir := filepath.Join(dir, pe.Name())
		files, err := os.ReadDir(pdir)
		if err != nil {
			return nil, nil, fmt.Errorf("fsck: read the archive directory: %w", err)
		}
		for _, fe := range files {
			if err := ctx.Err(); err != nil {
				return nil, nil, fmt.Errorf("fsck: %w", err)
			}
			if !fe.Type().IsRegular() || !archive.ValidName(fe.Name()) {
				continue // temporary files of a write in progress, and foreign files
			}
			path := filepath.Join(pdir, fe.Name())
			f := &archiveFile{path: path, lastSeq: -1}
			a.byName[fe.Name()] = f
			data, err := os.ReadFile(path)
			if err != nil {
				f.problem = err.Error()
			} else if c, sum, err := archive.Decode(data); err != nil {
				f.problem = err.Error()
			} else {
				f.sessionID, f.checksum, f.lastSeq, f.chainHead = c.SessionID, sum, c.LastSequence, c.ChainHead
			}
			if f.problem != "" {
				findings = append(findings, Finding{Check: CheckArchive, Archive: fe.Name(), Message: f.problem})
			}
			counted()
		}
	}
	return a, findings, nil
}

// content reads and decodes an archive file again, for the events of a compacted log.
func (f *archiveFile) content() (*archive.Content, error) {
	data, err := os.ReadFile(f.path)
	if err != nil {
		return nil, err
	}
	c, _, err := archive.Decode(data)
	return c, err
}
