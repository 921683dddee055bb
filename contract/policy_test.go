package contract

import (
	"slices"
	"testing"
)

// TestPolicyTable: every command type has a policy, and each policy names things that exist.
func TestPolicyTable(t *testing.T) {
	for _, ct := range CommandTypes {
		p, ok := PolicyOf(ct)
		if !ok {
			t.Errorf("%s has no policy", ct)
			continue
		}
		if p.Capability != "" && !slices.Contains(CapabilityNames, p.Capability) {
			t.Errorf("%s needs unknown capability %q", ct, p.Capability)
		}
		for _, s := range p.AllowedStatuses {
			if !slices.Contains(RunStatuses, s) {
				t.Errorf("%s allows unknown status %q", ct, s)
			}
		}
		if p.Sequence != SequenceMatchCurrent && p.Sequence != SequenceTargetRun {
			t.Errorf("%s: sequence rule %q", ct, p.Sequence)
		}
		if p.NeedsActiveRun && !p.NeedsRunID {
			t.Errorf("%s needs an active run but no runId", ct)
		}
		if p.Effect == "" {
			t.Errorf("%s: no effect described", ct)
		}
	}
	if len(commandPolicies) != len(CommandTypes) {
		t.Errorf("%d policies for %d command types", len(commandPolicies), len(CommandTypes))
	}
	if _, ok := PolicyOf("teleport"); ok {
		t.Error("an unknown command type has a policy")
	}
	p, _ := PolicyOf("stop")
	p.AllowedStatuses[0] = "changed"
	if q, _ := PolicyOf("stop"); q.AllowedStatuses[0] == "changed" {
		t.Error("PolicyOf shares AllowedStatuses with the table")
	}
}

// TestNeedsRunIDIsValidated: the validator's command-needs-run-id rule follows the policy
// table: a command without runId is refused exactly when its policy needs one.
func TestNeedsRunIDIsValidated(t *testing.T) {
	payloads := map[string]string{
		"stop": `{}`, "resume": `{}`, "retry": `{"sourceEventId":"e1"}`,
		"retry-summary":  `{"sourceEventId":"e1","sourceRunId":"r1"}`,
		"approval":       `{"approvalId":"a1","decision":"approved"}`,
		"fork":           `{"sourceThreadId":"S-1","sourceMessageId":"m1","sourceRunId":"r1","inheritance":{"messages":"exclude","attachments":"exclude","summaries":"exclude","toolResults":"exclude","codeChanges":"exclude"}}`,
		"edit-and-rerun": `{"sourceThreadId":"S-1","sourceMessageId":"m1","sourceRunId":"r1","replacementParts":["x"],"inheritance":{"messages":"exclude","attachments":"exclude","summaries":"exclude","toolResults":"exclude","codeChanges":"exclude"}}`,
		"steer":          `{"targetRunId":"r1","text":"go"}`,
	}
	for _, ct := range CommandTypes {
		doc := `{"contract":"AgentSessionCommand","commandId":"c1","sessionId":"S-1","idempotencyKey":"k1","expectedSequence":-1,"issuedAt":"2026-03-01T12:00:00Z","commandType":"` + ct + `","payload":` + payloads[ct] + `}`
		got := problemsOf(t, KindCommand, []byte(doc))
		p, _ := PolicyOf(ct)
		want := []string(nil)
		if p.NeedsRunID {
			want = []string{"/runId command-needs-run-id rule"}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s without runId: problems %q, want %q", ct, got, want)
		}
	}
}
