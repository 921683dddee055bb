package server_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func apiCode(err error) contract.ErrorCode {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

func TestLifecycleEndpoints(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	b := setup(t, server.Options{}, session.Options{Clock: session.ClockFunc(clk.Now), ArchiveDir: filepath.Join(t.TempDir(), "archives")})
	b.createSession(t, "S-life")

	// An append is a heartbeat.
	clk.Add(time.Minute)
	resp := b.do(t, "POST", "/v1/sessions/S-life/events", "application/json",
		`{"contract":"AgentSessionEvent","eventId":"e1","sessionId":"S-life","sequence":0,"idempotencyKey":"k1","occurredAt":"2026-03-01T12:01:00Z","eventType":"message","payload":{"messageId":"u1","role":"user","operation":"append","parts":["hi"]}}`)
	if resp.status != http.StatusOK && resp.status != http.StatusCreated {
		t.Fatalf("append: %d %s", resp.status, resp.body)
	}
	s, err := b.cl.GetSession(ctx, "S-life")
	if err != nil || s.Record.LastHeartbeatAt.Get() != "2026-03-01T12:01:00.000Z" {
		t.Fatalf("after an append: %+v, %v", s, err)
	}
	// Silence past the TTL: the sweep marks it stale; a heartbeat brings it back.
	clk.Add(11 * time.Minute)
	if res, err := b.cl.Sweep(ctx); err != nil || res.Stale != 1 {
		t.Fatalf("Sweep = %+v, %v", res, err)
	}
	if st, _ := b.cl.Status(ctx, "S-life"); !st.Stale || st.Status != "stale" {
		t.Errorf("status after the sweep = %+v", st)
	}
	if s, err := b.cl.Heartbeat(ctx, "S-life"); err != nil || s.Record.Status != "running" {
		t.Errorf("Heartbeat = %+v, %v", s, err)
	}
	// Warm: the resource and status show when the window closes.
	w, err := b.cl.Warm(ctx, "S-life", api.WarmRequest{Hours: 2})
	if err != nil || w.ClosesAt != "2026-03-01T14:12:00.000Z" {
		t.Fatalf("Warm = %+v, %v", w, err)
	}
	if s, _ := b.cl.GetSession(ctx, "S-life"); s.Lifecycle.WindowClosesAt != w.ClosesAt {
		t.Errorf("resource lifecycle = %+v", s.Lifecycle)
	}
	if _, err := b.cl.Warm(ctx, "S-life", api.WarmRequest{Hours: -1}); apiCode(err) != api.CodeMalformed {
		t.Errorf("Warm with negative hours: %v", err)
	}
	clk.Add(100 * time.Minute)
	st0, _ := b.cl.Status(ctx, "S-life")
	if st0.Recommendation != "archive_now" {
		t.Errorf("status with 32 min left in the window = %+v", st0)
	}
	// The session resource (one and in the list) carries the same advice.
	if s, _ := b.cl.GetSession(ctx, "S-life"); s.Advice.Recommendation != st0.Recommendation || strings.Join(s.Advice.Reasons, "|") != strings.Join(st0.Reasons, "|") || s.Advice.Stale != st0.Stale {
		t.Errorf("resource advice = %+v, status = %+v", s.Advice, st0)
	}
	if l, _ := b.cl.ListSessions(ctx, url.Values{}); len(l.Sessions) != 1 || l.Sessions[0].Advice.Recommendation != "archive_now" {
		t.Errorf("list advice = %+v", l)
	}
	a, err := b.cl.Assess(ctx, "S-life", session.AssessRequest{Task: "- a\n- b"})
	if err != nil || a.Sufficient || len(a.Phases) != 1 {
		t.Errorf("Assess = %+v, %v", a, err)
	}
	// PATCH cannot archive; archive does.
	st := "archived"
	if _, err := b.cl.PatchSession(ctx, "S-life", api.PatchSessionRequest{Status: &st, UpdatedByGate: "user"}); apiCode(err) != api.CodeInvalidState || !strings.Contains(err.Error(), "archive") {
		t.Errorf("PATCH to archived: %v", err)
	}
	ar, err := b.cl.Archive(ctx, "S-life", api.ArchiveRequest{Note: session.Note{Done: "greeted"}, Compact: true})
	if err != nil || ar.Session.Record.Status != "archived" || ar.Compacted != 1 || ar.Session.Lifecycle.LastArchiveName != ar.Archive.Name {
		t.Fatalf("Archive = %+v, %v", ar, err)
	}
	list, err := b.cl.Archives(ctx, "-")
	if err != nil || len(list.Archives) != 1 {
		t.Fatalf("Archives = %+v, %v", list, err)
	}
	// Restore in place (the log was compacted), then again: a conflict.
	rr, err := b.cl.Restore(ctx, api.RestoreRequest{Name: ar.Archive.Name})
	if err != nil || !rr.Replaced || rr.Session.Record.Status != "paused" || rr.Session.LastSequence != 0 {
		t.Fatalf("Restore = %+v, %v", rr, err)
	}
	if _, err := b.cl.Restore(ctx, api.RestoreRequest{Name: ar.Archive.Name}); apiCode(err) != api.CodeRestoreConflict {
		t.Errorf("second Restore: %v", err)
	}
	if _, err := b.cl.Restore(ctx, api.RestoreRequest{Name: "../x.json"}); apiCode(err) != api.CodeArchiveNotFound {
		t.Errorf("Restore of a bad name: %v", err)
	}
	// Another server: upload the file, restore it; a tampered upload is refused.
	data, _ := os.ReadFile(ar.Archive.Path)
	b2 := setup(t, server.Options{}, session.Options{Clock: session.ClockFunc(clk.Now), ArchiveDir: t.TempDir()})
	if _, err := b2.cl.UploadArchive(ctx, data[:len(data)-10]); apiCode(err) != api.CodeArchiveInvalid {
		t.Errorf("truncated upload: %v", err)
	}
	if _, err := b2.cl.UploadArchive(ctx, data); err != nil {
		t.Fatal(err)
	}
	rr2, err := b2.cl.Restore(ctx, api.RestoreRequest{Project: "-"})
	if err != nil || rr2.Events != 1 {
		t.Fatalf("Restore on the other server = %+v, %v", rr2, err)
	}
	t1, _ := b.cl.Transcript(ctx, "S-life")
	t2, _ := b2.cl.Transcript(ctx, "S-life")
	if len(t1.Messages) != 1 || len(t2.Messages) != 1 || string(t1.Messages[0].Parts[0]) != string(t2.Messages[0].Parts[0]) {
		t.Errorf("transcripts differ: %+v vs %+v", t1, t2)
	}
	// No archive directory: a clear error.
	b3 := setup(t, server.Options{})
	if _, err := b3.cl.Archives(ctx, ""); apiCode(err) != api.CodeNotConfigured {
		t.Errorf("Archives without a directory: %v", err)
	}
}

func TestBackgroundSweeper(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{t: time.Now()}
	b := setup(t, server.Options{}, session.Options{Clock: session.ClockFunc(clk.Now), StaleAfter: time.Minute, SweepInterval: 5 * time.Millisecond})
	b.createSession(t, "S-bg")
	clk.Add(2 * time.Minute)
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, err := b.cl.GetSession(ctx, "S-bg")
		if err != nil {
			t.Fatal(err)
		}
		if s.Record.Status == "stale" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the background sweeper did not mark the session stale: %s", s.Record.Status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
