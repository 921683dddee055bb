package server

import (
	"fmt"
	"github.com/sessiond/sessiond/contract"
	"testing"

	"github.com/sessiond/sessiond/session"
)

// TestStoreErrorInvalidMultitask: an unknown multitask strategy the service refuses (a session
// default the store holds) is the client-facing 400 the handler's own check answers, not a 500.
func TestStoreErrorInvalidMultitask(t *testing.T) {
	e := apiError(fmt.Errorf("%w: %q", session.ErrInvalidMultitask, "later"), "s1")
	if e.Code != contract.CodeMalformed {
		t.Fatalf("code %q, want %q (%s)", e.Code, contract.CodeMalformed, e.Message)
	}
}
