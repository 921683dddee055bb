package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
)

// readBody reads the whole request body within the size limit. A body whose length the
// request declares (within the limit) is read into one buffer of that size, not grown from
// 512 bytes by doubling as io.ReadAll does (a batch of 64 events, about 40 KB, took seven
// allocations and copies).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *api.Error) {
	var buf []byte
	if n := r.ContentLength; n > 0 && n <= s.opt.MaxBodyBytes {
		buf = make([]byte, 0, n+1) // +1: the read that meets the end needs no larger buffer
	}
	body, err := readAll(http.MaxBytesReader(w, r.Body, s.opt.MaxBodyBytes), buf)
	if err != nil {
		return nil, bodyError(err, "request body", "; split it into smaller requests")
	}
	return body, nil
}

// readAll reads rd to its end as io.ReadAll does, appending to buf (whose capacity is the
// first guess of the size; nil starts at 512 bytes).
func readAll(rd io.Reader, buf []byte) ([]byte, error) {
	if buf == nil {
		buf = make([]byte, 0, 512)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grow (by append's rule)
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// bodyError is the API error for a body that could not be read: over its limit, not arrived
// within the body timeout (serve.go sets the connection's read deadline), or cut off.
// tooLargeHint follows the over-the-limit message: what the client can do about it.
func bodyError(err error, what, tooLargeHint string) *api.Error {
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &mbe):
		return api.Errorf(api.CodeTooLarge, "%s is over the %d-byte limit%s", what, mbe.Limit, tooLargeHint)
	case errors.As(err, &ne) && ne.Timeout():
		return api.Errorf(api.CodeRequestTimeout, "%s: the body did not arrive in time (%v); nothing was written", what, err)
	}
	return api.Errorf(api.CodeMalformed, "read %s: %v", what, err)
}

// handleCreateSession creates a session from record fields and a snapshot.
func (s *Server) handleCreateSession(w http.ResponseWriter, r *http.Request) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if aerr := checkCreateProject(r, body); aerr != nil {
		writeError(w, aerr)
		return
	}
	d, err := s.svc.Create(r.Context(), body)
	if err != nil {
		writeError(w, serviceError(err, ""))
		return
	}
	w.Header().Set("Location", "/v1/sessions/"+d.Record.SessionID)
	writeJSON(w, http.StatusCreated, s.resourceOf(d))
}

// resourceOf is the session resource of a session's detail, with the advice of the status mode
// under the server's heartbeat TTL.
func (s *Server) resourceOf(d *session.Detail) api.Session {
	return api.Session{Record: d.Record, Snapshot: d.Snapshot, LastSequence: d.LastSequence,
		Lineage: d.Lineage, ActiveBranch: d.ActiveBranch, CurrentRun: d.CurrentRun, Lifecycle: d.Lifecycle,
		Advice: s.svc.Advise(d)}
}

// resource builds the session resource of a session a lifecycle operation returned.
func (s *Server) resource(ctx context.Context, sess *store.Session) api.Session {
	return s.resourceOf(s.svc.Detail(ctx, sess))
}

func (s *Server) handleGetSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	d, err := s.svc.Get(r.Context(), id)
	if err != nil {
		writeError(w, storeError(err, id))
		return
	}
	writeJSON(w, http.StatusOK, s.resourceOf(d))
}

func (s *Server) handleListSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, aerr := queryInt(r, "limit", 100, 1, 1000)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	f := store.ListFilter{Status: q.Get("status"), AgentID: q.Get("agent"), Project: q.Get("project"), After: q.Get("after"), Limit: int(limit)}
	if f.Project, aerr = projectFilter(r, f.Project); aerr != nil {
		writeError(w, aerr)
		return
	}
	if f.Status != "" && !slices.Contains(contract.SessionStatuses, f.Status) {
		writeError(w, api.Errorf(api.CodeMalformed, "status=%s is not one of %v", quote(f.Status), contract.SessionStatuses))
		return
	}
	list, next, err := s.svc.List(r.Context(), f)
	if err != nil {
		writeError(w, storeError(err, ""))
		return
	}
	out := api.SessionList{Sessions: make([]api.Session, 0, len(list)), Next: next}
	for _, d := range list {
		out.Sessions = append(out.Sessions, s.resourceOf(d))
	}
	writeJSONTagged(w, r, out)
}

