package server

import (
	"fmt"
	"testing"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/session"
)

// TestStoreErrorInvalidMultitask: an unknown multitask strategy the service refuses (a session
// default the store holds) is the client-facing 400 the handler's own check answers, not a 500.
func TestStoreErrorInvalidMultitask(t *testing.T) {
	e := apiError(fmt.Errorf("%w: %q", session.ErrInvalidMultitask, "later"), "s1")
	if e.Code != api.CodeMalformed {
		t.Fatalf("code %q, want %q (%s)", e.Code, api.CodeMalformed, e.Message)
	}
}
