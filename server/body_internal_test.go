package server

import (
	"github.com/sessiond/sessiond/contract"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestReadBody: a body is read whole up to the limit whether its length is declared or not
// (chunked), and one byte over the limit is TOO_LARGE either way; a declared length is the
// buffer's size, so reading the body takes one allocation of it.
func TestReadBody(t *testing.T) {
	const limit = 1000
	s := &Server{opt: Options{MaxBodyBytes: limit}}
	for _, tc := range []struct {
		name     string
		size     int
		declared bool
		tooLarge bool
	}{
		{"empty, declared", 0, true, false},
		{"empty, chunked", 0, false, false},
		{"small, declared", 10, true, false},
		{"small, chunked", 10, false, false},
		{"over 512 bytes, declared", 700, true, false},
		{"over 512 bytes, chunked", 700, false, false},
		{"at the limit, declared", limit, true, false},
		{"at the limit, chunked", limit, false, false},
		{"over the limit, declared", limit + 1, true, true},
		{"over the limit, chunked", limit + 1, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := strings.Repeat("x", tc.size)
			var body io.Reader = strings.NewReader(want)
			if !tc.declared {
				body = io.MultiReader(body) // hides the length: httptest sends it as unknown (-1)
			}
			r := httptest.NewRequest("POST", "/", body)
			if !tc.declared {
				r.ContentLength = -1
			}
			got, aerr := s.readBody(httptest.NewRecorder(), r)
			if tc.tooLarge {
				if aerr == nil || aerr.Code != contract.CodeTooLarge {
					t.Fatalf("readBody of %d bytes: %v, want TOO_LARGE", tc.size, aerr)
				}
				return
			}
			if aerr != nil {
				t.Fatalf("readBody: %v", aerr)
			}
			if string(got) != want {
				t.Fatalf("readBody: got %d bytes, want %d", len(got), len(want))
			}
			if tc.declared && tc.size > 0 && cap(got) != tc.size+1 {
				t.Errorf("declared body of %d bytes read into a buffer of %d, want %d", tc.size, cap(got), tc.size+1)
			}
		})
	}
}
