package storetest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

func (s *suite) testRuns(t *testing.T) {
	ms := func(v string) *json.Number { n := json.Number(v); return &n }

	t.Run("Projection", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		if runs, err := st.Runs(ctx, id); err != nil || len(runs) != 0 {
			t.Errorf("Runs of a new session = %v, %v; want none", runs, err)
		}
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{
			RunStatusEvent(t, id, "r2-q", "R-2", "M-2", "queued"),
			TerminalEvent(t, id, "t1", "out"),
			RunStatusEvent(t, id, "r2-r", "R-2", "M-2", "running"),
		}, store.AppendOptions{})
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{
			RunStatusEvent(t, id, "r2-c", "R-2", "M-2", "completed"),
			RunStatusEvent(t, id, "r1-q", "R-1", "M-1", "queued"),
		}, store.AppendOptions{})
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{
			RunStatusEvent(t, id, "r1-r", "R-1", "M-1", "running"),
			RunStatusEvent(t, id, "r1-s", "R-1", "M-1", "stopping"),
			RunStatusEvent(t, id, "r1-x", "R-1", "M-1", "stopped"),
		}, store.AppendOptions{})
		// A status event without runId is not a run status event.
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "plain", "", "", "running")}, store.AppendOptions{})
		want := []contract.Run{
			{RunID: "R-2", SessionID: id, SourceMessageID: "M-2", Status: "completed", StartedAt: "2026-03-01T12:00:01Z", CompletedAt: "2026-03-01T12:00:03Z", DurationMs: ms("2000")},
			{RunID: "R-1", SessionID: id, SourceMessageID: "M-1", Status: "stopped", StartedAt: "2026-03-01T12:00:01Z", StoppingRequestedAt: "2026-03-01T12:00:02Z", StoppedAt: "2026-03-01T12:00:03Z", DurationMs: ms("2000")},
		}
		runs, err := st.Runs(ctx, id)
		if err != nil {
			t.Fatalf("Runs: %v", err)
		}
		if diff := cmp.Diff(want, runs); diff != "" {
			t.Errorf("Runs, in creation order (-want +got):\n%s", diff)
		}
		for _, w := range want {
			got, err := st.Run(ctx, id, w.RunID)
			if err != nil {
				t.Fatalf("Run(%s): %v", w.RunID, err)
			}
			if diff := cmp.Diff(w, got); diff != "" {
				t.Errorf("Run(%s) (-want +got):\n%s", w.RunID, diff)
			}
		}
		if _, err := st.Run(ctx, id, "R-none"); !errors.Is(err, store.ErrRunNotFound) {
			t.Errorf("Run of an unknown run: %v, want ErrRunNotFound", err)
		}
	})

	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		ctx, st, id := s.setup(t)
		base := []*contract.EncodedEvent{
			RunStatusEvent(t, id, "q", "R-1", "M-1", "queued"),
			RunStatusEvent(t, id, "c", "R-1", "M-1", "completed"),
		}
		// queued -> completed is not allowed.
		_, err := st.Append(ctx, id, base, store.AppendOptions{})
		re := errorAs[*store.RunError](t, "Append queued then completed", err)
		if re.Index != 1 {
			t.Errorf("RunError.Index = %d, want 1", re.Index)
		}
		te := errorAs[*contract.TransitionError](t, "Append queued then completed", err)
		if *te != (contract.TransitionError{RunID: "R-1", From: "queued", To: "completed"}) {
			t.Errorf("TransitionError = %+v", *te)
		}
		checkLog(t, ctx, st, id, nil)
		if runs, err := st.Runs(ctx, id); err != nil || len(runs) != 0 {
			t.Errorf("a refused batch left runs behind: %v, %v", runs, err)
		}

		ok := []*contract.EncodedEvent{
			RunStatusEvent(t, id, "q", "R-1", "M-1", "queued"),
			RunStatusEvent(t, id, "r", "R-1", "M-1", "running"),
			RunStatusEvent(t, id, "f", "R-1", "M-1", "failed"),
		}
		mustAppend(t, ctx, st, id, ok, store.AppendOptions{})
		before, err := st.Run(ctx, id, "R-1")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name  string
			batch []*contract.EncodedEvent
			index int
			trans bool
		}{
			{"from a final status", []*contract.EncodedEvent{TerminalEvent(t, id, "x", "x"), RunStatusEvent(t, id, "again", "R-1", "M-1", "running")}, 1, true},
			{"another source message", []*contract.EncodedEvent{RunStatusEvent(t, id, "other", "R-1", "M-9", "failed")}, 0, false},
		} {
			t.Run(c.name, func(t *testing.T) {
				_, err := st.Append(ctx, id, c.batch, store.AppendOptions{})
				re := errorAs[*store.RunError](t, "Append", err)
				if re.Index != c.index {
					t.Errorf("RunError.Index = %d, want %d", re.Index, c.index)
				}
				var te *contract.TransitionError
				if got := errors.As(err, &te); got != c.trans {
					t.Errorf("error wraps a TransitionError: %v, want %v (%v)", got, c.trans, err)
				}
				checkLog(t, ctx, st, id, ok)
				after, err := st.Run(ctx, id, "R-1")
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(before, after); diff != "" {
					t.Errorf("a refused batch changed the run (-before +after):\n%s", diff)
				}
			})
		}
		// One active run per session: a new run cannot start while another is active, whether
		// the active run was stored before or earlier in the same batch.
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "r2-q", "R-2", "M-2", "queued")}, store.AppendOptions{})
		withR2 := append(append([]*contract.EncodedEvent(nil), ok...), RunStatusEvent(t, id, "r2-q", "R-2", "M-2", "queued"))
		for _, c := range []struct {
			name  string
			batch []*contract.EncodedEvent
			index int
			want  contract.ActiveRunError
		}{
			{"active run stored", []*contract.EncodedEvent{TerminalEvent(t, id, "y", "y"), RunStatusEvent(t, id, "r3-q", "R-3", "M-3", "queued")}, 1,
				contract.ActiveRunError{RunID: "R-3", Status: "queued", ActiveRunID: "R-2", ActiveStatus: "queued"}},
			{"active run in the batch", []*contract.EncodedEvent{RunStatusEvent(t, id, "r2-r", "R-2", "M-2", "running"), RunStatusEvent(t, id, "r3-q", "R-3", "M-3", "queued")}, 1,
				contract.ActiveRunError{RunID: "R-3", Status: "queued", ActiveRunID: "R-2", ActiveStatus: "running"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				_, err := st.Append(ctx, id, c.batch, store.AppendOptions{})
				re := errorAs[*store.RunError](t, "Append", err)
				if re.Index != c.index {
					t.Errorf("RunError.Index = %d, want %d", re.Index, c.index)
				}
				ae := errorAs[*contract.ActiveRunError](t, "Append", err)
				if *ae != c.want {
					t.Errorf("ActiveRunError = %+v, want %+v", *ae, c.want)
				}
				checkLog(t, ctx, st, id, withR2)
			})
		}
		// Once the active run ends, the next may start, in the same batch.
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{
			RunStatusEvent(t, id, "r2-f", "R-2", "M-2", "failed"),
			RunStatusEvent(t, id, "r3-q", "R-3", "M-3", "queued"),
		}, store.AppendOptions{})
		if runs, err := st.Runs(ctx, id); err != nil || len(runs) != 3 || runs[2].RunID != "R-3" || runs[1].Status != "failed" {
			t.Errorf("Runs = %+v, %v; want R-1, R-2 failed, R-3", runs, err)
		}

		// A duplicate of a status event is not applied again (running after failed would be
		// refused if it were).
		res := mustAppend(t, ctx, st, id, ok[1:2], store.AppendOptions{})
		if !res[0].Duplicate {
			t.Errorf("repeated status event not answered as a duplicate: %+v", res[0])
		}
	})
}
