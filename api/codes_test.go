package api

import (
	"net/http"
	"testing"

	"github.com/sessiond/sessiond/contract"
)

// TestEveryCodeExplained: every code the API can answer has an HTTP status and a meaning, every
// command error code of the contract and every API code of contract/codes.go is one of them,
// and the codes that end an event stream are not (they come inside a 200 stream). A new code
// without a status or a meaning fails here.
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
	cases := []struct {
		name       string
		codes      []contract.ErrorCode
		wantStatus bool
	}{
		{"command error code", contract.ErrorCodes, true},
		{"API error code", contract.APIErrorCodes, true},
		{"stream error code", contract.StreamErrorCodes, false},
		{"run error code", contract.RunErrorCodes, false},
	}
	n := 0
	for _, tc := range cases {
		for _, c := range tc.codes {
			if _, ok := statusByCode[c]; ok != tc.wantStatus {
				t.Errorf("%s %s: has an HTTP status in statusByCode = %v, want %v", tc.name, c, ok, tc.wantStatus)
			}
			if tc.wantStatus {
				n++
			}
		}
	}
	if n != len(statusByCode) {
		t.Errorf("statusByCode has %d codes, contract/codes.go lists %d answered ones", len(statusByCode), n)
	}
	if got := CodeMeaning("NO_SUCH_CODE"); got != "" {
		t.Errorf("CodeMeaning of an unknown code = %q, want empty", got)
	}
	if got := HTTPStatus("NO_SUCH_CODE"); got != http.StatusInternalServerError {
		t.Errorf("HTTPStatus of an unknown code = %d, want 500", got)
	}
}

// TestRetryableCodes: a code is retryable (contract.RetryFor) exactly when its status says the
// refusal was about the server's state and not the request's (408, 429, 503, 507), INTERNAL is
// never retryable, and every availability code is.
func TestRetryableCodes(t *testing.T) {
	serverState := map[int]bool{
		http.StatusRequestTimeout: true, http.StatusTooManyRequests: true,
		http.StatusServiceUnavailable: true, http.StatusInsufficientStorage: true,
	}
	for _, c := range Codes() {
		st := HTTPStatus(c)
		if got := contract.Retryable(c); got != serverState[st] && c != contract.CodeCommandExecutionFailed {
			t.Errorf("code %s (HTTP %d): retryable %v, want %v", c, st, got, serverState[st])
		}
	}
	for _, c := range []contract.ErrorCode{contract.CodeStoreFull, contract.CodeStoreUnavailable, contract.CodeCommitUnknown, contract.CodeStoreUnwritable} {
		if r := contract.RetryFor(c); !r.Retryable || r.AfterSeconds <= 0 {
			t.Errorf("availability code %s: %+v, want retryable with a Retry-After", c, r)
		}
	}
	if contract.Retryable(contract.CodeInternal) {
		t.Error("INTERNAL is retryable")
	}
}
