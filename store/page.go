package store

import "context"

// The paging rules of ReadEvents and ListSessions, written once for every driver: a driver
// asks for PageLimit+1 rows (ListSessions) or ReadLimit rows (ReadEvents) and cuts the list
// with CutPage.

const (
	// MaxReadLimit is the default and the cap of ReadEvents' limit.
	MaxReadLimit = 10000
	// DefaultListLimit is ListSessions' page size when ListFilter.Limit is not positive.
	DefaultListLimit = 100
	// MaxListLimit caps ListFilter.Limit.
	MaxListLimit = 1000
)

// ReadLimit is the number of events ReadEvents returns at most for the limit a caller asked
// for: MaxReadLimit when limit is not positive or above it, limit otherwise.
func ReadLimit(limit int) int {
	if limit <= 0 || limit > MaxReadLimit {
		return MaxReadLimit
	}
	return limit
}

// PageLimit is the page size of a ListSessions call: f.Limit, DefaultListLimit when it is
// not positive, at most MaxListLimit. A driver reads PageLimit()+1 sessions so that CutPage
// can tell whether another page follows.
func (f ListFilter) PageLimit() int {
	switch {
	case f.Limit <= 0:
		return DefaultListLimit
	case f.Limit > MaxListLimit:
		return MaxListLimit
	}
	return f.Limit
}

// CutPage cuts sessions, read in id order with one more than limit asked for, to a page of at
// most limit and returns the cursor of the next page: the last id of the page when more
// sessions matched, "" otherwise.
func CutPage(sessions []*Session, limit int) ([]*Session, string) {
	if len(sessions) <= limit {
		return sessions, ""
	}
	sessions = sessions[:limit]
	return sessions, sessions[limit-1].Record.SessionID
}

// EventsDataAppender is implemented by a Store that can copy a page of a log's stored bytes
// straight into a buffer (store/sqlite, store/postgres): a reader that only forwards the events
// (the HTTP reads) then costs the driver no StoredEvent, no string per event and no second copy
// of the bytes. Callers fall back to ReadEvents when the Store does not implement it
// ([AppendEventsJSON], [AppendEventLines]).
type EventsDataAppender interface {
	// AppendEventsData appends to dst the Data of the events ReadEvents(ctx, sessionID, after,
	// limit) returns, in order, with sep between two of them (',' for the elements of a JSON
	// array, '\n' for NDJSON lines), and returns the extended buffer and how many events it
	// appended. Errors are ReadEvents' (dst is then returned as it was given).
	AppendEventsData(ctx context.Context, sessionID string, after int64, limit int, sep byte, dst []byte) ([]byte, int, error)
}

// AppendEventsJSON appends to dst the Data of the events st.ReadEvents(ctx, sessionID, after,
// limit) returns, separated by commas (the elements of a JSON array), as EventsDataAppender
// says: through st's own AppendEventsData when it has one, else with ReadEvents.
func AppendEventsJSON(ctx context.Context, st Store, sessionID string, after int64, limit int, dst []byte) ([]byte, int, error) {
	return appendEventsData(ctx, st, sessionID, after, limit, ',', dst)
}

// AppendEventLines appends to dst the Data of the events st.ReadEvents(ctx, sessionID, after,
// limit) returns, each followed by a newline (NDJSON lines), as AppendEventsJSON does.
func AppendEventLines(ctx context.Context, st Store, sessionID string, after int64, limit int, dst []byte) ([]byte, int, error) {
	out, n, err := appendEventsData(ctx, st, sessionID, after, limit, '\n', dst)
	if n > 0 {
		out = append(out, '\n')
	}
	return out, n, err
}

func appendEventsData(ctx context.Context, st Store, sessionID string, after int64, limit int, sep byte, dst []byte) ([]byte, int, error) {
	if a, ok := st.(EventsDataAppender); ok {
		return a.AppendEventsData(ctx, sessionID, after, limit, sep, dst)
	}
	evs, err := st.ReadEvents(ctx, sessionID, after, limit)
	if err != nil {
		return dst, 0, err
	}
	for i, e := range evs {
		if i > 0 {
			dst = append(dst, sep)
		}
		dst = append(dst, e.Data...)
	}
	return dst, len(evs), nil
}
