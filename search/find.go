package search

import (
	"context"
	"errors"
	"fmt"

	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/wire"
)

// Page is one page of search results.
type Page struct {
	Hits []wire.SearchHit
	// Next is the cursor of the next page, "" when this is the last.
	Next string
}

// Find runs q on b and makes the page: each result's snippet comes from the event itself,
// read from st and extracted again (the index keeps tokens, not text). A result whose event
// is gone from the log since it was indexed (compacted meanwhile) is left out. allow, when
// not nil, is asked for each result's session and leaves out those it refuses: the caller's
// tenancy check, beside the project filter the query already carries.
func Find(ctx context.Context, b Backend, st store.Store, q *Query, allow func(sessionID string) bool) (*Page, error) {
	if q.Limit <= 0 || q.Limit > MaxLimit {
		q.Limit = DefaultLimit
	}
	if q.Order == "" {
		q.Order = OrderRecent
	}
	res, err := b.Search(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	page := &Page{Hits: make([]wire.SearchHit, 0, min(len(res), q.Limit))}
	more := len(res) > q.Limit
	if more {
		res = res[:q.Limit]
	}
	for _, r := range res {
		if allow != nil && !allow(r.SessionID) {
			continue
		}
		evs, err := st.ReadEvents(ctx, r.SessionID, r.Sequence-1, 1)
		if errors.Is(err, store.ErrSessionNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("search: read the event of session %q at %d: %w", r.SessionID, r.Sequence, err)
		}
		if len(evs) == 0 || evs[0].Sequence != r.Sequence {
			continue
		}
		d, err := Extract(evs[0])
		if err != nil {
			return nil, fmt.Errorf("search: %w", err)
		}
		hit := wire.SearchHit{SessionID: r.SessionID, RunID: r.RunID, Sequence: r.Sequence, Kind: r.Kind,
			OccurredAt: FormatKeyTime(r.Key)}
		hit.Field, hit.Snippet = Snippet(&d, q)
		if q.Order == OrderRelevance {
			hit.Score = r.Score
		}
		page.Hits = append(page.Hits, hit)
	}
	if more {
		c := Cursor{Query: q.Hash()}
		switch q.Order {
		case OrderRelevance:
			c.Offset = q.Limit
			if q.After != nil {
				c.Anchor, c.Offset = q.After.Anchor, q.After.Offset+q.Limit
			}
			if c.Anchor == 0 {
				c.Anchor = res[0].Anchor
			}
		default:
			c.Key = res[len(res)-1].Key
		}
		page.Next = c.Encode()
	}
	return page, nil
}
