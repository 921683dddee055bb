package api

import (
	"bytes"
	"encoding/json"
	"reflect"
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

// FuzzDecodeAppendResponse: whatever the body, DecodeJSON decodes it as
// json.Unmarshal does (the same value, or an error when json.Unmarshal gives one), and a body
// its fast path takes is one json.Unmarshal accepts.
func FuzzDecodeAppendResponse(f *testing.F) {
	for _, s := range []string{
		`{"results":[{"eventId":"e-1","sequence":0,"status":"accepted"},{"eventId":"e-2","sequence":17,"status":"duplicate"}],"lastSequence":17}` + "\n",
		`{"results":[],"lastSequence":-1}`,
		`{"results":[{"eventId":"é\u00e9","sequence":1,"status":"accepted"}],"lastSequence":1}`,
		`{"results":[{"eventId":"a\"b","sequence":1,"status":"accepted"}],"lastSequence":1}`,
		`{"results":[{"eventId":"a","sequence":01,"status":"accepted"}],"lastSequence":1}`,
		`{"results":[{"eventId":"a","sequence":-0,"status":"accepted"}],"lastSequence":1}`,
		`{"results":[{"eventId":"a","sequence":1e3,"status":"accepted"}],"lastSequence":1}`,
		`{"results":[{"eventId":"a","sequence":1.0,"status":"accepted"}],"lastSequence":1}`,
		`{"results":[{"eventId":"a","sequence":99999999999999999999,"status":"accepted"}],"lastSequence":1}`,
		`{"results":[{"eventId":"a","sequence":1,"status":"accepted"}],"lastSequence":1,"interrupted":{"runId":"r","results":[]}}`,
		`{"results":[{"eventId":"a","sequence":1,"status":"accepted"}],"lastSequence":1} x`,
		`{"results":[{"eventId":"a","sequence":1,"status":"accepted"},],"lastSequence":1}`,
		`{"results":[{"eventId":"` + "\xff" + `","sequence":1,"status":"accepted"}],"lastSequence":1}`,
		`{"lastSequence":3,"results":[]}`,
		` {"results":[],"lastSequence":2}`,
		`null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want AppendResponse
		werr := json.Unmarshal(data, &want)
		var fast AppendResponse
		if fastAppendResponse(data, &fast) {
			if werr != nil {
				t.Fatalf("fast path took %q, which json.Unmarshal refuses: %v", data, werr)
			}
			if !reflect.DeepEqual(fast, want) {
				t.Fatalf("fast path on %q: %+v, json.Unmarshal: %+v", data, fast, want)
			}
		}
		var got AppendResponse
		gerr := got.DecodeJSON(data)
		if (gerr != nil) != (werr != nil) {
			t.Fatalf("DecodeJSON(%q) error %v, json.Unmarshal's %v", data, gerr, werr)
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeJSON(%q) = %+v, json.Unmarshal: %+v", data, got, want)
		}
	})
}

// TestFastAppendResponseTakesTheServersShape: the body the server writes for an append
// (AppendJSON, and a newline) is read by the fast path, not left to json.Unmarshal.
func TestFastAppendResponseTakesTheServersShape(t *testing.T) {
	for _, tc := range []struct {
		name string
		want AppendResponse
	}{
		{"two results", AppendResponse{Results: []AppendResult{{EventID: "e-1", Sequence: 0, Status: Accepted},
			{EventID: "S-claude-x:12:3 <é>", Sequence: 17, Status: Duplicate}}, LastSequence: 17}},
		{"none", AppendResponse{Results: []AppendResult{}, LastSequence: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := append(tc.want.AppendJSON(nil), '\n')
			var got AppendResponse
			if !fastAppendResponse(body, &got) {
				t.Fatalf("fast path refused %s", body)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
