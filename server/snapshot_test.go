package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store/sqlite"
)

// TestPatchSnapshotRejections checks that PATCH refuses a snapshot (or a field) the contract
// does not allow, naming each field and rule, and changes nothing.
func TestPatchSnapshotRejections(t *testing.T) {
	b := setup(t, server.Options{})
	b.createSession(t, "S-snap")
	before := b.do(t, "GET", "/v1/sessions/S-snap", "", "").body
	tests := []struct {
		name, body string
		status     int
		code       contract.ErrorCode
		problems   []string // path (rule)
	}{
		{"unknown field", `{"updated_by_gate":"user","colour":"red"}`, 422, api.CodeContractViolation, []string{"/colour (additionalProperties)"}},
		{"unknown capability", `{"updated_by_gate":"user","snapshot":{"mode":"work","modelId":"m","capabilities":{"flying":true}}}`, 422, api.CodeContractViolation,
			[]string{"/snapshot/capabilities/flying (additionalProperties)"}},
		{"capability not a boolean", `{"updated_by_gate":"user","snapshot":{"mode":"work","modelId":"m","capabilities":{"approval":"yes"}}}`, 422, api.CodeContractViolation,
			[]string{"/snapshot/capabilities/approval (type)"}},
		{"bad mode and blank model", `{"updated_by_gate":"user","snapshot":{"mode":"code","modelId":" ","capabilities":{}}}`, 422, api.CodeContractViolation,
			[]string{"/snapshot/mode (enum)", "/snapshot/modelId (notBlank)"}},
		{"missing capabilities", `{"updated_by_gate":"user","snapshot":{"mode":"chat","modelId":"m"}}`, 422, api.CodeContractViolation,
			[]string{"/snapshot/capabilities (required)"}},
		{"unknown snapshot field", `{"updated_by_gate":"user","snapshot":{"mode":"chat","modelId":"m","capabilities":{},"temperature":1}}`, 422, api.CodeContractViolation,
			[]string{"/snapshot/temperature (additionalProperties)"}},
		{"bad permission profile", `{"updated_by_gate":"user","snapshot":{"mode":"chat","modelId":"m","capabilities":{},"permissionProfile":"root"}}`, 422, api.CodeContractViolation,
			[]string{"/snapshot/permissionProfile (enum)"}},
		{"null snapshot", `{"updated_by_gate":"user","snapshot":null}`, 422, api.CodeContractViolation, []string{"/snapshot (type)"}},
		{"not an object", `[]`, 422, api.CodeContractViolation, []string{"/ (type)"}},
		{"duplicate key", `{"updated_by_gate":"user","updated_by_gate":"owner"}`, 400, api.CodeMalformed, []string{"/ (duplicateKey)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := b.do(t, "PATCH", "/v1/sessions/S-snap", "application/json", tc.body)
			if resp.status != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.status, tc.status, resp.body)
			}
			e := errorBody(t, resp.body)
			var got []string
			for _, d := range e.Details {
				p := d.Path
				if p == "" {
					p = "/"
				}
				got = append(got, fmt.Sprintf("%s (%s)", p, d.Rule))
			}
			if e.Code != tc.code || fmt.Sprint(got) != fmt.Sprint(tc.problems) {
				t.Errorf("got %s %q, want %s %q (%s)", e.Code, got, tc.code, tc.problems, resp.body)
			}
		})
	}
	if after := b.do(t, "GET", "/v1/sessions/S-snap", "", "").body; after != before {
		t.Errorf("refused PATCHes changed the session:\n%s\nwant\n%s", after, before)
	}
}

