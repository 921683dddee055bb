package server

import (
	"net/http"
	"slices"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/search"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
)

// searchQuery are the query parameters of GET /v1/search.
var searchQuery = []string{"q", "contains", "project", "agent", "role", "status", "kind", "runStatus", "tool", "code", "from", "to", "order", "limit", "cursor"}

// searcher is the server's search: the driver's backend, the store its snippets are read from,
// and the indexer the server owns (started by New, stopped by Close).
type searcher struct {
	b  search.Backend
	st store.Store
	ix *search.Indexer
}

// startSearch starts the indexer when the server has a search backend.
func (s *Server) startSearch(st store.Store) {
	if s.opt.Search == nil {
		return
	}
	opt := search.IndexerOptions{Logger: s.opt.Logger}
	if m := s.opt.Metrics; m != nil {
		opt.Observe = m.searchDelay
	}
	s.search = &searcher{b: s.opt.Search, st: st, ix: search.NewIndexer(st, s.opt.Search, opt)}
	if s.opt.Metrics != nil {
		s.opt.Metrics.observeSearch(s.search.ix)
	}
	s.search.ix.Start()
}

// stopSearch stops the indexer.
func (s *Server) stopSearch() {
	if s.search != nil {
		s.search.ix.Stop()
	}
}

// SearchIndexer returns the indexer the server runs, nil without a search backend: for tests
// and benchmarks that wait for the index (CatchUp) or read its lag.
func (s *Server) SearchIndexer() *search.Indexer {
	if s.search == nil {
		return nil
	}
	return s.search.ix
}

func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request) {
	if s.search == nil {
		writeError(w, api.Errorf(contract.CodeNotConfigured, "this server has no search index; sessiond serve keeps one unless started with --search=false"))
		return
	}
	q, aerr := parseSearch(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	ctx := r.Context()
	seen := map[string]bool{}
	page, err := search.Find(ctx, s.search.b, s.search.st, q, func(id string) bool {
		// The project filter already holds the caller to its project; a credential narrower
		// than a project (one session) is held here too, as everywhere: another session is
		// answered as if it did not exist, so it is left out.
		ok, known := seen[id]
		if !known {
			sess, err := s.search.st.GetSession(ctx, id)
			ok = err == nil && session.Permits(ctx, id, sess.Record.Project.Get())
			seen[id] = ok
		}
		return ok
	})
	if err != nil {
		writeError(w, apiError(err, ""))
		return
	}
	lag, _ := s.search.ix.Lag()
	writeJSON(w, http.StatusOK, api.SearchResponse{Results: page.Hits, Order: q.Order, Next: page.Next, IndexLagSeconds: lag.Seconds()})
}

// parseSearch reads and checks the parameters of GET /v1/search; each refusal names the
// parameter and the rule.
func parseSearch(r *http.Request) (*search.Query, *api.Error) {
	v := r.URL.Query()
	q := &search.Query{Agent: v.Get("agent"), Role: v.Get("role"), Status: v.Get("status"), Kind: v.Get("kind"),
		RunStatus: v.Get("runStatus"), Tool: v.Get("tool"), Code: v.Get("code"), Order: v.Get("order")}
	var err error
	if q.Terms, err = search.ParseTerms(v.Get("q")); err != nil {
		return nil, api.Errorf(contract.CodeMalformed, "q %s", err)
	}
	if c := v.Get("contains"); c != "" {
		if q.Contains, err = search.CheckContains(c); err != nil {
			return nil, api.Errorf(contract.CodeMalformed, "contains %s", err)
		}
	}
	var aerr *api.Error
	if q.Project, aerr = projectFilter(r, v.Get("project")); aerr != nil {
		return nil, aerr
	}
	if len(q.Terms) == 0 && q.Contains == "" && q.Kind == "" && q.Tool == "" && q.Code == "" {
		return nil, api.Errorf(contract.CodeMalformed, "give q (words, \"phrases\", prefix*), contains (a substring of a path or command) or one of kind, tool, code: a search needs something to look for")
	}
	for _, c := range []struct {
		name, val string
		allowed   []string
	}{
		{"status", q.Status, contract.SessionStatuses},
		{"kind", q.Kind, contract.EventTypes},
		{"runStatus", q.RunStatus, contract.RunStatuses},
		{"order", q.Order, search.Orders},
	} {
		if c.val != "" && !slices.Contains(c.allowed, c.val) {
			return nil, api.Errorf(contract.CodeMalformed, "%s=%s is not one of %v", c.name, quote(c.val), c.allowed)
		}
	}
	for _, c := range []struct{ name, val string }{{"agent", q.Agent}, {"role", q.Role}, {"tool", q.Tool}, {"code", q.Code}} {
		if len(c.val) > 256 {
			return nil, api.Errorf(contract.CodeMalformed, "%s is %d bytes; at most 256 are allowed", c.name, len(c.val))
		}
	}
	for _, t := range []struct {
		name string
		at   *time.Time
	}{{"from", &q.From}, {"to", &q.To}} {
		if s := v.Get(t.name); s != "" {
			tm, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return nil, api.Errorf(contract.CodeMalformed, "%s=%s is not an RFC 3339 time (e.g. 2026-11-01T00:00:00Z)", t.name, quote(s))
			}
			if tm.Before(time.UnixMilli(0)) {
				return nil, api.Errorf(contract.CodeMalformed, "%s=%s is before 1970", t.name, quote(s))
			}
			*t.at = tm
		}
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return nil, api.Errorf(contract.CodeMalformed, "from (%s) must be before to (%s): from is inclusive, to exclusive", v.Get("from"), v.Get("to"))
	}
	limit, aerr := queryInt(r, "limit", search.DefaultLimit, 1, search.MaxLimit)
	if aerr != nil {
		return nil, aerr
	}
	q.Limit = int(limit)
	if q.Order == "" {
		q.Order = search.OrderRecent
	}
	if c := v.Get("cursor"); c != "" {
		if q.After, err = search.DecodeCursor(c, q); err != nil {
			return nil, api.Errorf(contract.CodeMalformed, "cursor %s", err)
		}
	}
	return q, nil
}