// patchFields are the fields of a PATCH body, from api.PatchSessionRequest's JSON names.
var patchFields = func() []string {
	var out []string
	t := reflect.TypeFor[api.PatchSessionRequest]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out = append(out, name)
	}
	return out
}()

// checkPatch checks what the contract says about a PATCH body before it is decoded: acceptable
// JSON, an object, no unknown field, and a snapshot that passes the contract's snapshot schema.
// Each problem names the field (a JSON Pointer) and the rule.
func checkPatch(body []byte) []contract.Problem {
	v, err := contract.Parse(body, contract.Limits{})
	if err != nil {
		var se *contract.SyntaxError
		errors.As(err, &se)
		return []contract.Problem{{Path: se.Path, Rule: se.Rule, Layer: contract.LayerJSON, Message: se.Msg}}
	}
	if v.Kind != contract.KindObject {
		return []contract.Problem{{Rule: "type", Layer: contract.LayerSchema, Message: "must be an object with updated_by_gate and the fields to change"}}
	}
	var probs []contract.Problem
	for i := range v.Members {
		m := &v.Members[i]
		switch {
		case !slices.Contains(patchFields, m.Key):
			probs = append(probs, contract.Problem{Path: "/" + m.Key, Rule: "additionalProperties", Layer: contract.LayerSchema,
				Message: fmt.Sprintf("unknown field %q; allowed fields: %s", m.Key, strings.Join(patchFields, ", "))})
		case m.Key == "snapshot":
			var snap contract.Snapshot
			if err := contract.Decode(contract.KindSnapshot, m.Value.Raw, contract.Limits{}, &snap); err != nil {
				var ve *contract.ValidationError
				if !errors.As(err, &ve) {
					return []contract.Problem{{Path: "/snapshot", Rule: "type", Layer: contract.LayerSchema, Message: err.Error()}}
				}
				for _, p := range ve.Problems {
					p.Path = "/snapshot" + p.Path
					probs = append(probs, p)
				}
			}
		}
	}
	return probs
}

func (s *Server) handlePatchSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if probs := checkPatch(body); len(probs) > 0 {
		writeError(w, validationError("patch", probs))
		return
	}
	var req api.PatchSessionRequest
	if aerr := decodeStrict(body, &req); aerr != nil {
		writeError(w, aerr)
		return
	}
	d, err := s.svc.Patch(r.Context(), id, session.PatchRequest(req))
	if err != nil {
		writeError(w, serviceError(err, id))
		return
	}
	writeJSON(w, http.StatusOK, s.resourceOf(d))
}

func (s *Server) handleRuns(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	runs, err := s.svc.Runs(r.Context(), id)
	if err != nil {
		writeError(w, storeError(err, id))
		return
	}
	leases, err := s.svc.RunLeases(r.Context(), id)
	if err != nil {
		writeError(w, storeError(err, id))
		return
	}
	byRun := make(map[string]*store.RunLease, len(leases))
	for i := range leases {
		byRun[leases[i].RunID] = &leases[i]
	}
	out := api.RunList{Runs: make([]api.RunResource, len(runs))}
	for i, run := range runs {
		out.Runs[i] = runResource(run, byRun[run.RunID])
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	id, runID := r.PathValue("id"), r.PathValue("runId")
	run, err := s.svc.Run(r.Context(), id, runID)
	if err != nil {
		writeError(w, storeError(err, id))
		return
	}
	leases, err := s.svc.RunLeases(r.Context(), id)
	if err != nil {
		writeError(w, storeError(err, id))
		return
	}
	var rl *store.RunLease
	for i := range leases {
		if leases[i].RunID == runID {
			rl = &leases[i]
		}
	}
	writeJSON(w, http.StatusOK, runResource(run, rl))
}
