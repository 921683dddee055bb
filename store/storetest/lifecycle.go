package storetest

import (
	"bytes"
	"context"
	"errors"

	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// testLifecycle checks heartbeats on appends, ExpiredSessions, the lifecycle state,
// CompactEvents and ImportSession.
func (s *suite) testLifecycle(t *testing.T) {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) // the fixtures' started_at

	t.Run("AppendHeartbeat", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		mustAppend(t, ctx, st, id, Batch(t, id, "quiet", 1), store.AppendOptions{})
		sess, err := st.GetSession(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if sess.Record.LastHeartbeatAt.Get() != "" {
			t.Errorf("an append without Heartbeat set last_heartbeat_at to %q", sess.Record.LastHeartbeatAt.Get())
		}
		hb := base.Add(90 * time.Second)
		mustAppend(t, ctx, st, id, Batch(t, id, "beat", 2), store.AppendOptions{Heartbeat: hb})
		sess, err = st.GetSession(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := sess.Record.LastHeartbeatAt.Get(), contract.FormatTime(hb); got != want {
			t.Errorf("last_heartbeat_at after an append with Heartbeat = %q, want %q", got, want)
		}
		if sess.Record.Status != "running" || sess.Record.UpdatedByGate.Present {
			t.Errorf("a heartbeat on a running session changed status/gate: %s %v", sess.Record.Status, sess.Record.UpdatedByGate.Get())
		}

		// A stale session comes back to running.
		if _, err := st.UpdateSession(ctx, id, func(s *store.Session) error { s.Record.Status = "stale"; return nil }); err != nil {
			t.Fatal(err)
		}
		hb2 := hb.Add(time.Minute)
		mustAppend(t, ctx, st, id, Batch(t, id, "back", 1), store.AppendOptions{Heartbeat: hb2})
		sess, err = st.GetSession(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		r := sess.Record
		if r.Status != "running" || r.UpdatedAt.Get() != contract.FormatTime(hb2) || r.UpdatedByGate.Get() != "owner" || r.LastHeartbeatAt.Get() != contract.FormatTime(hb2) {
			t.Errorf("after a heartbeat on a stale session: status %s, updated_at %q, gate %q, heartbeat %q; want running, %q, owner, %q",
				r.Status, r.UpdatedAt.Get(), r.UpdatedByGate.Get(), r.LastHeartbeatAt.Get(), contract.FormatTime(hb2), contract.FormatTime(hb2))
		}
		b, _ := contract.Marshal(r)
		if err := contract.Validate(contract.KindSession, b, contract.Limits{}); err != nil {
			t.Errorf("the record after a heartbeat breaks the schema: %v", err)
		}
		if list, _, err := st.ListSessions(ctx, store.ListFilter{Status: "running"}); err != nil || len(list) != 1 {
			t.Errorf("ListSessions(status running) after the revival = %d sessions, %v; want 1", len(list), err)
		}
		// A refused append records nothing.
		stale, _ := st.UpdateSession(ctx, id, func(s *store.Session) error { s.Record.Status = "stale"; return nil })
		if _, err := st.Append(ctx, id, []*contract.EncodedEvent{TerminalEvent(t, id, "beat-0", "other content")}, store.AppendOptions{Heartbeat: hb2.Add(time.Hour)}); err == nil {
			t.Fatal("append with a reused key and other content succeeded")
		}
		sess, _ = st.GetSession(ctx, id)
		if diff := cmp.Diff(stale.Record, sess.Record); diff != "" {
			t.Errorf("a refused append changed the record (-before +after):\n%s", diff)
		}
	})

	t.Run("ExpiredSessions", func(t *testing.T) {
		t.Parallel()
		ctx, st, _ := s.setup(t) // S-test: running, never a heartbeat: started_at = base
		type sess struct {
			id, status string
			hb         time.Duration // heartbeat after base; <0: none
		}
		for _, c := range []sess{
			{"S-a", "running", 10 * time.Minute},
			{"S-b", "paused", 5 * time.Minute},
			{"S-c", "running", 30 * time.Minute},
			{"S-closed", "closed", time.Minute},
			{"S-stale", "stale", time.Minute},
			{"S-archived", "archived", time.Minute},
			{"S-fresh", "running", -1},
		} {
			n := NewSession(c.id, SessionSpec{Status: c.status})
			if c.hb >= 0 {
				n.Record.LastHeartbeatAt = contract.Some(contract.FormatTime(base.Add(c.hb)))
			} else {
				n.Record.StartedAt = contract.FormatTime(base.Add(time.Hour))
			}
			if err := st.CreateSession(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
		ids := func(cutoff time.Time, limit int) []string {
			t.Helper()
			got, err := st.ExpiredSessions(ctx, cutoff, limit)
			if err != nil {
				t.Fatalf("ExpiredSessions: %v", err)
			}
			out := []string{}
			for _, e := range got {
				out = append(out, e.SessionID)
			}
			return out
		}
		for _, c := range []struct {
			name   string
			cutoff time.Duration
			limit  int
			want   []string
		}{
			{"none before start", 0, 0, []string{}},
			{"exactly at a heartbeat is not expired", 5 * time.Minute, 0, []string{"S-test"}},
			{"oldest first", 11 * time.Minute, 0, []string{"S-test", "S-b", "S-a"}},
			{"limit", 11 * time.Minute, 2, []string{"S-test", "S-b"}},
			{"all live", 2 * time.Hour, 0, []string{"S-test", "S-b", "S-a", "S-c", "S-fresh"}},
		} {
			if diff := cmp.Diff(c.want, ids(base.Add(c.cutoff), c.limit)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", c.name, diff)
			}
		}
		got, _ := st.ExpiredSessions(ctx, base.Add(6*time.Minute), 0)
		if len(got) != 2 || !got[1].Heartbeat.Equal(base.Add(5*time.Minute)) {
			t.Errorf("ExpiredSessions heartbeats = %+v; want S-b at %v", got, base.Add(5*time.Minute))
		}
		// Changing the record moves the session in the index.
		if _, err := st.UpdateSession(ctx, "S-test", func(s *store.Session) error {
			s.Record.LastHeartbeatAt = contract.Some(contract.FormatTime(base.Add(time.Hour)))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.UpdateSession(ctx, "S-b", func(s *store.Session) error { s.Record.Status = "stale"; return nil }); err != nil {
			t.Fatal(err)
		}
		mustAppend(t, ctx, st, "S-a", Batch(t, "S-a", "k", 1), store.AppendOptions{Heartbeat: base.Add(2 * time.Hour)})
		if diff := cmp.Diff([]string{"S-c"}, ids(base.Add(31*time.Minute), 0)); diff != "" {
			t.Errorf("after a heartbeat, a stale mark and an append heartbeat (-want +got):\n%s", diff)
		}
	})

	t.Run("LifecycleState", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		lc, err := st.Lifecycle(ctx, id)
		if err != nil || !cmp.Equal(lc, store.Lifecycle{}) {
			t.Errorf("Lifecycle of a new session = %+v, %v; want the zero value", lc, err)
		}
		if _, err := st.Lifecycle(ctx, "S-none"); !errors.Is(err, store.ErrSessionNotFound) {
			t.Errorf("Lifecycle of an unknown session: %v, want ErrSessionNotFound", err)
		}
		if _, _, err := st.UpdateLifecycle(ctx, "S-none", func(*store.Session, *store.Lifecycle) error { return nil }); !errors.Is(err, store.ErrSessionNotFound) {
			t.Errorf("UpdateLifecycle of an unknown session: %v, want ErrSessionNotFound", err)
		}
		boom := errors.New("boom")
		_, _, err = st.UpdateLifecycle(ctx, id, func(s *store.Session, l *store.Lifecycle) error {
			s.Record.Status = "paused"
			l.WindowStartedAt = "x"
			return boom
		})
		if !errors.Is(err, boom) {
			t.Errorf("UpdateLifecycle with fn failing: %v, want fn's error", err)
		}
		want := store.Lifecycle{WindowStartedAt: contract.FormatTime(base), WindowClosesAt: contract.FormatTime(base.Add(5 * time.Hour))}
		sess, got, err := st.UpdateLifecycle(ctx, id, func(s *store.Session, l *store.Lifecycle) error {
			if s.Record.Status != "running" {
				t.Errorf("a failed UpdateLifecycle left status %s", s.Record.Status)
			}
			s.Record.Phase = contract.Some("warm")
			*l = want
			return nil
		})
		if err != nil || !cmp.Equal(got, want) || sess.Record.Phase.Get() != "warm" {
			t.Fatalf("UpdateLifecycle = %+v, %+v, %v", sess, got, err)
		}
		lc, _ = st.Lifecycle(ctx, id)
		stored, _ := st.GetSession(ctx, id)
		if !cmp.Equal(lc, want) || stored.Record.Phase.Get() != "warm" {
			t.Errorf("after UpdateLifecycle: lifecycle %+v, phase %q", lc, stored.Record.Phase.Get())
		}
		if s.h.Reopen != nil {
			st = s.h.Reopen(t, st)
			if lc, err := st.Lifecycle(ctx, id); err != nil || !cmp.Equal(lc, want) {
				t.Errorf("Lifecycle after a reopen = %+v, %v; want %+v", lc, err, want)
			}
		}
	})

	t.Run("CompactAndImport", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{
			RunStatusEvent(t, id, "q", "R-1", "M-1", "queued"),
			TerminalEvent(t, id, "t1", "out"),
			RunStatusEvent(t, id, "r", "R-1", "M-1", "running"),
			RunStatusEvent(t, id, "c", "R-1", "M-1", "completed"),
			TerminalEvent(t, id, "t2", "more"),
		}, store.AppendOptions{})
		log := readAll(t, ctx, st, id)
		runs, _ := st.Runs(ctx, id)
		sess, _ := st.GetSession(ctx, id)
		if _, err := st.CompactEvents(ctx, id, 5); err == nil {
			t.Errorf("CompactEvents past the end of the log succeeded")
		}
		if _, err := st.CompactEvents(ctx, "S-none", 0); !errors.Is(err, store.ErrSessionNotFound) {
			t.Errorf("CompactEvents of an unknown session: %v", err)
		}

		// Import into another store: the same log, byte for byte, and the same runs.
		other := s.h.Open(t)
		imp := &store.Import{Session: sess, Lifecycle: store.Lifecycle{RestoredFrom: "sha256:x"}, Events: log, Runs: runs}
		if err := other.ImportSession(ctx, imp); err != nil {
			t.Fatalf("ImportSession: %v", err)
		}
		sameLog(t, ctx, other, id, log)
		if got, _ := other.Runs(ctx, id); !cmp.Equal(got, runs) {
			t.Errorf("runs after import = %+v, want %+v", got, runs)
		}
		if got, _ := other.GetSession(ctx, id); !cmp.Equal(got.Record, sess.Record) || got.LastSequence != 4 {
			t.Errorf("session after import = %+v, want %+v at 4", got, sess)
		}
		if lc, _ := other.Lifecycle(ctx, id); lc.RestoredFrom != "sha256:x" {
			t.Errorf("lifecycle after import = %+v", lc)
		}
		if e, err := other.EventByIdempotencyKey(ctx, id, "t2"); err != nil || e.Sequence != 4 {
			t.Errorf("EventByIdempotencyKey after import = %+v, %v", e, err)
		}
		// The imported log takes appends like any other, and duplicates are recognised.
		res := mustAppend(t, ctx, other, id, []*contract.EncodedEvent{TerminalEvent(t, id, "t2", "more"), TerminalEvent(t, id, "t3", "new")}, store.AppendOptions{})
		if !res[0].Duplicate || res[0].Sequence != 4 || res[1].Sequence != 5 {
			t.Errorf("append after import = %+v; want t2 duplicate at 4, t3 at 5", res)
		}
		if err := other.ImportSession(ctx, imp); !errors.Is(err, store.ErrSessionExists) {
			t.Errorf("importing over a live session: %v, want ErrSessionExists", err)
		}
		// Malformed imports are refused.
		for name, bad := range map[string]*store.Import{
			"gap":       {Session: withLast(sess, "S-gap", 1), Events: []store.StoredEvent{{Sequence: 0}, {Sequence: 2}}},
			"last":      {Session: withLast(sess, "S-last", 7), Events: log},
			"no id":     {Session: withLast(sess, "", -1)},
			"other run": {Session: withLast(sess, "S-run", -1), Runs: runs},
		} {
			if err := other.ImportSession(ctx, bad); err == nil {
				t.Errorf("import with %s succeeded", name)
			}
		}

		// Compaction: the events go, the session, runs and last sequence stay.
		if err := st.ImportSession(ctx, imp); !errors.Is(err, store.ErrSessionExists) {
			t.Errorf("importing over a session that was not compacted: %v, want ErrSessionExists", err)
		}
		n, err := st.CompactEvents(ctx, id, 2)
		if err != nil || n != 3 {
			t.Fatalf("CompactEvents(2) = %d, %v; want 3", n, err)
		}
		if got := readAll(t, ctx, st, id); len(got) != 2 || got[0].Sequence != 3 {
			t.Errorf("log after compacting through 2 = %d events from %d", len(got), got[0].Sequence)
		}
		if lc, _ := st.Lifecycle(ctx, id); lc.CompactedThrough == nil || *lc.CompactedThrough != 2 {
			t.Errorf("CompactedThrough = %v, want 2", lc.CompactedThrough)
		}
		if _, err := st.UpdateSession(ctx, id, func(s *store.Session) error { s.Record.Status = "archived"; return nil }); err != nil {
			t.Fatal(err)
		}
		if err := st.ImportSession(ctx, imp); !errors.Is(err, store.ErrSessionExists) {
			t.Errorf("importing over a partly compacted session: %v, want ErrSessionExists", err)
		}
		if n, err := st.CompactEvents(ctx, id, 4); err != nil || n != 2 {
			t.Fatalf("CompactEvents(4) = %d, %v; want 2", n, err)
		}
		if got := readAll(t, ctx, st, id); len(got) != 0 || lastSeq(t, ctx, st, id) != 4 {
			t.Errorf("after compacting everything: %d events, last sequence %d; want none, 4", len(got), lastSeq(t, ctx, st, id))
		}
		if got, _ := st.Runs(ctx, id); !cmp.Equal(got, runs) {
			t.Errorf("runs after compaction = %+v, want them kept", got)
		}
		// An archived, wholly compacted session can be restored over; the log is back.
		if err := st.ImportSession(ctx, imp); err != nil {
			t.Fatalf("import over a compacted archived session: %v", err)
		}
		sameLog(t, ctx, st, id, log)
		if got, _ := st.GetSession(ctx, id); got.Record.Status != "running" || got.LastSequence != 4 {
			t.Errorf("restored session: status %s, last %d; want running, 4", got.Record.Status, got.LastSequence)
		}
		if lc, _ := st.Lifecycle(ctx, id); lc.CompactedThrough != nil || lc.RestoredFrom != "sha256:x" {
			t.Errorf("lifecycle after restore = %+v; want the import's", lc)
		}
		if got, _ := st.Runs(ctx, id); !cmp.Equal(got, runs) {
			t.Errorf("runs after restore = %+v, want %+v", got, runs)
		}
		res = mustAppend(t, ctx, st, id, Batch(t, id, "after", 1), store.AppendOptions{})
		if res[0].Sequence != 5 {
			t.Errorf("append after restore took sequence %d, want 5", res[0].Sequence)
		}
	})
}

// sameLog fails unless the session's log is want, byte for byte.
func sameLog(t *testing.T, ctx context.Context, st store.Store, id string, want []store.StoredEvent) {
	t.Helper()
	got := readAll(t, ctx, st, id)
	if len(got) != len(want) {
		t.Fatalf("log has %d events, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Sequence != w.Sequence || g.EventID != w.EventID || g.IdempotencyKey != w.IdempotencyKey ||
			g.EventType != w.EventType || g.RunID != w.RunID || !bytes.Equal(g.Data, w.Data) {
			t.Errorf("event %d = %+v\nwant %+v", i, g, w)
		}
	}
}

func withLast(s *store.Session, id string, last int64) *store.Session {
	c := *s
	c.Record.SessionID = id
	c.LastSequence = last
	return &c
}
