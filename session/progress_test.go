package session_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store/sqlite"
)

// checkProgress checks a recorded progress report: the phases in the given order, each from 0
// to total, done never decreasing within a phase, and few reports (at most one per 1024
// events and phase, plus its start and end).
func checkProgress(t *testing.T, got []session.Progress, phases []string, total int64) {
	t.Helper()
	if len(got) == 0 {
		t.Fatal("no progress reported")
	}
	phase := -1
	for i, p := range got {
		if p.Total != total {
			t.Errorf("report %d %+v: total is not %d", i, p, total)
		}
		if phase < 0 || p.Phase != phases[phase] {
			if phase >= 0 && got[i-1].Done != total {
				t.Errorf("phase %s ended at %d of %d", phases[phase], got[i-1].Done, total)
			}
			phase++
			if phase >= len(phases) || p.Phase != phases[phase] {
				t.Fatalf("report %d %+v: phases out of order, want %v", i, p, phases)
			}
			if p.Done != 0 {
				t.Errorf("phase %s starts at %d, want 0", p.Phase, p.Done)
			}
			continue
		}
		if p.Done < got[i-1].Done || p.Done > total {
			t.Errorf("report %d %+v: done goes from %d to %d", i, p, got[i-1].Done, p.Done)
		}
	}
	if phase != len(phases)-1 || got[len(got)-1].Done != total {
		t.Errorf("progress ends with %+v, want phase %s at %d", got[len(got)-1], phases[len(phases)-1], total)
	}
	if limit := len(phases) * int(2+total/1024); len(got) > limit {
		t.Errorf("%d reports, want at most %d", len(got), limit)
	}
}

// TestArchiveAndRestoreReportProgress archives and restores sessions of several sizes with a
// progress callback, and checks what it was told.
func TestArchiveAndRestoreReportProgress(t *testing.T) {
	cases := []struct {
		name    string
		events  int
		compact bool
	}{
		{"empty log", 0, false},
		{"one event", 1, false},
		{"under one report step", 1000, false},
		{"several report steps", 5000, false},
		{"compact", 3000, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t)
			ctx := context.Background()
			for done := 0; done < c.events; {
				batch := make([]*contract.EncodedEvent, 0, 1000)
				for ; len(batch) < 1000 && done < c.events; done++ {
					batch = append(batch, b.event(t, "terminal", "", fmt.Sprintf(`{"terminalId":"t","stream":"stdout","chunk":"line %d\n"}`, done)))
				}
				b.append(t, batch...)
			}
			dir := filepath.Join(t.TempDir(), "archives")
			var got []session.Progress
			res, err := b.svc.Archive(ctx, b.sid, session.ArchiveOptions{Dir: dir, Compact: c.compact, Progress: func(p session.Progress) { got = append(got, p) }})
			if err != nil {
				t.Fatal(err)
			}
			phases := []string{session.PhaseRead, session.PhaseWrite}
			if c.compact && c.events > 0 {
				phases = append(phases, session.PhaseCompact)
			}
			checkProgress(t, got, phases, int64(c.events))

			st2, err := sqlite.Open(ctx, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer st2.Close()
			got = nil
			rr, err := session.New(st2, session.Options{}).Restore(ctx, dir, session.RestoreRequest{Name: res.Name, Progress: func(p session.Progress) { got = append(got, p) }})
			if err != nil {
				t.Fatal(err)
			}
			if rr.Events != c.events {
				t.Errorf("restored %d events, want %d", rr.Events, c.events)
			}
			checkProgress(t, got, []string{session.PhaseVerify, session.PhaseImport}, int64(c.events))
		})
	}
}

// TestArchiveWithoutProgressListener: a nil callback is the default and changes nothing.
func TestArchiveWithoutProgressListener(t *testing.T) {
	b := setup(t)
	story := b.story(t)
	b.append(t, story...)
	dir := filepath.Join(t.TempDir(), "archives")
	res, err := b.svc.Archive(context.Background(), b.sid, session.ArchiveOptions{Dir: dir})
	if err != nil || res.Events != len(story) {
		t.Fatalf("archive without a listener: %+v, %v", res, err)
	}
}
