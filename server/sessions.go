package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
)

// readBody reads the whole request body within the size limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *api.Error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opt.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, api.Errorf(api.CodeTooLarge, "request body is over the %d-byte limit; split it into smaller requests", mbe.Limit)
		}
		return nil, api.Errorf(api.CodeMalformed, "read request body: %v", err)
	}
	return body, nil
}

// serverSetFields are record fields only the server writes.
var serverSetFields = []string{"schema_version", "status", "started_at", "updated_at", "last_heartbeat_at", "closed_at", "archive_path"}

func newSessionID() string {
	var b [8]byte
	rand.Read(b[:])
	return "S-" + hex.EncodeToString(b[:])
}

// handleCreateSession creates a session from record fields and a snapshot.
func (s *Server) handleCreateSession(w http.ResponseWriter, r *http.Request) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	sess, aerr := s.buildSession(body)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if err := s.st.CreateSession(r.Context(), sess); err != nil {
		writeError(w, storeError(err, sess.Record.SessionID))
		return
	}
	w.Header().Set("Location", "/v1/sessions/"+sess.Record.SessionID)
	writeJSON(w, http.StatusCreated, s.resource(r.Context(), sess))
}

// buildSession validates a create request and returns the session to store. The record is
// composed from the caller's fields plus the server's (schema_version, status, timestamps) and
// validated against the session record schema, the snapshot against its own.
func (s *Server) buildSession(body []byte) (*store.Session, *api.Error) {
	v, err := contract.Parse(body, contract.Limits{})
	if err != nil {
		var se *contract.SyntaxError
		errors.As(err, &se)
		return nil, validationError("request body", []contract.Problem{{Path: se.Path, Rule: se.Rule, Layer: contract.LayerJSON, Message: se.Msg}})
	}
	if v.Kind != contract.KindObject {
		return nil, validationError("request body", []contract.Problem{{Rule: "type", Layer: contract.LayerSchema, Message: "must be an object with the session record fields and a snapshot"}})
	}
	var probs []contract.Problem
	ts := now(s)
	rec := []byte(fmt.Sprintf(`{"schema_version":1,"status":"running","started_at":%q,"updated_at":%q`, ts, ts))
	var snapshot *contract.Value
	hasID, id := false, ""
	for i := range v.Members {
		m := &v.Members[i]
		switch {
		case m.Key == "snapshot":
			snapshot = &m.Value
			continue
		case slices.Contains(serverSetFields, m.Key):
			probs = append(probs, contract.Problem{Path: "/" + m.Key, Rule: "server-set", Layer: contract.LayerRule,
				Message: fmt.Sprintf("%s is set by the server; leave it out", m.Key)})
			continue
		case m.Key == "session_id":
			hasID, id = true, m.Value.Str
		}
		rec = append(rec, ',')
		rec = append(rec, m.RawKey...)
		rec = append(rec, ':')
		rec = append(rec, m.Value.Raw...)
	}
	if !hasID {
		rec = append(rec, fmt.Sprintf(`,"session_id":%q`, newSessionID())...)
	}
	rec = append(rec, '}')
	var record contract.SessionRecord
	if err := contract.Decode(contract.KindSession, rec, contract.Limits{}, &record); err != nil {
		var ve *contract.ValidationError
		if !errors.As(err, &ve) {
			return nil, api.Errorf(api.CodeInternal, "decode record: %v", err)
		}
		probs = append(probs, ve.Problems...)
	}
	// The record's schema takes any non-empty session_id with the "S-" prefix; a new session's
	// id must also be one every event can name and every URL can carry.
	if hasID && !slices.ContainsFunc(probs, func(p contract.Problem) bool { return p.Path == "/session_id" }) {
		probs = append(probs, contract.SessionIDProblems(id)...)
	}
	var snap contract.Snapshot
	if snapshot == nil {
		probs = append(probs, contract.Problem{Path: "/snapshot", Rule: "required", Layer: contract.LayerSchema,
			Message: `required field "snapshot" is missing: give mode, modelId and capabilities, e.g. {"mode":"work","modelId":"my-model","capabilities":{}}`})
	} else if err := contract.Decode(contract.KindSnapshot, snapshot.Raw, contract.Limits{}, &snap); err != nil {
		var ve *contract.ValidationError
		if !errors.As(err, &ve) {
			return nil, api.Errorf(api.CodeInternal, "decode snapshot: %v", err)
		}
		for _, p := range ve.Problems {
			p.Path = "/snapshot" + p.Path
			probs = append(probs, p)
		}
	}
	if len(probs) > 0 {
		return nil, validationError("session", probs)
	}
	return &store.Session{Record: record, Snapshot: snap, LastSequence: -1}, nil
}

// resource builds the session resource; the current run is the most recent run.
func (s *Server) resource(ctx context.Context, sess *store.Session) api.Session {
	res := api.Session{Record: sess.Record, Snapshot: sess.Snapshot, LastSequence: sess.LastSequence,
		Lineage: sess.Lineage, ActiveBranch: sess.ActiveBranch}
	if runs, err := s.st.Runs(ctx, sess.Record.SessionID); err == nil && len(runs) > 0 {
		res.CurrentRun = &runs[len(runs)-1]
	}
	if lc, err := s.st.Lifecycle(ctx, sess.Record.SessionID); err == nil {
		res.Lifecycle = lc
	}
	return res
}

func (s *Server) handleGetSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	sess, err := s.st.GetSession(r.Context(), id)
	if err != nil {
		writeError(w, storeError(err, id))
		return
	}
	writeJSON(w, http.StatusOK, s.resource(r.Context(), sess))
}

