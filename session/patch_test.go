package session

import (
	"strings"
	"testing"

	"github.com/sessiond/sessiond/contract"
)

// TestEveryServerChangeHasAHint checks that each mechanism the record status table names
// has the text a PATCH refusal shows for it, and that the refusal's hint names it.
func TestEveryServerChangeHasAHint(t *testing.T) {
	for _, tr := range contract.RecordTransitions() {
		if tr.Server == "" {
			continue
		}
		what := serverChanges[tr.Server]
		if what == "" {
			t.Errorf("%s → %s is made by %q, which serverChanges does not describe", tr.From, tr.To, tr.Server)
			continue
		}
		if tr.Patch {
			continue // PATCH makes it too: no refusal, no hint
		}
		if h := patchHint(tr.From, tr.To); !strings.Contains(h, what) {
			t.Errorf("patchHint(%s, %s) = %q, want it to name %q", tr.From, tr.To, h, what)
		}
	}
}
