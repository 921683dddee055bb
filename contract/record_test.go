package contract

import (
	"slices"
	"testing"
)

// TestRecordTransitions checks every pair of session record statuses (and an unknown one)
// against the table of docs/lifecycle.md, written out here cell by cell: "PATCH" where a
// client may make the change, the server's mechanism where the server makes it, both for
// stale → running, and "" for a refused change.
func TestRecordTransitions(t *testing.T) {
	const (
		sweeper = "sweeper"
		archive = "archive"
		revive  = "heartbeat"
		restore = "restore"
	)
	type cell struct {
		patch  bool
		server string
	}
	// want[from][to]; a missing cell is a refused change.
	want := map[string]map[string]cell{
		"running":  {"paused": {patch: true}, "closed": {patch: true}, "stale": {server: sweeper}, "archived": {server: archive}},
		"paused":   {"running": {patch: true}, "closed": {patch: true}, "stale": {server: sweeper}, "archived": {server: archive}},
		"stale":    {"running": {patch: true, server: revive}, "closed": {patch: true}, "archived": {server: archive}},
		"closed":   {"archived": {server: archive}},
		"archived": {"paused": {server: restore}},
	}
	statuses := append(slices.Clone(SessionStatuses), "unknown")
	for _, from := range statuses {
		for _, to := range statuses {
			c := want[from][to]
			wantPatch := c.patch || (from == to)
			if got := CanPatchStatus(from, to); got != wantPatch {
				t.Errorf("CanPatchStatus(%s, %s) = %v, want %v", from, to, got, wantPatch)
			}
			what, ok := ServerTransition(from, to)
			if what != c.server || ok != (c.server != "") {
				t.Errorf("ServerTransition(%s, %s) = %q, %v; want %q, %v", from, to, what, ok, c.server, c.server != "")
			}
		}
	}
	// Every row of the table is a cell above (no row for a status the contract does not have).
	for _, r := range RecordTransitions() {
		if c, ok := want[r.From][r.To]; !ok || c.patch != r.Patch || c.server != r.Server {
			t.Errorf("table row %+v is not in docs/lifecycle.md's table", r)
		}
	}
}

// TestPatchTargets checks the statuses a PATCH refusal lists, in the table's order.
func TestPatchTargets(t *testing.T) {
	for _, tc := range []struct {
		from string
		want []string
	}{
		{"running", []string{"paused", "closed"}},
		{"paused", []string{"running", "closed"}},
		{"stale", []string{"running", "closed"}},
		{"closed", nil},
		{"archived", nil},
		{"unknown", nil},
	} {
		if got := PatchTargets(tc.from); !slices.Equal(got, tc.want) {
			t.Errorf("PatchTargets(%s) = %v, want %v", tc.from, got, tc.want)
		}
	}
}
