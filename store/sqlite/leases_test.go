package sqlite

import (
	"context"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/store"
)

// TestClaimQueryPlan: a claim reads the claim indexes in queue order, and the lease expirer
// the expiry index (no scan of the runs, no sort), so their cost does not grow with the runs in
// the store.
func TestClaimQueryPlan(t *testing.T) {
	st, err := Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	type query struct {
		q    string
		args []any
	}
	claim := func(f store.ClaimFilter) query { q, args := claimQuery(f); return query{q, args} }
	for _, tc := range []struct {
		name  string
		query query
		index string
	}{
		{"no filter", claim(store.ClaimFilter{}), "runs_claim "},
		{"project", claim(store.ClaimFilter{Project: "p"}), "runs_claim_project"},
		{"agent", claim(store.ClaimFilter{AgentID: "a"}), "runs_claim_agent"},
		{"role and capabilities", claim(store.ClaimFilter{Role: "r", Capabilities: []string{"tools"}}), "runs_claim "},
		{"expired leases", query{qExpiredLeases, []any{int64(0), 10}}, "runs_lease_expiry"},
	} {
		all := queryPlan(t, st, tc.query.q, tc.query.args...) + " "
		if !strings.Contains(all, "INDEX "+tc.index) || strings.Contains(all, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want the index %s read in order", tc.name, all, strings.TrimSpace(tc.index))
		}
	}
}
