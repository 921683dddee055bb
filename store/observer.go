package store

import "time"

// Observer receives a driver's internal measurements, for metrics: what only the driver sees
// (its group commits and syncs). A nil field is not called. The functions are called on the
// driver's writer and syncer goroutines: they must be quick and must not call the store.
type Observer struct {
	// GroupCommitted is told of each group commit: how many appends and events it carried.
	GroupCommitted func(appends, events int)
	// Synced is told of each sync of the log: how long it took, and how many group commits it
	// made durable.
	Synced func(took time.Duration, groups int)
}

// FileSizer is implemented by a driver that keeps its data in local files (SQLite), for the
// store size metrics.
type FileSizer interface {
	// FileSizes returns the size in bytes of the database file and of its write-ahead log
	// (0 for a file that does not exist).
	FileSizes() (data, wal int64)
}

// PoolReporter is implemented by a driver with a connection pool and a commit listener
// (PostgreSQL), for the pool and listener metrics.
type PoolReporter interface {
	// PoolState returns the pool's and the listener's state now.
	PoolState() PoolState
}

// PoolState is the state of a driver's connection pool and commit listener.
type PoolState struct {
	// AcquiredConns, IdleConns and TotalConns count the pool's connections in use, idle, and
	// in all; MaxConns is its size.
	AcquiredConns, IdleConns, TotalConns, MaxConns int32
	// EmptyAcquires counts the acquires that had to wait for a connection (the pool was
	// exhausted), since the store opened.
	EmptyAcquires int64
	// ListenerUp is true while the commit listener holds a connection that listens.
	ListenerUp bool
	// ListenerReconnects counts the listener's connections replaced after a failure.
	ListenerReconnects int64
}
