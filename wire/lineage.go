package wire

import (
	"github.com/sessiond/sessiond/contract"
)

// Lineage is a session's place in its tree of forks.
type Lineage struct {
	SessionID    string                 `json:"sessionId"`
	Lineage      *contract.Lineage      `json:"lineage"`
	ActiveBranch *contract.ActiveBranch `json:"activeBranch"`
	// Ancestors are the sessions it was forked from, nearest first, up to the root.
	Ancestors []LineageNode `json:"ancestors"`
	// Descendants are its forks, each with their own forks.
	Descendants []LineageNode `json:"descendants"`
	// Truncated is true when the tree was larger than the limits and was cut.
	Truncated bool `json:"truncated,omitempty"`
}

// LineageNode is one session in a lineage tree.
type LineageNode struct {
	SessionID string            `json:"sessionId"`
	Lineage   *contract.Lineage `json:"lineage,omitempty"`
	Children  []LineageNode     `json:"children,omitempty"`
}
