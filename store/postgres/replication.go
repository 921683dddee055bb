package postgres

import (
	"log/slog"
	"strings"
)

// ackMeaning is what an acknowledged append means under the server's replication settings, and
// how loudly to say it at start (a warning, or debug when all is as it should be).
type ackMeaning struct {
	level slog.Level
	text  string
}

// acknowledgement says what an acknowledged append promises under synchronous_commit (the value
// the store's connections use) and the primary's synchronous_standby_names, for a URL naming
// hosts servers. It warns when an acknowledged event may not survive the loss of the primary:
// no synchronous standby while the URL names several servers (a failover is planned), or a
// synchronous_commit that does not wait for the standby (local, off).
func acknowledgement(syncCommit, standbyNames string, hosts int) ackMeaning {
	sc := strings.ToLower(strings.TrimSpace(syncCommit))
	sync := strings.TrimSpace(standbyNames) != ""
	switch {
	case sc == "off":
		return ackMeaning{slog.LevelWarn, "synchronous_commit=off: an append is acknowledged before its commit is flushed to disk; a crash of the database server may lose acknowledged events, and a failover certainly may. Remove synchronous_commit=off from the URL"}
	case !sync && hosts > 1:
		return ackMeaning{slog.LevelWarn, "the URL names several servers but the primary has no synchronous standby (synchronous_standby_names is empty): an acknowledged event is on the primary's disk only, and a standby promoted after the primary's loss may lack the last acknowledged events. Set synchronous_standby_names on the primary (docs/deploy.md, \"High availability\")"}
	case !sync:
		return ackMeaning{slog.LevelDebug, "an acknowledged event is flushed to the database server's disk (no synchronous standby: it survives a crash of the server, not the loss of its disk)"}
	case sc == "local":
		return ackMeaning{slog.LevelWarn, "synchronous_commit=local: an append is acknowledged before it reaches the synchronous standby; a standby promoted after the primary's loss may lack the last acknowledged events. Use on or remote_apply"}
	case sc == "remote_write":
		return ackMeaning{slog.LevelDebug, "synchronous_commit=remote_write: an acknowledged event is flushed on the primary and written (not yet flushed) on a synchronous standby: it survives the primary's loss, not a crash of both hosts at once"}
	case sc == "remote_apply":
		return ackMeaning{slog.LevelDebug, "an acknowledged event is flushed on the primary and on a synchronous standby, and visible there: it survives the primary's loss when a synchronous standby is promoted"}
	}
	return ackMeaning{slog.LevelDebug, "an acknowledged event is flushed on the primary and on a synchronous standby: it survives the primary's loss when a synchronous standby is promoted"}
}
