package storetest

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// usageSession is a session of testUsage with what the expected answers need.
type usageSession struct {
	id, project, agent, model string
	rollup                    store.UsageRollup
}

// testUsage: the rollup answers every query as the pure rollup of the logs appended
// (store.UsageRollup, summed in Go here) over sessions of several projects, agents and models,
// in batches of every size; a rebuild changes nothing; compaction keeps the counts; an import
// of a session counts its log.
func (s *suite) testUsage(t *testing.T) {
	ctx, st, _ := s.setup(t)
	rng := rand.New(rand.NewPCG(36, 1))
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var sessions []*usageSession
	for i := range 12 {
		us := &usageSession{id: fmt.Sprintf("S-usage-%02d", i), project: []string{"alpha", "beta", "gamma"}[i%3], agent: fmt.Sprintf("agent-%d", i%4), model: []string{"model-a", "model-b"}[i%2]}
		sess := NewSession(us.id, SessionSpec{Project: us.project, AgentID: us.agent})
		sess.Snapshot.ModelID = us.model
		if err := st.CreateSession(ctx, sess); err != nil {
			t.Fatalf("CreateSession: %v", err)
		}
		evs := UsageLog(rng, us.id, 40+rng.IntN(80), start, 10*24*time.Hour)
		all := evs
		for len(evs) > 0 {
			n := min(len(evs), 1+rng.IntN(20))
			if _, err := st.Append(ctx, us.id, evs[:n], store.AppendOptions{}); err != nil {
				t.Fatalf("Append: %v", err)
			}
			for _, e := range evs[:n] {
				if err := us.rollup.Add(storedOf(e)); err != nil {
					t.Fatal(err)
				}
			}
			evs = evs[n:]
		}
		// A batch sent again is a duplicate: it counts nothing twice.
		if _, err := st.Append(ctx, us.id, all[:10], store.AppendOptions{}); err != nil {
			t.Fatalf("Append again: %v", err)
		}
		sessions = append(sessions, us)
	}
	first := store.DaysFromCivil(2026, 11, 1)
	queries := []store.UsageQuery{
		{From: first - 1, To: first + 12},
		{From: first + 2, To: first + 5, By: []string{"project"}},
		{From: first, To: first + 12, By: []string{"day", "model"}},
		{From: first, To: first + 12, By: []string{"agent", "session"}, Project: "beta"},
		{From: first + 3, To: first + 3, By: []string{"project", "agent", "model", "session", "day"}},
		{From: first, To: first + 12, By: []string{"session"}, Model: "model-b", AgentID: "agent-1"},
		{From: first, To: first + 12, By: []string{"day"}, SessionID: "S-usage-05"},
		{From: first, To: first + 12, By: []string{"session", "day"}, Limit: 7},
		{From: first + 40, To: first + 50},
	}
	check := func(when string) {
		t.Helper()
		for _, q := range queries {
			got, err := st.Usage(ctx, q)
			if err != nil {
				t.Fatalf("%s: Usage(%+v): %v", when, q, err)
			}
			want := expectUsage(sessions, q)
			if !reflect.DeepEqual(normReport(got), normReport(want)) {
				t.Errorf("%s: Usage(%+v)\n got %+v\nwant %+v", when, q, got, want)
			}
		}
	}
	check("after the appends")
	// A session's model (and agent) are its snapshot's and record's as they are now.
	if _, err := st.UpdateSession(ctx, sessions[0].id, func(sess *store.Session) error {
		sess.Snapshot.ModelID = "model-z"
		return nil
	}); err != nil {
		t.Fatalf("UpdateSession: %v", err)
	}
	sessions[0].model = "model-z"
	check("after a session's model changed")
	if _, err := st.Usage(ctx, store.UsageQuery{From: first, To: first - 1}); err == nil {
		t.Error("Usage with to before from: no error")
	}
	if _, err := st.Usage(ctx, store.UsageQuery{From: first, To: first, By: []string{"tool"}}); err == nil {
		t.Error("Usage by an unknown dimension: no error")
	}
	n, err := st.RebuildUsage(ctx, nil)
	if err != nil {
		t.Fatalf("RebuildUsage: %v", err)
	}
	if n < len(sessions) {
		t.Errorf("RebuildUsage rebuilt %d sessions, want at least %d", n, len(sessions))
	}
	check("after a rebuild")
	// Compaction deletes the events, not what they counted; a rebuild leaves the compacted
	// session's rows alone.
	us := sessions[4]
	last, err := st.LastSequence(ctx, us.id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CompactEvents(ctx, us.id, last/2); err != nil {
		t.Fatalf("CompactEvents: %v", err)
	}
	check("after a compaction")
	if _, err := st.RebuildUsage(ctx, nil); err != nil {
		t.Fatalf("RebuildUsage: %v", err)
	}
	check("after a compaction and a rebuild")
	// An imported session counts its log.
	imp := &usageSession{id: "S-usage-imported", project: "alpha", agent: "agent-9", model: "model-c"}
	sess := NewSession(imp.id, SessionSpec{Project: imp.project, AgentID: imp.agent})
	sess.Snapshot.ModelID = imp.model
	evs := UsageLog(rng, imp.id, 50, start, 5*24*time.Hour)
	var stored []store.StoredEvent
	for i, e := range evs {
		se := storedOf(e)
		se.Sequence = int64(i)
		se.Data = e.JSON(int64(i))
		stored = append(stored, *se)
		if err := imp.rollup.Add(se); err != nil {
			t.Fatal(err)
		}
	}
	sess.LastSequence = int64(len(evs) - 1)
	var runs []contract.Run
	runsOf := map[string]int{}
	for _, e := range evs {
		if e.RunStatus == nil {
			continue
		}
		var prev *contract.Run
		i, ok := runsOf[e.RunStatus.RunID]
		if ok {
			prev = &runs[i]
		}
		r, err := contract.ApplyRunStatus(prev, imp.id, *e.RunStatus)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			runs[i] = *r
		} else {
			runsOf[r.RunID] = len(runs)
			runs = append(runs, *r)
		}
	}
	if err := st.ImportSession(ctx, &store.Import{Session: sess, Events: stored, Runs: runs}); err != nil {
		t.Fatalf("ImportSession: %v", err)
	}
	sessions = append(sessions, imp)
	check("after an import")
}

