package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

func (s *suite) testSessions(t *testing.T) {
	t.Run("CreateGet", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		got, err := st.GetSession(ctx, id)
		if err != nil {
			t.Fatalf("GetSession: %v", err)
		}
		if diff := cmp.Diff(NewSession(id, SessionSpec{}), got); diff != "" {
			t.Errorf("GetSession after CreateSession (-want +got):\n%s", diff)
		}
		want := NewSession("S-full", SessionSpec{Project: "p1", Status: "paused"})
		want.Lineage = &contract.Lineage{ForkedFromThreadID: "T-1", ForkedFromMessageID: "M-1", SourceRunID: "R-1"}
		want.ActiveBranch = &contract.ActiveBranch{BranchID: "B-1", ThreadID: "T-2", SourceMessageID: "M-1", RunID: "R-2", Lineage: want.Lineage, CreatedAt: Timestamp}
		want.Record.UpdatedByGate = contract.Some("owner")
		if err := st.CreateSession(ctx, want); err != nil {
			t.Fatalf("CreateSession: %v", err)
		}
		got, err = st.GetSession(ctx, "S-full")
		if err != nil {
			t.Fatalf("GetSession: %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GetSession keeps every field (-want +got):\n%s", diff)
		}
		if err := st.CreateSession(ctx, NewSession(id, SessionSpec{AgentID: "other"})); !errors.Is(err, store.ErrSessionExists) {
			t.Errorf("CreateSession with a taken id: %v, want ErrSessionExists", err)
		}
		got, err = st.GetSession(ctx, id)
		if err != nil || got.Record.AgentID != "agent-1" {
			t.Errorf("a refused CreateSession changed the session: %+v, %v", got, err)
		}
		if _, err := st.GetSession(ctx, "S-missing"); !errors.Is(err, store.ErrSessionNotFound) {
			t.Errorf("GetSession of an unknown id: %v, want ErrSessionNotFound", err)
		}
	})

	t.Run("List", func(t *testing.T) {
		t.Parallel()
		ctx, st, _ := s.setup(t) // holds S-test: running, agent-1, no project
		for _, c := range []struct {
			id   string
			spec SessionSpec
		}{
			{"S-a", SessionSpec{Status: "running", AgentID: "agent-1", Project: "p1"}},
			{"S-b", SessionSpec{Status: "paused", AgentID: "agent-2", Project: "p1"}},
			{"S-c", SessionSpec{Status: "closed", AgentID: "agent-1", Project: "p2"}},
			{"S-d", SessionSpec{Status: "running", AgentID: "agent-2", Project: "p2"}},
			{"S-e", SessionSpec{Status: "running", AgentID: "agent-1", Project: "p1"}},
		} {
			if err := st.CreateSession(ctx, NewSession(c.id, c.spec)); err != nil {
				t.Fatalf("CreateSession %s: %v", c.id, err)
			}
		}
		for _, c := range []struct {
			name string
			f    store.ListFilter
			want []string
			next string
		}{
			{"all", store.ListFilter{}, []string{"S-a", "S-b", "S-c", "S-d", "S-e", "S-test"}, ""},
			{"status", store.ListFilter{Status: "running"}, []string{"S-a", "S-d", "S-e", "S-test"}, ""},
			{"agent", store.ListFilter{AgentID: "agent-2"}, []string{"S-b", "S-d"}, ""},
			{"project", store.ListFilter{Project: "p1"}, []string{"S-a", "S-b", "S-e"}, ""},
			{"combined", store.ListFilter{Status: "running", AgentID: "agent-1", Project: "p1"}, []string{"S-a", "S-e"}, ""},
			{"no match", store.ListFilter{Status: "archived"}, nil, ""},
			{"first page", store.ListFilter{Limit: 2}, []string{"S-a", "S-b"}, "S-b"},
			{"middle page", store.ListFilter{Limit: 2, After: "S-b"}, []string{"S-c", "S-d"}, "S-d"},
			{"last page", store.ListFilter{Limit: 2, After: "S-d"}, []string{"S-e", "S-test"}, ""},
			{"exact fit", store.ListFilter{Limit: 6}, []string{"S-a", "S-b", "S-c", "S-d", "S-e", "S-test"}, ""},
			{"filtered page", store.ListFilter{Status: "running", Limit: 1, After: "S-a"}, []string{"S-d"}, "S-d"},
			{"after the end", store.ListFilter{After: "S-z"}, nil, ""},
		} {
			t.Run(c.name, func(t *testing.T) {
				got, next, err := st.ListSessions(ctx, c.f)
				if err != nil {
					t.Fatalf("ListSessions(%+v): %v", c.f, err)
				}
				var ids []string
				for _, g := range got {
					ids = append(ids, g.Record.SessionID)
				}
				if diff := cmp.Diff(c.want, ids); diff != "" {
					t.Errorf("ListSessions(%+v) ids (-want +got):\n%s", c.f, diff)
				}
				if next != c.next {
					t.Errorf("ListSessions(%+v) cursor = %q, want %q", c.f, next, c.next)
				}
			})
		}
		got, _, err := st.ListSessions(ctx, store.ListFilter{Project: "p2", Status: "closed"})
		if err != nil || len(got) != 1 {
			t.Fatalf("ListSessions: %v, %d sessions", err, len(got))
		}
		if diff := cmp.Diff(NewSession("S-c", SessionSpec{Status: "closed", AgentID: "agent-1", Project: "p2"}), got[0]); diff != "" {
			t.Errorf("ListSessions returns whole sessions (-want +got):\n%s", diff)
		}
	})

	t.Run("ListForkedFrom", func(t *testing.T) {
		t.Parallel()
		ctx, st, _ := s.setup(t)
		for _, c := range []struct{ id, parent string }{{"S-f1", "S-test"}, {"S-f2", "S-test"}, {"S-g1", "S-f1"}, {"S-solo", ""}} {
			sess := NewSession(c.id, SessionSpec{Status: "running", AgentID: "agent-1"})
			if c.parent != "" {
				sess.Lineage = &contract.Lineage{ForkedFromThreadID: c.parent, ForkedFromMessageID: "m1", SourceRunID: "r1"}
			}
			if err := st.CreateSession(ctx, sess); err != nil {
				t.Fatalf("CreateSession %s: %v", c.id, err)
			}
		}
		for parent, want := range map[string][]string{"S-test": {"S-f1", "S-f2"}, "S-f1": {"S-g1"}, "S-g1": nil} {
			got, _, err := st.ListSessions(ctx, store.ListFilter{ForkedFrom: parent})
			if err != nil {
				t.Fatalf("ListSessions(ForkedFrom %s): %v", parent, err)
			}
			var ids []string
			for _, g := range got {
				ids = append(ids, g.Record.SessionID)
			}
			if diff := cmp.Diff(want, ids); diff != "" {
				t.Errorf("forks of %s (-want +got):\n%s", parent, diff)
			}
		}
	})

	t.Run("ListLimits", func(t *testing.T) {
		t.Parallel()
		ctx, st, _ := s.setup(t)
		// 1200 sessions in all, created by 16 goroutines at once.
		const n = 1199
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := w; i < n; i += 16 {
					if err := st.CreateSession(ctx, NewSession(fmt.Sprintf("S-%04d", i), SessionSpec{})); err != nil {
						errs <- err
					}
				}
			}(w)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("CreateSession: %v", err)
		}
		for _, c := range []struct {
			limit, want int
		}{{0, 100}, {-1, 100}, {1000, 1000}, {5000, 1000}} {
			got, next, err := st.ListSessions(ctx, store.ListFilter{Limit: c.limit})
			if err != nil {
				t.Fatalf("ListSessions: %v", err)
			}
			if len(got) != c.want || next != got[len(got)-1].Record.SessionID {
				t.Errorf("ListSessions(Limit %d) = %d sessions, cursor %q; want %d and the last id", c.limit, len(got), next, c.want)
			}
		}
		seen := 0
		after := ""
		for pages := 0; ; pages++ {
			got, next, err := st.ListSessions(ctx, store.ListFilter{After: after, Limit: 250})
			if err != nil {
				t.Fatalf("ListSessions: %v", err)
			}
			for _, g := range got {
				if g.Record.SessionID <= after {
					t.Fatalf("page after %q holds %q: out of order", after, g.Record.SessionID)
				}
				after = g.Record.SessionID
			}
			seen += len(got)
			if next == "" {
				break
			}
			if next != after || pages > 10 {
				t.Fatalf("cursor %q, want the last id %q", next, after)
			}
		}
		if seen != n+1 {
			t.Errorf("paging saw %d sessions, want %d", seen, n+1)
		}
	})

	t.Run("Update", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		mustAppend(t, ctx, st, id, Batch(t, id, "k", 3), store.AppendOptions{})
		lineage := &contract.Lineage{ForkedFromThreadID: "T-1", ForkedFromMessageID: "M-1", SourceRunID: "R-1"}
		got, err := st.UpdateSession(ctx, id, func(sess *store.Session) error {
			if sess.LastSequence != 2 {
				t.Errorf("fn sees LastSequence %d, want 2", sess.LastSequence)
			}
			sess.Record.Status = "paused"
			sess.Record.Phase = contract.Some("review")
			sess.Record.UpdatedByGate = contract.Some("user")
			sess.Snapshot.ModelID = "model-2"
			sess.Lineage = lineage
			sess.ActiveBranch = &contract.ActiveBranch{BranchID: "B-1", ThreadID: "T-2", SourceMessageID: "M-1", RunID: "R-2", CreatedAt: Timestamp}
			sess.LastSequence = 99 // not the caller's to change: ignored
			return nil
		})
		if err != nil {
			t.Fatalf("UpdateSession: %v", err)
		}
		want := NewSession(id, SessionSpec{Status: "paused"})
		want.Record.Phase = contract.Some("review")
		want.Record.UpdatedByGate = contract.Some("user")
		want.Snapshot.ModelID = "model-2"
		want.Lineage = lineage
		want.ActiveBranch = &contract.ActiveBranch{BranchID: "B-1", ThreadID: "T-2", SourceMessageID: "M-1", RunID: "R-2", CreatedAt: Timestamp}
		want.LastSequence = 2
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("UpdateSession result (-want +got):\n%s", diff)
		}
		stored, err := st.GetSession(ctx, id)
		if err != nil {
			t.Fatalf("GetSession: %v", err)
		}
		if diff := cmp.Diff(want, stored); diff != "" {
			t.Errorf("GetSession after UpdateSession (-want +got):\n%s", diff)
		}
		if l, _, err := st.ListSessions(ctx, store.ListFilter{Status: "paused"}); err != nil || len(l) != 1 {
			t.Errorf("ListSessions(status paused) after the update: %d sessions, %v; want 1", len(l), err)
		}
		if n := lastSeq(t, ctx, st, id); n != 2 {
			t.Errorf("LastSequence after UpdateSession = %d, want 2", n)
		}

		boom := errors.New("boom")
		_, err = st.UpdateSession(ctx, id, func(sess *store.Session) error {
			sess.Record.Status = "closed"
			return boom
		})
		if !errors.Is(err, boom) {
			t.Errorf("UpdateSession whose fn fails: %v, want fn's error", err)
		}
		if got, _ := st.GetSession(ctx, id); got == nil || got.Record.Status != "paused" {
			t.Errorf("a failed UpdateSession changed the session: %+v", got)
		}
		if _, err := st.UpdateSession(ctx, "S-missing", func(*store.Session) error { return nil }); !errors.Is(err, store.ErrSessionNotFound) {
			t.Errorf("UpdateSession of an unknown id: %v, want ErrSessionNotFound", err)
		}
	})

	// UpdateSnapshot replaces a whole snapshot the way PATCH /v1/sessions/{id} does: every
	// field, a flag turned on, a flag turned off (false, kept apart from absent), a flag
	// dropped (absent again), and the optional permissionProfile; the record changes with it in
	// the same update. The snapshot reads back exactly, through GetSession, ListSessions,
	// UpdateLifecycle (which must keep it) and, when the harness can, after a reopen.
	t.Run("UpdateSnapshot", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		on, off := true, false
		if _, err := st.UpdateSession(ctx, id, func(sess *store.Session) error {
			sess.Snapshot.Capabilities.Shell = &on
			return nil
		}); err != nil {
			t.Fatalf("UpdateSession: %v", err)
		}
		want := NewSession(id, SessionSpec{})
		want.Snapshot = contract.Snapshot{Mode: "chat", ModelID: "model-2", PermissionProfile: "approval-required",
			Capabilities: contract.Capabilities{Approval: &on, Resume: &on, Text: &off}}
		want.Record.UpdatedAt = contract.Some(Timestamp)
		want.Record.UpdatedByGate = contract.Some("owner")
		got, err := st.UpdateSession(ctx, id, func(sess *store.Session) error {
			sess.Snapshot = want.Snapshot
			sess.Record.UpdatedAt, sess.Record.UpdatedByGate = want.Record.UpdatedAt, want.Record.UpdatedByGate
			return nil
		})
		if err != nil {
			t.Fatalf("UpdateSession replacing the snapshot: %v", err)
		}
		check := func(st store.Store, how string) {
			t.Helper()
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: UpdateSession result (-want +got):\n%s", how, diff)
			}
			stored, err := st.GetSession(ctx, id)
			if err != nil {
				t.Fatalf("%s: GetSession: %v", how, err)
			}
			if diff := cmp.Diff(want, stored); diff != "" {
				t.Errorf("%s: GetSession (-want +got):\n%s", how, diff)
			}
			if c := stored.Snapshot.Capabilities; c.Has("text") || c.Has("shell") || !c.Has("approval") || c.Shell != nil {
				t.Errorf("%s: capabilities read back as %+v; want text off (false), shell absent, approval on", how, c)
			}
			list, _, err := st.ListSessions(ctx, store.ListFilter{})
			if err != nil || len(list) != 1 || !cmp.Equal(want.Snapshot, list[0].Snapshot) {
				t.Errorf("%s: ListSessions snapshot = %+v, %v", how, list, err)
			}
		}
		check(st, "after the update")
		if _, _, err := st.UpdateLifecycle(ctx, id, func(_ *store.Session, lc *store.Lifecycle) error {
			lc.WindowStartedAt = Timestamp
			return nil
		}); err != nil {
			t.Fatalf("UpdateLifecycle: %v", err)
		}
		check(st, "after UpdateLifecycle")
		if s.h.Reopen != nil {
			check(s.h.Reopen(t, st), "after a reopen")
		}
	})
}
