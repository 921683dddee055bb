package archive

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// WriteFileAtomic writes data to path through a temporary file in the same directory: write,
// fsync, rename, fsync the directory (and root, when dir was created under it).
func WriteFileAtomic(root, dir, path string, data []byte) error {
	return WriteFileAtomicFrom(root, dir, path, bytes.NewReader(data))
}

// WriteFileAtomicFrom is WriteFileAtomic with the file's bytes read from r, which it copies
// without holding them in memory.
func WriteFileAtomicFrom(root, dir, path string, r io.Reader) error {
	created := false
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		created = true
	}
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s already exists; archive again in a moment", path)
	}
	f, err := os.CreateTemp(dir, ".tmp-RC-*")
	if err != nil {
		return fmt.Errorf("create a temporary file in %s: %w", dir, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := io.Copy(f, r); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename into %s: %w", path, err)
	}
	ok = true
	if err := syncDir(dir); err != nil {
		return err
	}
	if created {
		return syncDir(root)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s to sync it: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
