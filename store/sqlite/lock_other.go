//go:build !unix

package sqlite

import (
	"errors"
	"fmt"
)

// dirLock is not implemented on this platform; lockDir refuses to open the store rather than
// run without the guarantee that one process owns the directory.
type dirLock struct{}

func lockDir(dir string) (*dirLock, error) {
	return nil, fmt.Errorf("open store %s: %w", dir, errors.New("the sqlite driver needs flock(2), which this platform lacks"))
}

func (l *dirLock) release() error { return nil }

// shareLock is not implemented on this platform: the reader runs without the lock.
func shareLock(string) (*dirLock, bool, error) { return nil, false, nil }
