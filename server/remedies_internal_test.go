package server

import (
	"strings"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
)

// TestEveryServerChangeHasAHint checks that each mechanism the record status table names
// has the text a PATCH refusal shows for it, and that the refusal's remedy names it.
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
		r := session.Remedy{Kind: session.ServerTransition, From: tr.From, To: tr.To, By: tr.Server}
		if h := remedyText("S", r); !strings.Contains(h, what) {
			t.Errorf("the remedy of %s → %s = %q, want it to name %q", tr.From, tr.To, h, what)
		}
	}
}

// TestEveryRemedyIsWorded: every kind of remedy the domain gives has words at this edge.
func TestEveryRemedyIsWorded(t *testing.T) {
	for _, r := range []session.Remedy{
		{Kind: session.EnableCapability, Capability: "approval"},
		{Kind: session.NotLive, Status: contract.SessionStatusArchived},
		{Kind: session.NotLive, Status: contract.SessionStatusClosed},
		{Kind: session.ServerTransition, From: "running", To: "archived", By: contract.ByArchive},
		{Kind: session.RestoreArchive, Archive: "A.json", Then: "then archive it again"},
	} {
		if remedyText("S", r) == "" {
			t.Errorf("remedy %+v has no words", r)
		}
	}
	if got := remedyText("S", session.Remedy{}); got != "" {
		t.Errorf("no remedy is worded %q", got)
	}
}
