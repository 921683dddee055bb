package sqlite

import (
	"context"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/store"
)

// TestClaimQueryPlan: a claim reads the claim indexes in queue order (no scan of the runs, no
// sort), so its cost does not grow with the runs in the store.
func TestClaimQueryPlan(t *testing.T) {
	st, err := Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, tc := range []struct {
		name  string
		f     store.ClaimFilter
		index string
	}{
		{"no filter", store.ClaimFilter{}, "runs_claim "},
		{"project", store.ClaimFilter{Project: "p"}, "runs_claim_project"},
		{"agent", store.ClaimFilter{AgentID: "a"}, "runs_claim_agent"},
		{"role and capabilities", store.ClaimFilter{Role: "r", Capabilities: []string{"tools"}}, "runs_claim "},
	} {
		q, args := claimQuery(tc.f)
		rows, err := st.rdb.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		all := strings.Join(plan, "; ") + " "
		if !strings.Contains(all, "INDEX "+tc.index) || strings.Contains(all, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want the index %s read in order", tc.name, all, strings.TrimSpace(tc.index))
		}
	}
}
