package api

import (
	"net/http"
	"testing"

	"github.com/sessiond/sessiond/contract"
)

// TestEveryCodeExplained: every code the API can answer has an HTTP status and a meaning, and
// every command error code of the contract is one of them, so the reference page lists them
// all. A new code without a meaning fails here.
func TestEveryCodeExplained(t *testing.T) {
	for _, c := range Codes() {
		if CodeMeaning(c) == "" {
			t.Errorf("code %s has no meaning: add it to codeMeanings (api/codes.go) or to the contract's commandErrorMeanings", c)
		}
		if HTTPStatus(c) < 200 || HTTPStatus(c) > 599 {
			t.Errorf("code %s: HTTP status %d", c, HTTPStatus(c))
		}
	}
	for c := range codeMeanings {
		if _, ok := statusByCode[c]; !ok {
			t.Errorf("codeMeanings explains %s, which has no HTTP status in statusByCode", c)
		}
	}
	for _, c := range contract.ErrorCodes {
		if _, ok := statusByCode[c]; !ok {
			t.Errorf("command error code %s has no HTTP status in statusByCode", c)
		}
	}
	if got := CodeMeaning("NO_SUCH_CODE"); got != "" {
		t.Errorf("CodeMeaning of an unknown code = %q, want empty", got)
	}
	if got := HTTPStatus("NO_SUCH_CODE"); got != http.StatusInternalServerError {
		t.Errorf("HTTPStatus of an unknown code = %d, want 500", got)
	}
}
