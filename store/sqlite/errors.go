package sqlite

import (
	"fmt"

	"github.com/sessiond/sessiond/store"
)

// sqliteFull is SQLite's result code for a write that found the disk (or the file system's
// quota) full: SQLite has rolled the statement back, and the database is as it was.
const sqliteFull = 13

// classify returns err as a [store.UnavailableError] when it says the store cannot serve the
// request now (store.ClassifyOS does the part common to every driver): SQLITE_FULL is
// store.Full. Anything else is returned unchanged.
func classify(err error) error {
	if sqliteCode(err) == sqliteFull {
		return store.Unavailable(store.Full, err)
	}
	return store.ClassifyOS(err)
}

// unusable is the error of every write after a failed sync of the WAL (durable.go): the store
// refuses writes until sessiond restarts. A full disk is not a failed sync: SQLite's writes
// fail with SQLITE_FULL and roll back, and the store takes writes again once space is freed;
// only a sync that fails (whatever its errno, ENOSPC included: the kernel may have dropped the
// pages it could not write) leaves the store unusable.
func unusable(err error) error {
	return store.Unavailable(store.Unwritable, fmt.Errorf("the store is unusable after a failed sync; restart sessiond: %w", err))
}