// storedOf is the stored form of an encoded event as the rollup reads it.
func storedOf(e *contract.EncodedEvent) *store.StoredEvent {
	return &store.StoredEvent{EventID: e.EventID, IdempotencyKey: e.IdempotencyKey, EventType: e.EventType, RunID: e.RunID, Data: e.JSON(0)}
}

// expectUsage answers q from the sessions' own rollups, in Go.
func expectUsage(sessions []*usageSession, q store.UsageQuery) store.UsageReport {
	q, _ = store.NormalizeUsageQuery(q)
	var rep store.UsageReport
	groups := map[store.UsageGroup]*store.UsageGroup{}
	tools := map[string]*store.ToolTotals{}
	for _, us := range sessions {
		if (q.Project != "" && us.project != q.Project) || (q.AgentID != "" && us.agent != q.AgentID) || (q.Model != "" && us.model != q.Model) || (q.SessionID != "" && us.id != q.SessionID) {
			continue
		}
		for _, d := range us.rollup.Days() {
			if d.Day < q.From || d.Day > q.To {
				continue
			}
			var k store.UsageGroup
			if q.Has(store.UsageByProject) {
				k.Project = us.project
			}
			if q.Has(store.UsageByAgent) {
				k.AgentID = us.agent
			}
			if q.Has(store.UsageByModel) {
				k.Model = us.model
			}
			if q.Has(store.UsageBySession) {
				k.SessionID = us.id
			}
			if q.Has(store.UsageByDay) {
				k.Day = d.Day
			}
			if groups[k] == nil {
				g := k
				groups[k] = &g
			}
			groups[k].UsageTotals.Add(d.UsageTotals)
			rep.Total.Add(d.UsageTotals)
		}
		for _, d := range us.rollup.Tools() {
			if d.Day < q.From || d.Day > q.To {
				continue
			}
			if tools[d.Tool] == nil {
				tools[d.Tool] = &store.ToolTotals{}
			}
			tools[d.Tool].Add(d.ToolTotals)
		}
	}
	for _, g := range groups {
		rep.Groups = append(rep.Groups, *g)
	}
	slices.SortFunc(rep.Groups, func(a, b store.UsageGroup) int {
		if c := strings.Compare(a.Project, b.Project); c != 0 {
			return c
		}
		if c := strings.Compare(a.AgentID, b.AgentID); c != 0 {
			return c
		}
		if c := strings.Compare(a.Model, b.Model); c != 0 {
			return c
		}
		if c := strings.Compare(a.SessionID, b.SessionID); c != 0 {
			return c
		}
		return int(a.Day - b.Day)
	})
	if len(rep.Groups) > q.Limit {
		rep.Groups, rep.Truncated = rep.Groups[:q.Limit], true
	}
	for name, t := range tools {
		rep.Tools = append(rep.Tools, store.ToolUsage{Tool: name, ToolTotals: *t})
	}
	slices.SortFunc(rep.Tools, func(a, b store.ToolUsage) int { return strings.Compare(a.Tool, b.Tool) })
	return rep
}

// normReport makes empty and nil slices alike.
func normReport(r store.UsageReport) store.UsageReport {
	if len(r.Groups) == 0 {
		r.Groups = nil
	}
	if len(r.Tools) == 0 {
		r.Tools = nil
	}
	return r
}
