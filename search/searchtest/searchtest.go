// Package searchtest is the conformance suite of search.Backend: every driver's search index
// runs Exercise from its own tests. It writes sessions of two projects with an event of every
// searchable kind, indexes them with the real Indexer and checks that every field is findable,
// that every filter narrows to exactly the events a model of the store says, that pagination
// gives each result once, that another project's events never come back, and what compaction
// and a restore do to the index.
package searchtest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/search"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// Open returns a new empty store and its search backend; it closes both when the test ends.
type Open func(t *testing.T) (store.Store, search.Backend)

// base is the occurredAt of the first fixture event; each later one is a minute later.
var base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fixture is one event of the fixtures, with what the model knows of it.
type fixture struct {
	kind    string
	field   int    // the field its unique word is in
	word    string // a word only this event (of its session) holds
	runID   string
	tool    string
	code    string
	payload contract.Payload
}

// fixtures returns the events of one session: one per searchable field and kind, each holding
// the word "everyword" and a word of its own (prefix+name).
func fixtures(prefix string) []fixture {
	w := func(name string) string { return prefix + name }
	str := func(s string) *string { return &s }
	raw := func(v any) contract.RawJSON { b, _ := json.Marshal(v); return b }
	return []fixture{
		{kind: "message", field: search.FieldText, word: w("msgword"), payload: &contract.MessagePayload{MessageID: "m-1", Role: "user", Operation: "append",
			Parts: []contract.RawJSON{raw(map[string]string{"type": "text", "text": "please fix everyword " + w("msgword")})}}},
		{kind: "reasoning", field: search.FieldText, word: w("thinkword"), payload: &contract.ReasoningPayload{ReasoningID: "r-1", Text: "everyword " + w("thinkword"), Status: "completed"}},
		{kind: "plan", field: search.FieldTitle, word: w("planword"), payload: &contract.PlanPayload{PlanID: "p-1", Title: str("everyword " + w("planword")), Status: "running",
			Steps: []contract.PlanStep{{ID: "s1", Title: "step " + w("stepword"), Status: "pending"}}}},
		{kind: "task", field: search.FieldTitle, word: w("taskword"), payload: &contract.TaskPayload{TaskID: "t-1", Title: "everyword " + w("taskword"), Status: "pending"}},
		{kind: "tool", field: search.FieldTool, word: w("toolname"), tool: w("toolname"), runID: "run-1", payload: &contract.ToolPayload{ToolCallID: "tc-1", ToolName: w("toolname"), Status: "completed",
			Input: raw(map[string]string{"command": "rm -rf /tmp/" + w("cmdword")}), Output: raw(map[string]string{"stdout": "everyword " + w("outword")})}},
		{kind: "tool", field: search.FieldError, word: w("toolerr"), tool: "shell", runID: "run-1", payload: &contract.ToolPayload{ToolCallID: "tc-2", ToolName: "shell", Status: "failed",
			Input: raw(map[string]string{"command": "make everyword"}), Error: str("exit 2 " + w("toolerr"))}},
		{kind: "approval", field: search.FieldTitle, word: w("approveword"), payload: &contract.ApprovalPayload{ApprovalID: "a-1", Status: "requested", Title: "everyword " + w("approveword")}},
		{kind: "error", field: search.FieldError, word: w("errword"), code: "TOOL_TIMEOUT", runID: "run-1", payload: &contract.ErrorPayload{Code: "TOOL_TIMEOUT", Message: "everyword " + w("errword"), Retryable: true}},
		{kind: "diff", field: search.FieldPath, word: w("dir"), payload: &contract.DiffPayload{Path: w("dir") + "/billing/invoice.go", Status: "modified", Patch: str("+everyword " + w("patchword"))}},
		{kind: "workspace-file", field: search.FieldPath, word: w("wsfile"), payload: &contract.WorkspaceFilePayload{Path: "docs/" + w("wsfile") + ".md", Operation: "upsert"}},
		{kind: "terminal", field: search.FieldTerminal, word: w("termword"), runID: "run-1", payload: &contract.TerminalPayload{TerminalID: "term-1", Stream: "stdout", Chunk: "everyword " + w("termword")}},
		{kind: "test-result", field: search.FieldTest, word: w("testname"), payload: &contract.TestResultPayload{TestID: "t1", Name: "TestEveryword" + " " + w("testname"), Status: "failed", Output: str("everyword assertion " + w("testout"))}},
		{kind: "summary", field: search.FieldText, word: w("sumword"), runID: "run-1", payload: &contract.SummaryPayload{SummaryID: "su-1", RunID: "run-1", Text: "everyword " + w("sumword"), Highlights: []string{}, PendingItems: []string{}, Status: "completed"}},
		{kind: "usage", field: -1, payload: &contract.UsagePayload{}},
	}
}

