//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// dirLock is an exclusive flock(2) on dir/LOCK, held for the life of a Store. The kernel drops
// it when the process dies, so a crash never leaves a stale lock behind.
type dirLock struct {
	f      *os.File
	shared bool // shareLock's: the file is not the holder's to truncate
}

func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open store: lock %s: %w", path, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid := strings.TrimSpace(string(b)); pid != "" {
				if _, perr := strconv.Atoi(pid); perr == nil {
					holder = "process " + pid
					if pid == strconv.Itoa(os.Getpid()) {
						holder = "this process (pid " + pid + ", another open Store)"
					}
				}
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("open store: data directory %s is in use by %s; stop it or choose another data directory", dir, holder)
		}
		return nil, fmt.Errorf("open store: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

func (l *dirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	// Leave the file in place: removing it would race with a process that has just opened it.
	if !l.shared {
		_ = l.f.Truncate(0)
	}
	err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	if err != nil {
		return fmt.Errorf("release lock: %w", err)
	}
	return nil
}

// shareLock takes a shared flock(2) on dir/LOCK without creating or writing the file, for a
// reader that must not change the directory (OpenInspector). held is false, with no error,
// when a Store holds the directory (its exclusive lock), or when there is no LOCK file.
func shareLock(dir string) (l *dirLock, held bool, err error) {
	f, err := os.Open(filepath.Join(dir, LockFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("lock %s: %w", filepath.Join(dir, LockFile), err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return nil, false, nil
	}
	if err != nil {
		f.Close()
		return nil, false, fmt.Errorf("lock %s: %w", filepath.Join(dir, LockFile), err)
	}
	return &dirLock{f: f, shared: true}, true, nil
}
