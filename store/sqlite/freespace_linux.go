package sqlite

import "syscall"

// freeSpace returns the bytes an unprivileged process may still write to the file system of
// dir, or -1 when it cannot tell.
func freeSpace(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * st.Bsize
}