func (s *Server) handleListSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, aerr := queryInt(r, "limit", 100, 1, 1000)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	f := store.ListFilter{Status: q.Get("status"), AgentID: q.Get("agent"), Project: q.Get("project"), After: q.Get("after"), Limit: int(limit)}
	if f.Status != "" && !slices.Contains(contract.SessionStatuses, f.Status) {
		writeError(w, api.Errorf(api.CodeMalformed, "status=%q is not one of %v", f.Status, contract.SessionStatuses))
		return
	}
	list, next, err := s.st.ListSessions(r.Context(), f)
	if err != nil {
		writeError(w, storeError(err, ""))
		return
	}
	out := api.SessionList{Sessions: make([]api.Session, 0, len(list)), Next: next}
	for _, sess := range list {
		out.Sessions = append(out.Sessions, s.resource(r.Context(), sess))
	}
	writeJSON(w, http.StatusOK, out)
}

// lifecycle lists the status changes a client may make with PATCH (docs/lifecycle.md). stale is
// set by the server when heartbeats stop (serverLifecycle), archived by archive; closed is
// final; an archived session comes back only through restore (docs/lifecycle.md).
var lifecycle = map[string][]string{
	"running":  {"paused", "closed"},
	"paused":   {"running", "closed"},
	"stale":    {"running", "closed"},
	"closed":   {},
	"archived": {},
}

// serverLifecycle lists the status changes the server itself makes, with what makes them:
// together with lifecycle, the whole table of docs/lifecycle.md.
var serverLifecycle = map[string]map[string]string{
	"running":  {"stale": "the sweeper, when heartbeats stop", "archived": "archive: POST /v1/sessions/{id}/archive"},
	"paused":   {"stale": "the sweeper, when heartbeats stop", "archived": "archive: POST /v1/sessions/{id}/archive"},
	"stale":    {"running": "a heartbeat or an append: POST /v1/sessions/{id}/heartbeat", "archived": "archive: POST /v1/sessions/{id}/archive"},
	"closed":   {"archived": "archive: POST /v1/sessions/{id}/archive"},
	"archived": {"paused": "restore: POST /v1/archives/restore with the session's latest archive"},
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
	if !slices.Contains([]string{"owner", "handoff", "user", "mission"}, req.UpdatedByGate) {
		writeError(w, validationError("patch", []contract.Problem{{Path: "/updated_by_gate", Rule: "enum", Layer: contract.LayerSchema,
			Message: fmt.Sprintf("updated_by_gate %q must be one of owner, handoff, user, mission: say who makes the change", req.UpdatedByGate)}}))
		return
	}
	var apiErr *api.Error
	sess, err := s.st.UpdateSession(r.Context(), id, func(sess *store.Session) error {
		rec := &sess.Record
		if req.Snapshot != nil {
			if rec.Status == "archived" {
				apiErr = api.Errorf(api.CodeInvalidState, "session %q is archived: its snapshot is kept in its archive %s and cannot change; %s, then change the snapshot", id, rec.ArchivePath.Get(), session.NotLiveHint(rec.Status))
				return apiErr
			}
			sess.Snapshot = *req.Snapshot
		}
		if req.Status != nil && *req.Status != rec.Status {
			if !slices.Contains(lifecycle[rec.Status], *req.Status) {
				apiErr = api.Errorf(api.CodeInvalidState, "session %q is %s and cannot become %s (allowed from %s: %v)%s", id, rec.Status, *req.Status, rec.Status, lifecycle[rec.Status], serverHint(rec.Status, *req.Status))
				return apiErr
			}
			rec.Status = *req.Status
			if rec.Status == "closed" {
				rec.ClosedAt = contract.Some(now(s))
			}
		}
		for _, f := range []struct {
			src contract.Nullable[string]
			dst *contract.Nullable[string]
		}{{req.Phase, &rec.Phase}, {req.Activity, &rec.Activity}, {req.CurrentRunID, &rec.CurrentRunID},
			{req.CurrentTaskID, &rec.CurrentTaskID}, {req.CurrentMissionID, &rec.CurrentMissionID}, {req.WorktreePath, &rec.WorktreePath}} {
			if f.src.Present {
				*f.dst = f.src
			}
		}
		rec.UpdatedAt = contract.Some(now(s))
		rec.UpdatedByGate = contract.Some(req.UpdatedByGate)
		b, err := contract.Marshal(rec)
		if err != nil {
			return err
		}
		if err := contract.Validate(contract.KindSession, b, contract.Limits{}); err != nil {
			var ve *contract.ValidationError
			errors.As(err, &ve)
			apiErr = validationError("session record", ve.Problems)
			return apiErr
		}
		return nil
	})
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	if err != nil {
		writeError(w, storeError(err, id))
		return
	}
	writeJSON(w, http.StatusOK, s.resource(r.Context(), sess))
}

func (s *Server) handleRuns(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.st.GetSession(r.Context(), id); err != nil {
		writeError(w, storeError(err, id))
		return
	}
	runs, err := s.st.Runs(r.Context(), id)
	if err != nil {
		writeError(w, storeError(err, id))
		return
	}
	if runs == nil {
		runs = []contract.Run{}
	}
	writeJSON(w, http.StatusOK, api.RunList{Runs: runs})
}

func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	id, runID := r.PathValue("id"), r.PathValue("runId")
	if _, err := s.st.GetSession(r.Context(), id); err != nil {
		writeError(w, storeError(err, id))
		return
	}
	run, err := s.st.Run(r.Context(), id, runID)
	if err != nil {
		writeError(w, storeError(err, id))
		return
	}
	writeJSON(w, http.StatusOK, run)
}
