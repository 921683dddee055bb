package server

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
)

// writeJSONTagged writes v as writeJSON does, with an ETag computed from the body: a request
// whose If-None-Match names it is answered 304 Not Modified with no body, so a client that
// polls (the web UI's sessions list) transfers the list only when it changed. The tag is a
// digest of the bytes, so equal answers have equal tags across instances and restarts.
func writeJSONTagged(w http.ResponseWriter, r *http.Request, v any) {
	b, err := contract.Marshal(v)
	if err != nil {
		writeError(w, api.Errorf(api.CodeInternal, "encode response: %v", err))
		return
	}
	b = append(b, '\n')
	sum := sha256.Sum256(b)
	tag := `"` + hex.EncodeToString(sum[:16]) + `"`
	w.Header().Set("ETag", tag)
	w.Header().Set("Cache-Control", "no-cache")
	if api.ETagListed(r.Header.Get("If-None-Match"), tag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}
