//go:build !linux

package sqlite

import (
	"io/fs"
	"os"
)

// datasync syncs f (fsync(2), or the platform's equivalent).
func datasync(f *os.File) error { return f.Sync() }

// fileID identifies the file fi describes; 0 where the platform gives no portable id, so that
// the WAL descriptor is opened once and kept.
func fileID(fs.FileInfo) uint64 { return 0 }
