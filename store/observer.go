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
