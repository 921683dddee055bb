package session

import (
	"context"
	"errors"

	"github.com/sessiond/sessiond/store"
)

// Usage answers a usage query from the store's rollup (store.UsageStore). The caller keeps
// it within its reach: the server sets q.Project to the caller's project for a credential of
// one project. A session filter (q.SessionID) naming a session the caller may not see
// (Permits) answers as one that does not exist: no group, nothing counted.
func (s *Service) Usage(ctx context.Context, q store.UsageQuery) (store.UsageReport, error) {
	if q.SessionID != "" {
		if _, err := s.visibleSession(ctx, q.SessionID); err != nil {
			if errors.Is(err, store.ErrSessionNotFound) {
				return store.UsageReport{}, nil
			}
			return store.UsageReport{}, err
		}
	}
	return s.st.Usage(ctx, q)
}