// sessionSpec is a fixture session: its record and how its run ends.
type sessionSpec struct {
	id, project, agent, role, status, runEnd string
	prefix                                   string
}

var sessions = []sessionSpec{
	{id: "S-a1", project: "pa", agent: "ag1", role: "implementer", status: "running", runEnd: "completed", prefix: "xa"},
	{id: "S-a2", project: "pa", agent: "ag2", role: "reviewer", status: "paused", runEnd: "failed", prefix: "ya"},
	{id: "S-b1", project: "pb", agent: "ag1", role: "implementer", status: "running", runEnd: "", prefix: "zb"},
}

// modelEvent is what the model knows of one stored event.
type modelEvent struct {
	sess      sessionSpec
	seq       int64
	at        time.Time
	f         fixture
	runStatus string // the status now of the run it names ("" when none)
	everyword bool
}

func (m modelEvent) id() string { return fmt.Sprintf("%s@%d", m.sess.id, m.seq) }

func encode(t *testing.T, sessionID string, seq int, at time.Time, runID string, p contract.Payload) *contract.EncodedEvent {
	t.Helper()
	key := fmt.Sprintf("%s-k%d", sessionID, seq)
	e := &contract.Event{Contract: "AgentSessionEvent", EventID: "ev-" + key, SessionID: sessionID, RunID: runID,
		IdempotencyKey: key, OccurredAt: at.Format(time.RFC3339), EventType: p.EventType(), Payload: p}
	data, err := contract.Marshal(e)
	if err != nil {
		t.Fatalf("marshal %s: %v", p.EventType(), err)
	}
	ev, err := contract.CheckEvent(data, contract.Limits{})
	if err != nil {
		t.Fatalf("the contract rejects the fixture %s: %v", data, err)
	}
	return ev
}

// write creates the fixture sessions and returns the model of their events.
func write(t *testing.T, ctx context.Context, st store.Store) []modelEvent {
	var model []modelEvent
	minute := 0
	for _, sp := range sessions {
		s := storetest.NewSession(sp.id, storetest.SessionSpec{Status: sp.status, AgentID: sp.agent, Project: sp.project, Role: sp.role})
		if err := st.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		var evs []*contract.EncodedEvent
		var seq int
		add := func(ev *contract.EncodedEvent) { evs = append(evs, ev); seq++ }
		// The run starts first, so that events may name it.
		add(storetest.RunStatusEvent(t, sp.id, sp.id+"-run-start", "run-1", "m-0", "running"))
		model = append(model, modelEvent{sess: sp, seq: 0, at: mustTime(storetest.Timestamp), f: fixture{kind: "status", field: -1, runID: "run-1"}})
		for _, f := range fixtures(sp.prefix) {
			at := base.Add(time.Duration(minute) * time.Minute)
			minute++
			add(encode(t, sp.id, seq, at, f.runID, f.payload))
			model = append(model, modelEvent{sess: sp, seq: int64(seq - 1), at: at, f: f, everyword: f.field >= 0 && f.kind != "workspace-file"})
		}
		if sp.runEnd != "" {
			add(storetest.RunStatusEvent(t, sp.id, sp.id+"-run-end", "run-1", "m-0", sp.runEnd))
			model = append(model, modelEvent{sess: sp, seq: int64(seq - 1), at: mustTime(storetest.Timestamp), f: fixture{kind: "status", field: -1, runID: "run-1"}})
		}
		if _, err := st.Append(ctx, sp.id, evs, store.AppendOptions{}); err != nil {
			t.Fatalf("append %s: %v", sp.id, err)
		}
	}
	for i := range model {
		if model[i].f.runID != "" {
			model[i].runStatus = "running"
			if model[i].sess.runEnd != "" {
				model[i].runStatus = model[i].sess.runEnd
			}
		}
	}
	return model
}

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// find runs q through every page and returns the hits' ids ("S@seq") in order.
func find(t *testing.T, ctx context.Context, b search.Backend, st store.Store, q search.Query) ([]string, []search.Page) {
	t.Helper()
	var ids []string
	var pages []search.Page
	for range 100 {
		qq := q
		p, err := search.Find(ctx, b, st, &qq, nil)
		if err != nil {
			t.Fatalf("find %+v: %v", q, err)
		}
		pages = append(pages, *p)
		for _, h := range p.Hits {
			ids = append(ids, fmt.Sprintf("%s@%d", h.SessionID, h.Sequence))
		}
		if p.Next == "" {
			return ids, pages
		}
		c, err := search.DecodeCursor(p.Next, &q)
		if err != nil {
			t.Fatalf("the cursor %q of %+v does not decode: %v", p.Next, q, err)
		}
		q.After = c
	}
	t.Fatalf("find %+v: more than 100 pages", q)
	return nil, nil
}

