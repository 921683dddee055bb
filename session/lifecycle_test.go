package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sessiond/sessiond/archive"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/sqlite"
)

// clock is a fake clock tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) // the fixtures' started_at

// lifecycleSetup is setup with a fake clock at t0.
func lifecycleSetup(t *testing.T) (*bundle, *clock) {
	b := setup(t)
	c := &clock{t: t0}
	b.svc = session.New(b.st, session.Options{Clock: session.ClockFunc(c.Now)})
	return b, c
}

func rejectCode(t *testing.T, err error) contract.ErrorCode {
	t.Helper()
	var rej *session.RejectError
	if !errors.As(err, &rej) {
		t.Fatalf("error %v (%T), want a *session.RejectError", err, err)
	}
	return rej.Code
}

func TestHeartbeat(t *testing.T) {
	b, c := lifecycleSetup(t)
	ctx := context.Background()
	c.Add(time.Minute)
	sess, err := b.svc.Heartbeat(ctx, b.sid)
	if err != nil || sess.Record.LastHeartbeatAt.Get() != "2026-03-01T12:01:00.000Z" || sess.Record.UpdatedByGate.Present {
		t.Fatalf("Heartbeat = %+v, %v", sess, err)
	}
	if _, err := b.st.UpdateSession(ctx, b.sid, func(s *store.Session) error { s.Record.Status = "stale"; return nil }); err != nil {
		t.Fatal(err)
	}
	sess, _ = b.svc.Heartbeat(ctx, b.sid)
	if sess.Record.Status != "running" || sess.Record.UpdatedByGate.Get() != "owner" {
		t.Errorf("a heartbeat on a stale session left %s by %q; want running by owner", sess.Record.Status, sess.Record.UpdatedByGate.Get())
	}
	if _, err := b.svc.Heartbeat(ctx, "S-none"); !errors.Is(err, store.ErrSessionNotFound) {
		t.Errorf("Heartbeat of an unknown session: %v", err)
	}
	for _, status := range []string{"closed", "archived"} {
		b.st.UpdateSession(ctx, b.sid, func(s *store.Session) error { s.Record.Status = status; return nil })
		if _, err := b.svc.Heartbeat(ctx, b.sid); rejectCode(t, err) != "INVALID_SESSION_STATE" {
			t.Errorf("Heartbeat of a %s session: %v", status, err)
		}
	}
}