// TestPatchSnapshotIsDurableAndJudgesCommands enables a capability with PATCH: a command the
// old snapshot refused with CAPABILITY_UNAVAILABLE is then accepted, the record says who changed
// it and when, and the new snapshot survives a restart of the store.
func TestPatchSnapshotIsDurableAndJudgesCommands(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, st, server.Options{})
	ts := httptest.NewServer(validated(t, srv))
	b := &bundle{st: st, srv: srv, ts: ts, cl: client.New(ts.URL, ts.Client())}
	r := b.runtime(t, "S-cap", `{"tools":true}`) // the README tour's snapshot: no approval
	r.message("m1", "user", "clean up")
	r.status("r1", "m1", "running")
	r.emit("approval", `"runId":"r1"`, `{"approvalId":"a1","status":"requested","title":"Run rm?"}`)
	r.status("r1", "m1", "waiting_approval")

	status, res := b.command(t, "S-cap", "approval", "r1", "k1", r.last(), `{"approvalId":"a1","decision":"approved"}`, "")
	wantRejected(t, status, res, "CAPABILITY_UNAVAILABLE", 422)
	if !strings.Contains(res.Error.Message, "PATCH /v1/sessions/S-cap") {
		t.Errorf("the rejection does not say how to enable the capability: %s", res.Error.Message)
	}

	resp := b.do(t, "PATCH", "/v1/sessions/S-cap", "application/json",
		`{"updated_by_gate":"owner","snapshot":{"mode":"work","modelId":"model-2","capabilities":{"tools":true,"approval":true},"permissionProfile":"approval-required"}}`)
	if resp.status != http.StatusOK {
		t.Fatalf("PATCH snapshot: %d %s", resp.status, resp.body)
	}
	s, err := b.cl.GetSession(context.Background(), "S-cap")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Snapshot.Capabilities.Has("approval") || s.Snapshot.ModelID != "model-2" || s.Snapshot.PermissionProfile != "approval-required" ||
		s.Record.UpdatedByGate.Get() != "owner" || s.Record.UpdatedAt.Get() == "" || s.Record.Status != "running" {
		t.Errorf("session after PATCH = %+v", s)
	}
	if vm, err := b.cl.View(context.Background(), "S-cap"); err != nil || vm.Snapshot.ModelID != "model-2" {
		t.Errorf("view after PATCH: %+v, %v", vm, err)
	}

	status, res = b.command(t, "S-cap", "approval", "r1", "k2", r.last(), `{"approvalId":"a1","decision":"approved"}`, "")
	if status != http.StatusOK || res.Outcome != "accepted" {
		t.Fatalf("approval after enabling the capability: %d %+v (%+v)", status, res, res.Error)
	}

	// Durable: a new server over the reopened store serves the new snapshot.
	srv.Close()
	ts.Close()
	st.Close()
	st2, err := sqlite.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	srv2 := newServer(t, st2, server.Options{})
	defer srv2.Close()
	ts2 := httptest.NewServer(validated(t, srv2))
	defer ts2.Close()
	s2, err := client.New(ts2.URL, ts2.Client()).GetSession(context.Background(), "S-cap")
	if err != nil || s2.Snapshot.ModelID != "model-2" || !s2.Snapshot.Capabilities.Has("approval") {
		t.Errorf("snapshot after reopening the store: %+v, %v", s2, err)
	}
}

// TestPatchSnapshotOfAnArchivedSession checks that an archived session's snapshot cannot change
// (its archive keeps it), and that following the hint (restore, then PATCH) works.
func TestPatchSnapshotOfAnArchivedSession(t *testing.T) {
	b := setup(t, server.Options{}, session.Options{ArchiveDir: t.TempDir()})
	b.createSession(t, "S-arc")
	ctx := context.Background()
	ar, err := b.cl.Archive(ctx, "S-arc", api.ArchiveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	patch := `{"updated_by_gate":"user","snapshot":{"mode":"chat","modelId":"m","capabilities":{"approval":true}}}`
	resp := b.do(t, "PATCH", "/v1/sessions/S-arc", "application/json", patch)
	if e := errorBody(t, resp.body); resp.status != http.StatusConflict || e.Code != api.CodeInvalidState || !strings.Contains(e.Message, "restore it first") {
		t.Fatalf("PATCH snapshot of an archived session: %d %s", resp.status, resp.body)
	}
	if _, err := b.cl.Restore(ctx, api.RestoreRequest{Name: ar.Archive.Name}); err != nil {
		t.Fatalf("restore as the hint says: %v", err)
	}
	if resp := b.do(t, "PATCH", "/v1/sessions/S-arc", "application/json", patch); resp.status != http.StatusOK {
		t.Errorf("PATCH snapshot after restore: %d %s", resp.status, resp.body)
	}
}