func terms(t *testing.T, q string) []search.Term {
	t.Helper()
	ts, err := search.ParseTerms(q)
	if err != nil {
		t.Fatalf("ParseTerms(%q): %v", q, err)
	}
	return ts
}

// Exercise runs the suite against the backend open gives.
func Exercise(t *testing.T, open Open) {
	ctx := context.Background()
	st, b := open(t)
	model := write(t, ctx, st)
	ix := search.NewIndexer(st, b, search.IndexerOptions{})
	if _, err := ix.CatchUp(ctx, nil); err != nil {
		t.Fatal(err)
	}

	t.Run("EveryFieldFindable", func(t *testing.T) {
		for _, m := range model {
			if m.f.field < 0 {
				continue
			}
			ids, pages := find(t, ctx, b, st, search.Query{Terms: terms(t, m.f.word)})
			if !slices.Equal(ids, []string{m.id()}) {
				t.Errorf("%s (%s in %s): found %v, want exactly %s", m.f.word, m.f.kind, search.FieldNames[m.f.field], ids, m.id())
				continue
			}
			h := pages[0].Hits[0]
			if h.Field != search.FieldNames[m.f.field] || h.Kind != m.f.kind || h.RunID != m.f.runID || h.OccurredAt != m.at.Format("2006-01-02T15:04:05.000Z07:00") {
				t.Errorf("%s: hit %+v, want field %s kind %s run %q at %s", m.f.word, h, search.FieldNames[m.f.field], m.f.kind, m.f.runID, m.at)
			}
			marked := false
			for _, s := range h.Snippet {
				marked = marked || (s.Mark && strings.EqualFold(s.Text, m.f.word))
			}
			if !marked {
				t.Errorf("%s: snippet %+v does not mark the word", m.f.word, h.Snippet)
			}
		}
		// The other fields of the fixtures, each by a word of its own.
		for _, c := range []struct{ q, contains, want string }{
			{q: "xastepword", want: "S-a1@3"},                 // a plan step's title
			{q: "xacmdword", want: "S-a1@5"},                  // a tool input
			{q: "xaoutword", want: "S-a1@5"},                  // a tool output
			{q: "xapatchword", want: "S-a1@9"},                // a diff's patch
			{q: "xatestout", want: "S-a1@12"},                 // a test's output
			{q: `"xadir billing invoice go"`, want: "S-a1@9"}, // a path, as a phrase
			{q: "xadir/billing/invoice.go", want: "S-a1@9"},   // the same, as a word with punctuation
			{q: "xadi*", want: "S-a1@9"},                      // a prefix
			{contains: "ling/invoice.go", want: "S-a1@9,S-a2@9,S-b1@9"},
			{contains: "rm -rf /tmp/xacm", want: "S-a1@5"}, // a command, by a substring
			{q: `"rm rf"`, contains: "xacmd", want: "S-a1@5"},
		} {
			q := search.Query{Terms: terms(t, c.q)}
			if c.contains != "" {
				q.Contains, _ = search.CheckContains(c.contains)
			}
			ids, _ := find(t, ctx, b, st, q)
			sort.Strings(ids)
			if strings.Join(ids, ",") != c.want {
				t.Errorf("q=%q contains=%q: found %v, want %s", c.q, c.contains, ids, c.want)
			}
		}
	})

	t.Run("FiltersNarrow", func(t *testing.T) {
		type filter struct {
			name  string
			set   func(q *search.Query, v string)
			value func(m modelEvent) string
		}
		filters := []filter{
			{"project", func(q *search.Query, v string) { q.Project = v }, func(m modelEvent) string { return m.sess.project }},
			{"agent", func(q *search.Query, v string) { q.Agent = v }, func(m modelEvent) string { return m.sess.agent }},
			{"role", func(q *search.Query, v string) { q.Role = v }, func(m modelEvent) string { return m.sess.role }},
			{"status", func(q *search.Query, v string) { q.Status = v }, func(m modelEvent) string { return m.sess.status }},
			{"kind", func(q *search.Query, v string) { q.Kind = v }, func(m modelEvent) string { return m.f.kind }},
			{"runStatus", func(q *search.Query, v string) { q.RunStatus = v }, func(m modelEvent) string { return m.runStatus }},
			{"tool", func(q *search.Query, v string) { q.Tool = v }, func(m modelEvent) string { return m.f.tool }},
			{"code", func(q *search.Query, v string) { q.Code = v }, func(m modelEvent) string { return m.f.code }},
		}
		for _, withTerm := range []bool{true, false} {
			for _, f := range filters {
				values := map[string]bool{"absent-value": true}
				for _, m := range model {
					if v := f.value(m); v != "" {
						values[v] = true
					}
				}
				for v := range values {
					q := search.Query{Limit: 4}
					if withTerm {
						q.Terms = terms(t, "everyword")
					}
					f.set(&q, v)
					var want []string
					for _, m := range model {
						if f.value(m) == v && (!withTerm || m.everyword) {
							want = append(want, m.id())
						}
					}
					got, _ := find(t, ctx, b, st, q)
					sort.Strings(got)
					sort.Strings(want)
					if !slices.Equal(got, want) {
						t.Errorf("everyword=%v %s=%s: found %v, want %v", withTerm, f.name, v, got, want)
					}
				}
			}
		}
		// The time range: from inclusive, to exclusive.
		for _, r := range [][2]int{{0, 5}, {3, 4}, {10, 60}, {100, 200}} {
			from, to := base.Add(time.Duration(r[0])*time.Minute), base.Add(time.Duration(r[1])*time.Minute)
			var want []string
			for _, m := range model {
				if m.everyword && !m.at.Before(from) && m.at.Before(to) {
					want = append(want, m.id())
				}
			}
			got, _ := find(t, ctx, b, st, search.Query{Terms: terms(t, "everyword"), From: from, To: to, Limit: 3})
			sort.Strings(got)
			sort.Strings(want)
			if !slices.Equal(got, want) {
				t.Errorf("from %s to %s: found %v, want %v", from, to, got, want)
			}
		}
	})

	t.Run("Pages", func(t *testing.T) {
		var all []modelEvent
		for _, m := range model {
			if m.everyword {
				all = append(all, m)
			}
		}
		sort.SliceStable(all, func(i, j int) bool { return all[i].at.After(all[j].at) })
		var want []string
		for _, m := range all {
			want = append(want, m.id())
		}
		for _, limit := range []int{1, 2, 7, 100} {
			got, _ := find(t, ctx, b, st, search.Query{Terms: terms(t, "everyword"), Limit: limit})
			if !slices.Equal(got, want) {
				t.Errorf("recent, limit %d: %v, want %v", limit, got, want)
			}
			got, pages := find(t, ctx, b, st, search.Query{Terms: terms(t, "everyword"), Limit: limit, Order: search.OrderRelevance})
			sorted := slices.Clone(got)
			sort.Strings(sorted)
			w := slices.Clone(want)
			sort.Strings(w)
			if !slices.Equal(sorted, w) {
				t.Errorf("relevance, limit %d: %v, want each of %v once", limit, got, want)
			}
			var last float64 = 1e300
			for _, p := range pages {
				for _, h := range p.Hits {
					if h.Score > last {
						t.Errorf("relevance, limit %d: score %v after %v", limit, h.Score, last)
					}
					last = h.Score
				}
			}
		}
		// A cursor of one query does not continue another.
		_, pages := find(t, ctx, b, st, search.Query{Terms: terms(t, "everyword"), Limit: 1})
		other := search.Query{Terms: terms(t, "everyword"), Project: "pa"}
		if _, err := search.DecodeCursor(pages[0].Next, &other); err == nil {
			t.Error("a cursor continued another query")
		}
	})

	t.Run("Check", func(t *testing.T) {
		rep, err := search.Check(ctx, st, b)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Problems) > 0 || rep.Behind != 0 || rep.Documents != int64(len(model)) {
			t.Fatalf("check: %+v (want %d documents, no problem)", rep, len(model))
		}
	})

	t.Run("Compaction", func(t *testing.T) {
		// S-b1 is compacted through its 5th event: those leave the index; a restore brings
		// them back.
		imp := exportSession(t, ctx, st, "S-b1")
		if _, err := st.CompactEvents(ctx, "S-b1", 5); err != nil {
			t.Fatal(err)
		}
		if _, err := ix.CatchUp(ctx, nil); err != nil {
			t.Fatal(err)
		}
		got, _ := find(t, ctx, b, st, search.Query{Terms: terms(t, "everyword"), Project: "pb"})
		for _, id := range got {
			var seq int64
			fmt.Sscanf(id[strings.Index(id, "@")+1:], "%d", &seq)
			if seq <= 5 {
				t.Errorf("compacted event %s still found", id)
			}
		}
		if len(got) == 0 {
			t.Error("no event of S-b1 after compaction: the later ones must stay")
		}
		if rep, err := search.Check(ctx, st, b); err != nil || len(rep.Problems) > 0 {
			t.Fatalf("check after compaction: %+v %v", rep, err)
		}
		// The whole log compacted, then restored from its export.
		if _, err := st.UpdateSession(ctx, "S-b1", func(s *store.Session) error { s.Record.Status = "archived"; return nil }); err != nil {
			t.Fatal(err)
		}
		last, _ := st.LastSequence(ctx, "S-b1")
		if _, err := st.CompactEvents(ctx, "S-b1", last); err != nil {
			t.Fatal(err)
		}
		if _, err := ix.CatchUp(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if got, _ := find(t, ctx, b, st, search.Query{Terms: terms(t, "everyword"), Project: "pb"}); len(got) != 0 {
			t.Errorf("after compacting the whole log: found %v", got)
		}
		if err := st.ImportSession(ctx, imp); err != nil {
			t.Fatal(err)
		}
		if _, err := ix.CatchUp(ctx, nil); err != nil {
			t.Fatal(err)
		}
		var want int
		for _, m := range model {
			if m.sess.id == "S-b1" && m.everyword {
				want++
			}
		}
		if got, _ := find(t, ctx, b, st, search.Query{Terms: terms(t, "everyword"), Project: "pb"}); len(got) != want {
			t.Errorf("after the restore: found %v, want %d events", got, want)
		}
		if rep, err := search.Check(ctx, st, b); err != nil || len(rep.Problems) > 0 {
			t.Fatalf("check after the restore: %+v %v", rep, err)
		}
	})

	t.Run("Reset", func(t *testing.T) {
		if err := b.Reset(ctx); err != nil {
			t.Fatal(err)
		}
		if got, _ := find(t, ctx, b, st, search.Query{Terms: terms(t, "everyword")}); len(got) != 0 {
			t.Errorf("after Reset: found %v", got)
		}
		if _, err := ix.CatchUp(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if rep, err := search.Check(ctx, st, b); err != nil || len(rep.Problems) > 0 || rep.Behind != 0 {
			t.Fatalf("check after a rebuild: %+v %v", rep, err)
		}
	})

	t.Run("Live", func(t *testing.T) {
		// Started, the indexer follows appends without being asked.
		ix.Start()
		defer ix.Stop()
		ev := encode(t, "S-a1", 99, base.Add(time.Hour), "", &contract.TerminalPayload{TerminalID: "t", Stream: "stdout", Chunk: "liveword arrives"})
		if _, err := st.Append(ctx, "S-a1", []*contract.EncodedEvent{ev}, store.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, _ := find(t, ctx, b, st, search.Query{Terms: terms(t, "liveword")})
			if len(got) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the appended event was not indexed within 10s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if lag, behind := ix.Lag(); behind < 0 || lag > 10*time.Second {
			t.Errorf("lag %v, behind %d", lag, behind)
		}
	})
}

// exportSession returns the whole session as an Import (its log must be whole).
func exportSession(t *testing.T, ctx context.Context, st store.Store, id string) *store.Import {
	s, err := st.GetSession(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := st.ReadEvents(ctx, id, -1, 10000)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := st.Runs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return &store.Import{Session: s, Events: evs, Runs: runs}
}
