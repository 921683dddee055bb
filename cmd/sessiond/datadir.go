package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sessiond/sessiond/store/sqlite"
)

// dataDirHint says why the SQLite store in dir could not be opened and what to do, from what
// can be checked on the directory itself after the failure: dir is not a directory or cannot
// be created, it or one of the store's files is not writable, another process holds its lock,
// or none of these (then the store's error is the cause: the hint says what to check).
func dataDirHint(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	fi, err := os.Stat(abs)
	switch {
	case err == nil && !fi.IsDir():
		return fmt.Sprintf("--data %s is a file, not a directory; pass a directory (sessiond creates it if it is missing)", abs)
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		parent := abs
		for {
			next := filepath.Dir(parent)
			if next == parent {
				break
			}
			parent = next
			if _, err := os.Stat(parent); err == nil {
				break
			}
		}
		if pfi, err := os.Stat(parent); err == nil && !pfi.IsDir() {
			return fmt.Sprintf("cannot create --data %s: %s is a file, not a directory; choose another --data", abs, parent)
		}
		if err := probeWrite(parent); err != nil {
			return fmt.Sprintf("cannot create --data %s: %s is not writable by this user (%v); make it writable (chmod u+w %s) or choose another --data", abs, parent, err, parent)
		}
	case err != nil:
		blocked := filepath.Dir(abs) // the deepest directory above abs that can be reached
		for blocked != filepath.Dir(blocked) {
			if _, err := os.Stat(blocked); err == nil {
				break
			}
			blocked = filepath.Dir(blocked)
		}
		return fmt.Sprintf("cannot reach --data %s: %s cannot be searched by this user (%v); make it searchable (chmod u+x %s) or choose another --data", abs, blocked, bare(err), blocked)
	default:
		if err := probeWrite(abs); err != nil {
			return fmt.Sprintf("--data %s is not writable by this user (%v); make it writable (chmod u+w %s) or choose another --data", abs, err, abs)
		}
		for _, name := range []string{sqlite.LockFile, sqlite.DBFile, sqlite.DBFile + "-wal", sqlite.DBFile + "-shm"} {
			p := filepath.Join(abs, name)
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Sprintf("%s is not writable by this user (%v); make it writable (chmod u+w %s) or choose another --data", p, bare(err), p)
			}
			f.Close()
		}
		if holder, locked := lockHolder(abs); locked {
			stop := "stop it"
			if holder != "" {
				stop = fmt.Sprintf("stop it (kill %s)", holder)
			}
			who := "another process"
			if holder != "" {
				who = "process " + holder
			}
			return fmt.Sprintf("--data %s is in use by %s, another sessiond; %s or choose another --data", abs, who, stop)
		}
	}
	return fmt.Sprintf("--data %s is writable and not in use, so the cause is the error above: check the free space (df %s) and that the directory holds only sessiond's files; if %s is damaged or not a sessiond database, move the directory aside and start on a new --data", abs, abs, sqlite.DBFile)
}

// probeWrite creates and removes a file in dir: the one sure test that dir is writable (it
// also catches read-only file systems and access control lists).
func probeWrite(dir string) error {
	f, err := os.CreateTemp(dir, ".sessiond-probe-*")
	if err != nil {
		return bare(err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// bare is the cause of a file system error without the operation and path around it, which
// the hint says itself ("permission denied", "read-only file system").
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// noArchives is the --archive-dir value that turns the archive directory off.
const noArchives = "-"

// archiveDirFlagUsage is the help text of --archive-dir, the same for every command.
const archiveDirFlagUsage = "directory of session archives (default <data>/archives); - for none"

// resolveArchiveDir is the archive directory an --archive-dir value names, with the same meaning for
// every command (serve, fsck, retention): "" is <data>/archives, "-" is none ("").
func resolveArchiveDir(flag, data string) string {
	switch flag {
	case "":
		return filepath.Join(data, "archives")
	case noArchives:
		return ""
	}
	return flag
}
