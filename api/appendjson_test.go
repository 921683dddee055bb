package api

import (
	"bytes"
	"testing"

	"github.com/sessiond/sessiond/contract"
)

// TestAppendJSONIsMarshal: AppendJSON writes what contract.Marshal writes, for every shape of
// the response.
func TestAppendJSONIsMarshal(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    AppendResponse
	}{
		{"one accepted", AppendResponse{Results: []AppendResult{{EventID: "ev-1", Sequence: 0, Status: Accepted}}, LastSequence: 0}},
		{"accepted and duplicate", AppendResponse{Results: []AppendResult{{EventID: "ev-1", Sequence: 7, Status: Duplicate}, {EventID: "ev-2", Sequence: 9007199254740991, Status: Accepted}}, LastSequence: 9007199254740991}},
		{"empty results", AppendResponse{Results: []AppendResult{}, LastSequence: -1}},
		{"nil results", AppendResponse{LastSequence: 3}},
		{"escapes", AppendResponse{Results: []AppendResult{{EventID: "a\"b\\c\n<>&\u2028\x01\xff", Sequence: 1, Status: Accepted}}, LastSequence: 1}},
		{"interrupted", AppendResponse{Results: []AppendResult{{EventID: "ev-3", Sequence: 5, Status: Accepted}}, LastSequence: 5,
			Interrupted: &Interruption{RunID: "run-\"1\"", Results: []AppendResult{{EventID: "ev-stop", Sequence: 4, Status: Accepted}}}}},
		{"interrupted without results", AppendResponse{Results: []AppendResult{}, LastSequence: 5, Interrupted: &Interruption{RunID: "r"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := contract.Marshal(tc.r)
			if err != nil {
				t.Fatal(err)
			}
			prefix := []byte("x")
			got := tc.r.AppendJSON(prefix)
			if !bytes.Equal(got[1:], want) || got[0] != 'x' {
				t.Errorf("AppendJSON = %s\nMarshal    = %s", got, want)
			}
		})
	}
}
