//go:build unix

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sessiond/sessiond/store/sqlite"
)

// lockHolder reports whether another process holds the store's lock on dir (the flock(2) the
// SQLite store takes for its lifetime) and, when the lock file names it, that process's id.
func lockHolder(dir string) (pid string, locked bool) {
	path := filepath.Join(dir, sqlite.LockFile)
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	var lockErr error
	for {
		lockErr = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(lockErr, syscall.EINTR) {
			break
		}
	}
	if lockErr == nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return "", false
	}
	if !errors.Is(lockErr, syscall.EWOULDBLOCK) {
		return "", false
	}
	b, _ := os.ReadFile(path)
	pid = strings.TrimSpace(string(b))
	if _, err := strconv.Atoi(pid); err != nil {
		pid = ""
	}
	return pid, true
}
