package session

import (
	"context"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// Detail is a session with what its resource shows beside the stored record and snapshot.
type Detail struct {
	*store.Session
	// CurrentRun is the session's current run (contract.CurrentRun: the earliest still active,
	// else the most recent), nil before the first one.
	CurrentRun *contract.Run
	// Lifecycle is the session's lifecycle state (work window, latest archive, compaction,
	// restore); zero when it was never set.
	Lifecycle store.Lifecycle
}

// Detail completes a session read from the store with its current run and lifecycle state.
// Either one that cannot be read is left out (nil, zero): the session itself was read.
func (s *Service) Detail(ctx context.Context, sess *store.Session) *Detail {
	d := &Detail{Session: sess}
	if runs, err := s.st.Runs(ctx, sess.Record.SessionID); err == nil && len(runs) > 0 {
		d.CurrentRun = contract.CurrentRun(runs)
	}
	if lc, err := s.st.Lifecycle(ctx, sess.Record.SessionID); err == nil {
		d.Lifecycle = lc
	}
	return d
}

// Get returns a session with its current run and lifecycle state, or store.ErrSessionNotFound.
func (s *Service) Get(ctx context.Context, id string) (*Detail, error) {
	sess, err := s.st.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.Detail(ctx, sess), nil
}

// List returns one page of the sessions f selects, each with its current run and lifecycle
// state, and the cursor of the next page ("" on the last page).
func (s *Service) List(ctx context.Context, f store.ListFilter) ([]*Detail, string, error) {
	list, next, err := s.st.ListSessions(ctx, f)
	if err != nil {
		return nil, "", err
	}
	out := make([]*Detail, 0, len(list))
	for _, sess := range list {
		out = append(out, s.Detail(ctx, sess))
	}
	return out, next, nil
}

// Runs returns a session's runs in the order they started (nil when it has none), or
// store.ErrSessionNotFound.
func (s *Service) Runs(ctx context.Context, id string) ([]contract.Run, error) {
	if _, err := s.st.GetSession(ctx, id); err != nil {
		return nil, err
	}
	return s.st.Runs(ctx, id)
}

// Run returns one run of a session, or store.ErrSessionNotFound or store.ErrRunNotFound.
func (s *Service) Run(ctx context.Context, id, runID string) (contract.Run, error) {
	if _, err := s.st.GetSession(ctx, id); err != nil {
		return contract.Run{}, err
	}
	return s.st.Run(ctx, id, runID)
}

// AppendEventsJSON appends to dst the stored bytes of up to limit events of a session's log
// after the sequence after, separated by commas (store.AppendEventsJSON: straight from the
// store when its driver can), and returns the extended buffer and the log's last sequence (-1
// when empty) read just after them. On an error dst is returned as it was given.
func (s *Service) AppendEventsJSON(ctx context.Context, id string, after int64, limit int, dst []byte) ([]byte, int64, error) {
	out, _, err := store.AppendEventsJSON(ctx, s.st, id, after, limit, dst)
	if err != nil {
		return dst, 0, err
	}
	last, err := s.st.LastSequence(ctx, id)
	if err != nil {
		return dst, 0, err
	}
	return out, last, nil
}

// AppendEventLines appends to dst the stored bytes of up to limit events of a session's log
// after the sequence after, each followed by a newline (NDJSON: store.AppendEventLines, straight
// from the store), and returns the extended buffer and how many events it appended. On an
// error dst is returned as it was given.
func (s *Service) AppendEventLines(ctx context.Context, id string, after int64, limit int, dst []byte) ([]byte, int, error) {
	return store.AppendEventLines(ctx, s.st, id, after, limit, dst)
}

// LastSequence returns the sequence of a session's last event (-1 when its log is empty), or
// store.ErrSessionNotFound.
func (s *Service) LastSequence(ctx context.Context, id string) (int64, error) {
	return s.st.LastSequence(ctx, id)
}

// Store returns the store the service works on: for transport that follows committed events
// (live streams, the change feed) and keeps what is not the domain's (API keys).
func (s *Service) Store() store.Store { return s.st }

// StoreDriver is the name of the storage driver the service runs on ("sqlite", "postgres").

func (s *Service) StoreDriver() string { return s.st.Capabilities().Driver }

// Events returns up to limit events of a session's log after the sequence after (a page of
// the log, without its end: see [Service.ReadEvents]).
func (s *Service) Events(ctx context.Context, id string, after int64, limit int) ([]store.StoredEvent, error) {
	return s.st.ReadEvents(ctx, id, after, limit)
}

// Ready returns nil when the store can take writes now, else why it cannot ([store.Store.Ready]).
func (s *Service) Ready(ctx context.Context) error { return s.st.Ready(ctx) }

// Project returns the project of a session's record ("" when it has none), or
// store.ErrSessionNotFound. A session's project never changes.
func (s *Service) Project(ctx context.Context, id string) (string, error) {
	sess, err := s.st.GetSession(ctx, id)
	if err != nil {
		return "", err
	}
	return sess.Record.Project.Get(), nil
}
