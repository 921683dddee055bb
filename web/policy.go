package web

import "github.com/sessiond/sessiond/contract"

// Policy is the policy table as the page reads it from /ui/policy.json: for each command type,
// what the server requires before it applies it. It is built from [contract.PolicyOf], the
// table the server judges commands by, so the page can offer a control exactly when the
// server would accept it (the server still decides: a refused command shows its message).
type Policy struct {
	// Commands maps each command type ([contract.CommandTypes]) to its row.
	Commands map[string]CommandRule `json:"commands"`
	// TerminalStatuses are the run statuses a run ends in.
	TerminalStatuses []string `json:"terminalStatuses"`
	// CapabilityDefaults is each capability's value when a snapshot leaves it out.
	CapabilityDefaults map[string]bool `json:"capabilityDefaults"`
}

// CommandRule is one row of [Policy].
type CommandRule struct {
	// Capability is the snapshot capability the command needs; empty when none.
	Capability string `json:"capability"`
	// AllowedStatuses are the run statuses the command is allowed in; null means any.
	AllowedStatuses []string `json:"allowedStatuses"`
	// NeedsRunID says the command carries the run it is about.
	NeedsRunID bool `json:"needsRunId"`
	// NeedsActiveRun says the target run must not have ended.
	NeedsActiveRun bool `json:"needsActiveRun"`
	// Sequence is the sequence rule (match-current or target-run).
	Sequence string `json:"sequence"`
}

// PolicyTable returns the policy table built from contract.PolicyOf.
func PolicyTable() Policy {
	p := Policy{Commands: map[string]CommandRule{}, CapabilityDefaults: map[string]bool{}}
	for _, ct := range contract.CommandTypes {
		row, ok := contract.PolicyOf(ct)
		if !ok {
			continue
		}
		p.Commands[ct] = CommandRule{Capability: row.Capability, AllowedStatuses: row.AllowedStatuses,
			NeedsRunID: row.NeedsRunID, NeedsActiveRun: row.NeedsActiveRun, Sequence: row.Sequence}
	}
	for _, s := range contract.RunStatuses {
		if contract.IsTerminal(s) {
			p.TerminalStatuses = append(p.TerminalStatuses, s)
		}
	}
	for _, name := range contract.CapabilityNames {
		p.CapabilityDefaults[name] = contract.Capabilities{}.Has(name)
	}
	return p
}
