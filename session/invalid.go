package session

import (
	"fmt"

	"github.com/sessiond/sessiond/contract"
)

// InvalidError is a request document that breaks the contract: What names the document
// ("session", "patch", "session record") and each problem names the field (a JSON Pointer)
// and the rule it breaks. A problem of the JSON layer means the document is not acceptable
// JSON at all; the others mean it breaks a schema or a rule.
type InvalidError struct {
	What     string
	Problems []contract.Problem
}

// Error says what was refused and how many problems it has.
func (e *InvalidError) Error() string {
	return fmt.Sprintf("%s: %d problem(s) found", e.What, len(e.Problems))
}

// ErrorCode is the code of the refused document (contract.ProblemsCode): MALFORMED_REQUEST
// (or TOO_LARGE) when it is not acceptable JSON, else CONTRACT_VIOLATION.
func (e *InvalidError) ErrorCode() contract.ErrorCode { return contract.ProblemsCode(e.Problems) }
