package sqlite

import (
	"io/fs"
	"os"
	"syscall"
)

// datasync syncs f's data and the metadata needed to read it back (fdatasync(2)).
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

// fileID identifies the file fi describes (its inode).
func fileID(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
