package client

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
)

// FuzzDecodeAppendResponse: whatever the body, decodeAppendResponse decodes it as
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
		var want api.AppendResponse
		werr := json.Unmarshal(data, &want)
		var fast api.AppendResponse
		if fastAppendResponse(data, &fast) {
			if werr != nil {
				t.Fatalf("fast path took %q, which json.Unmarshal refuses: %v", data, werr)
			}
			if !reflect.DeepEqual(fast, want) {
				t.Fatalf("fast path on %q: %+v, json.Unmarshal: %+v", data, fast, want)
			}
		}
		var got api.AppendResponse
		gerr := decodeAppendResponse(data, &got)
		if (gerr != nil) != (werr != nil) {
			t.Fatalf("decodeAppendResponse(%q) error %v, json.Unmarshal's %v", data, gerr, werr)
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeAppendResponse(%q) = %+v, json.Unmarshal: %+v", data, got, want)
		}
	})
}

// TestFastAppendResponseTakesTheServersShape: the body the server writes for an append
// (contract.Marshal of the response, and a newline) is read by the fast path, not left to
// json.Unmarshal.
func TestFastAppendResponseTakesTheServersShape(t *testing.T) {
	for _, tc := range []struct {
		name string
		want api.AppendResponse
	}{
		{"two results", api.AppendResponse{Results: []api.AppendResult{{EventID: "e-1", Sequence: 0, Status: api.Accepted},
			{EventID: "S-claude-x:12:3 <é>", Sequence: 17, Status: api.Duplicate}}, LastSequence: 17}},
		{"none", api.AppendResponse{Results: []api.AppendResult{}, LastSequence: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := contract.Marshal(tc.want)
			if err != nil {
				t.Fatal(err)
			}
			body = append(body, '\n')
			var got api.AppendResponse
			if !fastAppendResponse(body, &got) {
				t.Fatalf("fast path refused %s", body)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
