package store

import "context"

// Inspector reads a store's rows as they are stored, read-only, for the consistency checker
// (package fsck): it decodes nothing and checks nothing, so that a corrupt row reaches the
// checker instead of failing the read. Drivers implement it over a read-only connection
// (sqlite.OpenInspector, postgres.OpenInspector); every rule about what the rows must say
// lives in package fsck, once for both drivers.
type Inspector interface {
	// InspectSessionIDs returns at most limit session ids greater than after, in id order.
	InspectSessionIDs(ctx context.Context, after string, limit int) ([]string, error)
	// InspectSession reads the session's rows in one read-only snapshot (one read transaction)
	// and calls fn with them while the snapshot is open: RawSession.Events reads the log
	// from that same snapshot, so a writer running beside the check never shows the checker
	// a half-written append. It returns ErrSessionNotFound when the id has no row.
	InspectSession(ctx context.Context, id string, fn func(*RawSession) error) error
	// InspectDatabase runs the database's own cheap integrity check (SQLite's quick_check)
	// and returns the problems it reports, none when the database has no such check.
	InspectDatabase(ctx context.Context) ([]string, error)
	// Close releases the connections.
	Close() error
}

// RawSession is a session's rows as stored, for [Inspector.InspectSession].
type RawSession struct {
	ID string
	// Status is the status column, kept beside the record for the indexes.
	Status string
	// Record, Snapshot, Lineage and ActiveBranch are the stored JSON (Lineage and
	// ActiveBranch nil when NULL).
	Record, Snapshot, Lineage, ActiveBranch []byte
	// LastSequence is the session's last acknowledged sequence, recorded in the commit of
	// every append: the session head's last_seq (session_heads, on both drivers; on SQLite the
	// larger of it, the last_seq column and the log's last event). A log whose rows end before
	// it lost acknowledged events.
	LastSequence int64
	// HeadHash is the session head's chain hash (chain.go), the hash of the event at
	// LastSequence as recorded in the commit that appended it; nil when the head records none
	// (an empty log).
	HeadHash []byte
	// BaseHash is the chain's base: the hash of the last event a compaction deleted, the
	// predecessor of the first kept event; nil when none is recorded (ChainGenesis).
	BaseHash []byte
	// Lifecycle is the lifecycle JSON, nil when the session has no lifecycle row.
	Lifecycle []byte
	// Runs are the run projection's rows in creation order (ord).
	Runs []RawRun
	// CommandResults are the stored command results, by key order.
	CommandResults []RawCommandResult
	// UsageDays and UsageTools are the session's usage rollup rows (usage.go), sorted as
	// UsageRollup's Days and Tools sort them, when UsageRead (a store migrated to the rollup).
	UsageDays  []UsageDay
	UsageTools []ToolDay
	UsageRead  bool
	// Events calls fn for each stored event in sequence order, from the snapshot; it stops
	// at fn's first error and returns it. The *StoredEvent is reused between calls; its Hash
	// is the stored chain hash (nil when the row has none).
	Events func(fn func(*StoredEvent) error) error
}

// RawRun is one row of the run projection.
type RawRun struct {
	RunID string
	Ord   int64
	// Status is the status column (SQLite) or "" where the driver keeps none (PostgreSQL
	// keeps an active flag, reported in Active).
	Status string
	Active bool
	Data   []byte
}

// RawCommandResult is one stored command result.
type RawCommandResult struct {
	Key    string
	Result []byte
}