// newSession creates a running session with a fixed start.
func newSession(t *testing.T, st store.Store, id, status string, started time.Time) {
	t.Helper()
	err := st.CreateSession(context.Background(), &store.Session{
		Record:   contract.SessionRecord{SchemaVersion: 1, SessionID: id, AgentID: "a", Role: "implementer", Status: status, StartedAt: contract.FormatTime(started)},
		Snapshot: contract.Snapshot{Mode: "work", ModelID: "m"},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSweepMarksStaleAndFailsTheActiveRun(t *testing.T) {
	b, c := lifecycleSetup(t)
	ctx := context.Background()
	b.append(t, b.story(t)[:3]...) // r1 is running
	newSession(t, b.st, "S-paused", "paused", t0)
	newSession(t, b.st, "S-closed", "closed", t0)
	newSession(t, b.st, "S-young", "running", t0.Add(5*time.Minute))

	c.Add(10 * time.Minute) // exactly the TTL: nothing expires yet
	if res, err := b.svc.Sweep(ctx, session.SweepOptions{}); err != nil || res.Expired != 0 {
		t.Fatalf("Sweep at the TTL = %+v, %v; want nothing", res, err)
	}
	c.Add(time.Second)
	// A second instance sweeping at the same time must not append twice.
	other := session.New(b.st, session.Options{Clock: session.ClockFunc(c.Now)})
	var wg sync.WaitGroup
	results := make([]session.SweepResult, 2)
	for i, svc := range []*session.Service{b.svc, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := svc.Sweep(ctx, session.SweepOptions{StaleAfter: 10 * time.Minute, Batch: 1})
			if err != nil {
				t.Errorf("Sweep: %v", err)
			}
			results[i] = res
		}()
	}
	wg.Wait()
	if got := results[0].Stale + results[1].Stale; got != 2 {
		t.Errorf("sweeps marked %d sessions stale (%+v); want 2 in all", got, results)
	}
	if got := results[0].RunsFailed + results[1].RunsFailed; got < 1 {
		t.Errorf("no sweep failed the active run: %+v", results)
	}
	for id, want := range map[string]string{b.sid: "stale", "S-paused": "stale", "S-closed": "closed", "S-young": "running"} {
		sess, _ := b.st.GetSession(ctx, id)
		if sess.Record.Status != want {
			t.Errorf("%s is %s, want %s", id, sess.Record.Status, want)
		}
		if want == "stale" && (sess.Record.UpdatedByGate.Get() != "" || sess.Record.UpdatedAt.Get() != "2026-03-01T12:10:01.000Z") {
			t.Errorf("%s marked stale with gate %q at %q; want null at 12:10:01", id, sess.Record.UpdatedByGate.Get(), sess.Record.UpdatedAt.Get())
		}
	}
	log, _ := b.st.ReadEvents(ctx, b.sid, 2, 0)
	if len(log) != 2 {
		t.Fatalf("the sweep appended %d events, want 2 (failed status, error)", len(log))
	}
	var st, er contract.Event
	json.Unmarshal(log[0].Data, &st)
	json.Unmarshal(log[1].Data, &er)
	sp, _ := st.Payload.(*contract.StatusPayload)
	ep, _ := er.Payload.(*contract.ErrorPayload)
	if sp == nil || sp.Status != "failed" || sp.FailedAt != "2026-03-01T12:10:01.000Z" || sp.DurationMs.String() != "600000" || st.RunID != "r1" {
		t.Errorf("status event = %s", log[0].Data)
	}
	if ep == nil || ep.Code != session.HeartbeatLost || !ep.Retryable || ep.SourceEventID != st.EventID || er.RunID != "r1" {
		t.Errorf("error event = %s", log[1].Data)
	}
	run, _ := b.st.Run(ctx, b.sid, "r1")
	if run.Status != "failed" {
		t.Errorf("run r1 is %s, want failed", run.Status)
	}
	// The user can retry from the error event.
	res, err := b.svc.Execute(ctx, b.sid, &contract.Command{Contract: "AgentSessionCommand", CommandID: "c1", SessionID: b.sid, RunID: "r1",
		IdempotencyKey: "retry-1", ExpectedSequence: 4, IssuedAt: "2026-03-01T12:11:00Z", CommandType: "retry",
		Payload: &contract.RetryCommand{SourceEventID: er.EventID}}, session.ExecOptions{})
	if err != nil || res.Outcome != "accepted" {
		t.Errorf("retry after HEARTBEAT_LOST = %+v, %v", res, err)
	}
	// Sweeping again does nothing; a heartbeat brings the session back.
	c.Add(time.Minute)
	if res, err := b.svc.Sweep(ctx, session.SweepOptions{}); err != nil || res.Stale != 0 || res.RunsFailed != 0 {
		t.Errorf("second sweep = %+v, %v; want nothing", res, err)
	}
	if sess, err := b.svc.Heartbeat(ctx, b.sid); err != nil || sess.Record.Status != "running" {
		t.Errorf("heartbeat on the stale session = %v, %v", sess, err)
	}
}

func TestSweepLeavesASessionThatSpokeUp(t *testing.T) {
	b, c := lifecycleSetup(t)
	ctx := context.Background()
	b.append(t, b.story(t)[:3]...)
	c.Add(11 * time.Minute)
	// The runtime appends (a heartbeat) after the sweeper's query but before it acts: the
	// store answers a fresh heartbeat, and the sweep skips the session.
	if _, err := b.st.Append(ctx, b.sid, []*contract.EncodedEvent{b.event(t, "terminal", `"runId":"r1"`, `{"terminalId":"x","stream":"stdout","chunk":"alive"}`)},
		store.AppendOptions{Heartbeat: c.Now()}); err != nil {
		t.Fatal(err)
	}
	res, err := b.svc.Sweep(ctx, session.SweepOptions{})
	if err != nil || res.Stale != 0 || res.RunsFailed != 0 {
		t.Errorf("Sweep = %+v, %v; want nothing done", res, err)
	}
}

func TestWarmAndStatus(t *testing.T) {
	b, c := lifecycleSetup(t)
	ctx := context.Background()
	rep, err := b.svc.Status(ctx, b.sid)
	if err != nil || rep.Recommendation != "ok" || rep.Window.HoursLeft != nil || rep.HoursSinceLastArchive != nil {
		t.Fatalf("Status of a new session = %+v, %v", rep, err)
	}
	w, err := b.svc.Warm(ctx, b.sid, session.WarmOptions{})
	if err != nil || !w.Started || w.ClosesAt != "2026-03-01T17:00:00.000Z" || *w.HoursLeft != 5 {
		t.Fatalf("Warm = %+v, %v", w, err)
	}
	c.Add(time.Hour)
	if w2, _ := b.svc.Warm(ctx, b.sid, session.WarmOptions{}); w2.Started || w2.ClosesAt != w.ClosesAt || *w2.HoursLeft != 4 {
		t.Errorf("Warm while a window is open = %+v; want it unchanged", w2)
	}
	staleIn3h := session.New(b.st, session.Options{Clock: session.ClockFunc(c.Now), StaleAfter: 3 * time.Hour})
	for _, c2 := range []struct {
		at      time.Duration // since t0
		rec     string
		reasons int
	}{
		{time.Hour, "ok", 0},
		{2*time.Hour + time.Minute, "archive_now", 1},    // never archived, over 2 h old
		{4*time.Hour + 40*time.Minute, "archive_now", 3}, // window nearly over, and stale
		{6 * time.Hour, "archive_now", 3},                // window closed
	} {
		c.t = t0.Add(c2.at)
		rep, err := staleIn3h.Status(ctx, b.sid)
		if err != nil || rep.Recommendation != c2.rec || len(rep.Reasons) != c2.reasons {
			t.Errorf("Status at +%s = %+v, %v; want %s with %d reasons", c2.at, rep, err, c2.rec, c2.reasons)
		}
	}
	if w, _ := b.svc.Warm(ctx, b.sid, session.WarmOptions{Window: time.Hour}); !w.Started || w.ClosesAt != "2026-03-01T19:00:00.000Z" {
		t.Errorf("Warm after the window closed = %+v; want a new one-hour window", w)
	}
	b.st.UpdateSession(ctx, b.sid, func(s *store.Session) error { s.Record.Status = "closed"; return nil })
	if _, err := b.svc.Warm(ctx, b.sid, session.WarmOptions{}); rejectCode(t, err) != "INVALID_SESSION_STATE" {
		t.Errorf("Warm of a closed session: %v", err)
	}
	if rep, _ := b.svc.Status(ctx, b.sid); rep.Recommendation != "ok" {
		t.Errorf("Status of a closed session recommends %s", rep.Recommendation)
	}
}

func TestAssess(t *testing.T) {
	b, _ := lifecycleSetup(t)
	ctx := context.Background()
	task := "Port the parser:\n- read the spec\n- write the lexer\n- write the parser\n- test it"
	a, err := b.svc.Assess(ctx, b.sid, session.AssessRequest{Task: task})
	if err != nil || a.Sufficient || a.OptimisticHours != nil || a.Risk != "unknown" || !strings.Contains(a.Message, "insufficient history") {
		t.Fatalf("Assess without history = %+v, %v", a, err)
	}
	if len(a.Phases) != 1 || len(a.Phases[0].Steps) != 4 || a.Phases[0].MaxHours != 3 {
		t.Errorf("phases without history = %+v", a.Phases)
	}
	// Ten finished sessions of the same agent and role: one run each of 1..10 hours.
	for i := 1; i <= 10; i++ {
		id := fmt.Sprintf("S-past-%02d", i)
		newSession(t, b.st, id, "closed", t0)
		d := json.Number(fmt.Sprint(i * 3600000))
		evs := []contract.Event{
			{Contract: "AgentSessionEvent", EventID: "q", SessionID: id, RunID: "r", SourceMessageID: "m", IdempotencyKey: "q", OccurredAt: "2026-03-01T12:00:00Z", EventType: "status", Payload: &contract.StatusPayload{Status: "running", StartedAt: "2026-03-01T12:00:00Z"}},
			{Contract: "AgentSessionEvent", EventID: "c", SessionID: id, RunID: "r", SourceMessageID: "m", IdempotencyKey: "c", OccurredAt: "2026-03-01T12:00:00Z", EventType: "status", Payload: &contract.StatusPayload{Status: "completed", CompletedAt: "2026-03-01T13:00:00Z", DurationMs: &d}},
		}
		var enc []*contract.EncodedEvent
		for j := range evs {
			e, err := contract.EncodeEvent(&evs[j])
			if err != nil {
				t.Fatal(err)
			}
			enc = append(enc, e)
		}
		if _, err := b.st.Append(ctx, id, enc, store.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	a, err = b.svc.Assess(ctx, b.sid, session.AssessRequest{Task: task})
	if err != nil || !a.Sufficient || a.Samples != 10 {
		t.Fatalf("Assess with history = %+v, %v", a, err)
	}
	// Nearest rank: p25 of 1..10 is 3, p90 is 9.
	if *a.OptimisticHours != 3 || *a.PessimisticHours != 9 || a.Risk != "high" {
		t.Errorf("estimate = %v..%v risk %s; want 3..9 high", *a.OptimisticHours, *a.PessimisticHours, a.Risk)
	}
	if len(a.Phases) != 3 {
		t.Fatalf("phases = %+v; want 3 of at most 3 h", a.Phases)
	}
	steps := 0
	for _, p := range a.Phases {
		if *p.Hours > 3 || p.Checkpoint != "archive" {
			t.Errorf("phase %+v is over 3 h or has no archive checkpoint", p)
		}
		steps += len(p.Steps)
	}
	if steps != 4 {
		t.Errorf("phases hold %d steps, want 4", steps)
	}
}

// archiveSetup is a session with the story log, a project, and an archive directory.
func archiveSetup(t *testing.T) (*bundle, *clock, string) {
	b, c := lifecycleSetup(t)
	b.st.UpdateSession(context.Background(), b.sid, func(s *store.Session) error { s.Record.Project = contract.Some("demo"); return nil })
	b.append(t, b.story(t)...)
	return b, c, filepath.Join(t.TempDir(), "archives")
}

func TestArchiveRestoreRoundTripIntoAnotherDataDirectory(t *testing.T) {
	b, c, dir := archiveSetup(t)
	ctx := context.Background()
	if _, err := b.svc.Warm(ctx, b.sid, session.WarmOptions{}); err != nil {
		t.Fatal(err)
	}
	before, _ := b.st.ReadEvents(ctx, b.sid, -1, 0)
	runs, _ := b.st.Runs(ctx, b.sid)
	wantT, _ := b.svc.Rebuild(ctx, b.sid)
	c.Add(time.Hour)
	res, err := b.svc.Archive(ctx, b.sid, session.ArchiveOptions{Dir: dir, Note: session.Note{Done: "read", InProgress: "fix", Next: "test"}})
	if err != nil {
		t.Fatalf("Archive: %v", err)
	}
	if res.Name != "RC-20260301T130000.000Z-S-t.json" || filepath.Dir(res.Path) != filepath.Join(dir, "p-demo") || res.Events != len(before) {
		t.Errorf("archive = %+v", res)
	}
	sess, _ := b.st.GetSession(ctx, b.sid)
	if sess.Record.Status != "archived" || sess.Record.ArchivePath.Get() != res.Path {
		t.Errorf("after archive: status %s, path %q", sess.Record.Status, sess.Record.ArchivePath.Get())
	}
	if _, err := b.svc.Archive(ctx, b.sid, session.ArchiveOptions{Dir: dir}); rejectCode(t, err) != "INVALID_SESSION_STATE" {
		t.Errorf("archiving an archived session: %v", err)
	}
	data, _ := os.ReadFile(res.Path)
	content, _, err := archive.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if content.Note.Next != "test" || content.Summary.Plan == nil || content.Summary.Events != len(before) || len(content.Runs) != len(runs) {
		t.Errorf("archive content: note %+v, summary %+v", content.Note, content.Summary)
	}

	// Another host: another data directory, the file copied over.
	st2, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	dir2 := t.TempDir()
	svc2 := session.New(st2, session.Options{Clock: session.ClockFunc(c.Now)})
	info, err := svc2.SaveArchive(dir2, writeTemp(t, data))
	if err != nil {
		t.Fatal(err)
	}
	list, _ := archive.List(dir2, "demo")
	if len(list) != 1 || list[0].Name != info.Name {
		t.Fatalf("ListArchives = %+v", list)
	}
	c.Add(time.Hour)
	rr, err := svc2.Restore(ctx, dir2, session.RestoreRequest{Project: "demo"})
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	after, _ := st2.ReadEvents(ctx, b.sid, -1, 0)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("restored log differs (-archived +restored):\n%s", diff)
	}
	runs2, _ := st2.Runs(ctx, b.sid)
	if diff := cmp.Diff(runs, runs2); diff != "" {
		t.Errorf("restored runs differ:\n%s", diff)
	}
	gotT, _ := svc2.Rebuild(ctx, b.sid)
	if diff := cmp.Diff(wantT, gotT); diff != "" {
		t.Errorf("restored transcript differs:\n%s", diff)
	}
	live, _ := svc2.Transcript(ctx, b.sid)
	if diff := cmp.Diff(wantT, live); diff != "" {
		t.Errorf("restored live transcript differs:\n%s", diff)
	}
	r := rr.Session.Record
	if r.Status != "paused" || r.UpdatedByGate.Get() != "handoff" || r.LastHeartbeatAt.Get() != "2026-03-01T14:00:00.000Z" || r.ArchivePath.Get() != info.Path {
		t.Errorf("restored record = %+v", r)
	}
	rep, _ := svc2.Status(ctx, b.sid)
	if rep.HoursSinceLastArchive == nil || *rep.HoursSinceLastArchive != 1 || rep.Window.ClosesAt != "2026-03-01T17:00:00.000Z" {
		t.Errorf("status after restore = %+v; want the archive 1 h old and the window kept", rep)
	}
	// Restoring twice is a conflict, and so is restoring into the store that still has it.
	if _, err := svc2.Restore(ctx, dir2, session.RestoreRequest{Name: info.Name}); rejectCode(t, err) != contract.CodeRestoreConflict {
		t.Errorf("second restore: %v", err)
	}
	// The first store still has the session, archived with its log: restore reactivates it.
	if rr, err := b.svc.Restore(ctx, dir, session.RestoreRequest{Name: info.Name}); err != nil || rr.How != session.RestoredReactivated || rr.Session.Record.Status != "paused" {
		t.Errorf("restore into the store that has the archived session = %+v, %v; want it reactivated", rr, err)
	}
	if _, err := b.svc.Restore(ctx, dir, session.RestoreRequest{Name: info.Name}); rejectCode(t, err) != contract.CodeRestoreConflict {
		t.Errorf("restore into the store where the session is live again: %v", err)
	}
	// The restored session takes appends after the restored log.
	res2, err := st2.Append(ctx, b.sid, []*contract.EncodedEvent{b.event(t, "terminal", "", `{"terminalId":"x","stream":"stdout","chunk":"on"}`)}, store.AppendOptions{})
	if err != nil || res2[0].Sequence != int64(len(before)) {
		t.Errorf("append after restore = %+v, %v", res2, err)
	}
}

func TestArchiveCompactThenRestoreInPlace(t *testing.T) {
	b, _, dir := archiveSetup(t)
	ctx := context.Background()
	before, _ := b.st.ReadEvents(ctx, b.sid, -1, 0)
	wantT, _ := b.svc.Transcript(ctx, b.sid)
	res, err := b.svc.Archive(ctx, b.sid, session.ArchiveOptions{Dir: dir, Compact: true})
	if err != nil || res.Compacted != int64(len(before)) {
		t.Fatalf("Archive --compact = %+v, %v", res, err)
	}
	if evs, _ := b.st.ReadEvents(ctx, b.sid, -1, 0); len(evs) != 0 {
		t.Errorf("%d events left after compaction", len(evs))
	}
	if last, _ := b.st.LastSequence(ctx, b.sid); last != int64(len(before))-1 {
		t.Errorf("last sequence after compaction = %d", last)
	}
	if _, err := b.svc.Restore(ctx, dir, session.RestoreRequest{Name: res.Name}); err != nil {
		t.Fatalf("Restore over the compacted session: %v", err)
	}
	after, _ := b.st.ReadEvents(ctx, b.sid, -1, 0)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("restored log differs:\n%s", diff)
	}
	gotT, _ := b.svc.Transcript(ctx, b.sid)
	if diff := cmp.Diff(wantT, gotT); diff != "" {
		t.Errorf("transcript after restore differs:\n%s", diff)
	}
	if _, err := b.svc.Restore(ctx, dir, session.RestoreRequest{Name: res.Name}); rejectCode(t, err) != contract.CodeRestoreConflict {
		t.Errorf("restoring again: %v", err)
	}
}

func TestRestoreRefusesBadFiles(t *testing.T) {
	b, _, dir := archiveSetup(t)
	ctx := context.Background()
	res, err := b.svc.Archive(ctx, b.sid, session.ArchiveOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(res.Path)
	st2, _ := sqlite.Open(ctx, t.TempDir())
	defer st2.Close()
	svc2 := session.New(st2, session.Options{})
	tampered := bytes.Replace(good, []byte("fix the build"), []byte("fix the bills"), 1)
	for name, data := range map[string][]byte{
		"truncated":      good[:len(good)/2],
		"cut at the end": good[:len(good)-3],
		"tampered":       tampered,
		"empty":          {},
		"other checksum": bytes.Replace(good, []byte(`"checksum":"sha256:`), []byte(`"checksum":"sha256:00`), 1),
		"newer version":  bytes.Replace(good, []byte(`"version":2`), []byte(`"version":3`), 1),
	} {
		d := t.TempDir()
		p := filepath.Join(d, "p-demo", res.Name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, data, 0o644)
		if _, err := svc2.Restore(ctx, d, session.RestoreRequest{Name: res.Name}); rejectCode(t, err) != contract.CodeArchiveInvalid {
			t.Errorf("%s: Restore = %v, want ARCHIVE_INVALID", name, err)
		}
		if _, err := svc2.SaveArchive(t.TempDir(), writeTemp(t, data)); err == nil {
			t.Errorf("%s: SaveArchive accepted it", name)
		}
		if _, err := st2.GetSession(ctx, b.sid); !errors.Is(err, store.ErrSessionNotFound) {
			t.Fatalf("%s: a refused restore left the session in the store", name)
		}
	}
	// A crash mid-archive leaves a temporary file: never listed, never restorable.
	tmp := filepath.Join(dir, "p-demo", ".tmp-RC-123")
	os.WriteFile(tmp, good[:100], 0o644)
	if list, _ := archive.List(dir, ""); len(list) != 1 || list[0].Name != res.Name {
		t.Errorf("ListArchives with a leftover temp file = %+v", list)
	}
	for _, name := range []string{".tmp-RC-123", "../p-demo/" + res.Name, "RC-x/../../y.json", "RC-a\x00.json"} {
		if _, err := svc2.Restore(ctx, dir, session.RestoreRequest{Name: name}); rejectCode(t, err) != contract.CodeArchiveNotFound {
			t.Errorf("Restore(%q) = %v, want ARCHIVE_NOT_FOUND", name, err)
		}
	}
}

func TestArchivePathsStayInTheArchiveDirectory(t *testing.T) {
	for _, c := range []struct{ id, project string }{
		{"S-../../evil", "../../etc"},
		{"S-a/b", "/abs/path"},
		{"S-nul\x00x", "nul\x00"},
		{"S-" + strings.Repeat("x", 400), strings.Repeat("p", 1000)},
		{"S-..", ".."},
		{"S-.hidden", ".hidden"},
		{"S-dots", "."},
	} {
		ctx := context.Background()
		st, err := sqlite.Open(ctx, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		newSession(t, st, "S-x", "running", t0) // an id the contract accepts; the record is edited below
		if _, err := st.UpdateSession(ctx, "S-x", func(s *store.Session) error { s.Record.Project = contract.Some(c.project); return nil }); err != nil {
			t.Fatal(err)
		}
		root := t.TempDir()
		dir := filepath.Join(root, "archives")
		svc := session.New(st, session.Options{Clock: session.ClockFunc(func() time.Time { return t0 })})
		res, err := svc.Archive(ctx, "S-x", session.ArchiveOptions{Dir: dir})
		if err != nil {
			t.Fatalf("project %q: Archive: %v", c.project, err)
		}
		rel, err := filepath.Rel(dir, res.Path)
		if err != nil || strings.HasPrefix(rel, "..") || strings.Count(rel, string(filepath.Separator)) != 1 || len(filepath.Base(filepath.Dir(res.Path))) > 90 {
			t.Errorf("project %q: archive written to %s", c.project, res.Path)
		}
		if list, _ := archive.List(dir, c.project); len(list) != 1 {
			t.Errorf("project %q: ListArchives = %+v", c.project, list)
		}
		st.Close()
		for _, name := range []string{archive.SafeName(c.id), archive.SafeName(c.project)} {
			if strings.ContainsAny(name, "/\\\x00") || strings.HasPrefix(name, ".") || len(name) > 80 || name == "" {
				t.Errorf("SafeName gave %q", name)
			}
		}
	}
	if archive.SafeName("a/b") == archive.SafeName("a_b") {
		t.Errorf("SafeName maps a/b and a_b to the same name")
	}
}

// TestArchiveAndRestoreHaveAWayOutInEveryState walks every state archive and restore meet in one
// store (docs/lifecycle.md): each refusal names an action, and the test takes that action and
// checks it works.
func TestArchiveAndRestoreHaveAWayOutInEveryState(t *testing.T) {
	b, c, dir := archiveSetup(t)
	ctx := context.Background()
	before, _ := b.st.ReadEvents(ctx, b.sid, -1, 0)
	wantT, _ := b.svc.Rebuild(ctx, b.sid)
	status := func(want string) {
		t.Helper()
		sess, err := b.st.GetSession(ctx, b.sid)
		if err != nil || sess.Record.Status != want {
			t.Fatalf("status = %+v, %v; want %s", sess, err, want)
		}
	}
	refused := func(err error, code contract.ErrorCode, hint string) {
		t.Helper()
		var rej *session.RejectError
		if !errors.As(err, &rej) || rej.Code != code || !strings.Contains(rej.Message, hint) {
			t.Fatalf("error %v; want %s with %q in its message", err, code, hint)
		}
	}

	// 1. Archived without --compact: archiving again says "restore it first", naming the file.
	a1, err := b.svc.Archive(ctx, b.sid, session.ArchiveOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.svc.Archive(ctx, b.sid, session.ArchiveOptions{Dir: dir, Compact: true})
	refused(err, "INVALID_SESSION_STATE", "restore it first (sessiond session restore "+a1.Name)
	_, err = b.svc.Heartbeat(ctx, b.sid)
	refused(err, "INVALID_SESSION_STATE", "restore it first")
	_, err = b.svc.Warm(ctx, b.sid, session.WarmOptions{})
	refused(err, "INVALID_SESSION_STATE", "restore it first")
	// Following it: restore reactivates the session from the log still in the store.
	c.Add(time.Minute)
	rr, err := b.svc.Restore(ctx, dir, session.RestoreRequest{Name: a1.Name})
	if err != nil || rr.How != session.RestoredReactivated || rr.Replaced || rr.Events != len(before) {
		t.Fatalf("restore of an archived, uncompacted session = %+v, %v", rr, err)
	}
	r := rr.Session.Record
	if r.Status != "paused" || r.UpdatedByGate.Get() != "handoff" || r.LastHeartbeatAt.Get() != "2026-03-01T12:01:00.000Z" || r.ArchivePath.Get() != a1.Path {
		t.Errorf("reactivated record = %+v", r)
	}
	if lc, _ := b.st.Lifecycle(ctx, b.sid); lc.RestoredFrom != a1.Checksum || lc.LastArchiveName != a1.Name || lc.CompactedThrough != nil {
		t.Errorf("lifecycle after reactivation = %+v", lc)
	}
	if after, _ := b.st.ReadEvents(ctx, b.sid, -1, 0); !cmp.Equal(before, after) {
		t.Errorf("reactivation changed the log")
	}
	if _, err := b.svc.Heartbeat(ctx, b.sid); err != nil {
		t.Errorf("heartbeat after reactivation: %v", err)
	}

	// 2. Live again: restoring is a conflict that says to work on it, or to use another store.
	_, err = b.svc.Restore(ctx, dir, session.RestoreRequest{Name: a1.Name})
	refused(err, contract.CodeRestoreConflict, "restore it into another data directory")
	st2, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	if rr2, err := session.New(st2, session.Options{Clock: session.ClockFunc(c.Now)}).Restore(ctx, dir, session.RestoreRequest{Name: a1.Name}); err != nil || rr2.How != session.RestoredNew {
		t.Errorf("restore into another data directory = %+v, %v", rr2, err)
	}

	// 3. Archived with --compact, then restored over the compacted row.
	c.Add(time.Minute)
	a2, err := b.svc.Archive(ctx, b.sid, session.ArchiveOptions{Dir: dir, Compact: true})
	if err != nil || a2.Compacted != int64(len(before)) {
		t.Fatalf("archive --compact after reactivation = %+v, %v", a2, err)
	}
	_, err = b.svc.Archive(ctx, b.sid, session.ArchiveOptions{Dir: dir})
	refused(err, "INVALID_SESSION_STATE", "sessiond session restore "+a2.Name)
	rr, err = b.svc.Restore(ctx, dir, session.RestoreRequest{Name: a2.Name})
	if err != nil || rr.How != session.RestoredOverCompacted || !rr.Replaced {
		t.Fatalf("restore over the compacted row = %+v, %v", rr, err)
	}
	if got, _ := b.svc.Transcript(ctx, b.sid); !cmp.Equal(wantT, got) {
		t.Errorf("transcript after restoring over the compacted row differs")
	}
	status("paused")

	// 4. A closed session: archive, restore (it stays closed), and the hints say so.
	st := "closed"
	b.st.UpdateSession(ctx, b.sid, func(s *store.Session) error { s.Record.Status = st; return nil })
	c.Add(time.Minute)
	a3, err := b.svc.Archive(ctx, b.sid, session.ArchiveOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if rr, err := b.svc.Restore(ctx, dir, session.RestoreRequest{Name: a3.Name}); err != nil || rr.Session.Record.Status != "closed" {
		t.Fatalf("restore of an archived closed session = %+v, %v", rr, err)
	}
	_, err = b.svc.Heartbeat(ctx, b.sid)
	refused(err, "INVALID_SESSION_STATE", "create a new session to go on")
}

// TestRestoreRefusesAnArchiveOfAnotherCopy checks that reactivation only accepts an archive of
// the store's own session, and that the refusal names the archive that works.
func TestRestoreRefusesAnArchiveOfAnotherCopy(t *testing.T) {
	b, c, dir := archiveSetup(t)
	ctx := context.Background()
	// Another store has a session with the same id and another log; its archive is copied here.
	other := setup(t)
	other.st.UpdateSession(ctx, other.sid, func(s *store.Session) error { s.Record.Project = contract.Some("demo"); return nil })
	other.append(t, other.event(t, "terminal", "", `{"terminalId":"x","stream":"stdout","chunk":"elsewhere"}`))
	c.Add(time.Minute)
	oa, err := session.New(other.st, session.Options{Clock: session.ClockFunc(c.Now)}).Archive(ctx, other.sid, session.ArchiveOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(oa.Path)
	c.Add(time.Minute)
	own, err := b.svc.Archive(ctx, b.sid, session.ArchiveOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.SaveArchive(dir, writeTemp(t, data)); err != nil {
		t.Fatal(err)
	}
	_, err = b.svc.Restore(ctx, dir, session.RestoreRequest{Name: oa.Name})
	var rej *session.RejectError
	if !errors.As(err, &rej) || rej.Code != contract.CodeRestoreConflict || !strings.Contains(rej.Message, "Restore its latest archive "+own.Name) {
		t.Fatalf("restore of another copy's archive: %v", err)
	}
	if rr, err := b.svc.Restore(ctx, dir, session.RestoreRequest{Name: own.Name}); err != nil || rr.How != session.RestoredReactivated {
		t.Errorf("restore of the archive the hint names = %+v, %v", rr, err)
	}
}

// hookStore is a store that runs hook (once) when a method named in on is called, before the
// call: it plays another instance changing the session at that point.
type hookStore struct {
	store.Store
	on   string
	hook func()
}

func (h *hookStore) fire(name string) {
	if h.on == name && h.hook != nil {
		f := h.hook
		h.hook = nil
		f()
	}
}

// compactNow, archiveFirst and restoreByName are steps of TestConcurrentChangesSayToTryAgain.
func compactNow(b *bundle) func() {
	return func() {
		last, _ := b.st.LastSequence(context.Background(), b.sid)
		b.st.CompactEvents(context.Background(), b.sid, last)
	}
}

func archiveFirst(t *testing.T, svc *session.Service, dir string) string {
	res, err := svc.Archive(context.Background(), "S-t", session.ArchiveOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return res.Name
}

func restoreByName(svc *session.Service, dir, name string) error {
	_, err := svc.Restore(context.Background(), dir, session.RestoreRequest{Name: name})
	return err
}

func (h *hookStore) Runs(ctx context.Context, id string) ([]contract.Run, error) {
	h.fire("Runs")
	return h.Store.Runs(ctx, id)
}

func (h *hookStore) ReadEvents(ctx context.Context, id string, after int64, limit int) ([]store.StoredEvent, error) {
	if limit == 1 {
		h.fire("before ReadEvents/1")
		defer h.fire("after ReadEvents/1")
	}
	return h.Store.ReadEvents(ctx, id, after, limit)
}

// TestConcurrentChangesSayToTryAgain makes the session change while archive and restore work
// on it (as another instance would): each answers SESSION_MOVED saying to try again, and trying
// again works.
func TestConcurrentChangesSayToTryAgain(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// on and change: the store call before which the session changes, and the change.
		on     string
		change func(b *bundle) func()
		// prepare runs before the first attempt; try is the attempt (and the retry).
		prepare func(t *testing.T, svc *session.Service, dir string) string
		try     func(svc *session.Service, dir, name string) error
		hint    string
	}{
		{
			name: "an append lands while the archive file is written", on: "Runs",
			change: func(b *bundle) func() {
				return func() { b.append(t, b.event(t, "terminal", "", `{"terminalId":"x","stream":"stdout","chunk":"late"}`)) }
			},
			try: func(svc *session.Service, dir, _ string) error {
				_, err := svc.Archive(ctx, "S-t", session.ArchiveOptions{Dir: dir})
				return err
			},
			hint: "archive it again",
		},
		{
			name: "another instance compacts before restore reads the log", on: "before ReadEvents/1",
			change:  compactNow,
			prepare: archiveFirst,
			try:     restoreByName,
			hint:    "restore it again",
		},
		{
			name: "another instance compacts while restore reactivates", on: "after ReadEvents/1",
			change: compactNow, prepare: archiveFirst, try: restoreByName,
			hint: "restore it again",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, c, dir := archiveSetup(t)
			hs := &hookStore{Store: b.st, on: tc.on}
			svc := session.New(hs, session.Options{Clock: session.ClockFunc(c.Now)})
			name := ""
			if tc.prepare != nil {
				name = tc.prepare(t, svc, dir)
			}
			hs.hook = tc.change(b)
			c.Add(time.Second)
			err := tc.try(svc, dir, name)
			var rej *session.RejectError
			if !errors.As(err, &rej) || rej.Code != contract.CodeSessionMoved || !strings.Contains(rej.Message, tc.hint) {
				t.Fatalf("first attempt: %v; want %s saying %q", err, contract.CodeSessionMoved, tc.hint)
			}
			c.Add(time.Second)
			if err := tc.try(svc, dir, name); err != nil {
				t.Fatalf("trying again as the hint says: %v", err)
			}
		})
	}
}

// writeTemp writes data to a file of its own and returns its path (an upload, for SaveArchive).
func writeTemp(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "upload.json")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRestoreWakesWaitingClaims: a claim waiting on the service when a restore brings back a
// claimable run gets it at once, not at the end of its wait.
func TestRestoreWakesWaitingClaims(t *testing.T) {
	b, c := lifecycleSetup(t)
	ctx := context.Background()
	b.append(t, b.event(t, "status", `"runId":"rq","sourceMessageId":"u1"`, `{"status":"queued"}`))
	res, err := b.svc.Archive(ctx, b.sid, session.ArchiveOptions{Dir: filepath.Join(t.TempDir(), "archives")})
	if err != nil {
		t.Fatalf("Archive: %v", err)
	}
	data, err := os.ReadFile(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	// Another host: the claim waits there before the archive is restored.
	st2, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	svc2 := session.New(st2, session.Options{Clock: session.ClockFunc(c.Now)})
	defer svc2.Close()
	dir2 := t.TempDir()
	info, err := svc2.SaveArchive(dir2, writeTemp(t, data))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		cl, err := svc2.Claim(ctx, store.ClaimFilter{}, 30*time.Second, time.Minute)
		switch {
		case err != nil:
			got <- err.Error()
		case cl == nil:
			got <- "nothing"
		default:
			got <- cl.Run.RunID
		}
	}()
	time.Sleep(200 * time.Millisecond) // the claim is waiting
	start := time.Now()
	if _, err := svc2.Restore(ctx, dir2, session.RestoreRequest{Name: info.Name}); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	select {
	case r := <-got:
		if r != "rq" {
			t.Fatalf("the waiting claim got %q, want run rq", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the waiting claim was not woken by the restore within 10 s (restored %v ago)", time.Since(start))
	}
}
