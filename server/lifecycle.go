package server

import (
	"errors"
	"io"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/archive"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/wire"
)

// lifecycleRoutes is the lifecycle part of the route table (see [Server.routes]).
func (s *Server) lifecycleRoutes() []route {
	return []route{
		{pattern: "POST /v1/sessions/{id}/heartbeat", access: appendRoute, handle: s.handleHeartbeat},
		{pattern: "POST /v1/sessions/{id}/assess", access: readRoute, handle: s.handleAssess, body: jsonBody},
		{pattern: "POST /v1/sessions/{id}/warm", access: appendRoute, handle: s.handleWarm, body: jsonBody},
		{pattern: "POST /v1/sessions/{id}/archive", access: adminRoute, handle: s.handleArchive, body: jsonBody},
		{pattern: "GET /v1/sessions/{id}/status", access: readRoute, handle: s.handleStatus},
		{pattern: "GET /v1/archives", access: readRoute, handle: s.handleListArchives, query: []string{"project"}},
		{pattern: archiveUpload, access: globalAdmin, handle: s.handleSaveArchive, body: jsonBody},
		{pattern: "POST /v1/archives/restore", access: globalAdmin, handle: s.handleRestore, body: jsonBody},
		{pattern: "POST /v1/sweep", access: globalAdmin, handle: s.handleSweep},
	}
}

// archiveUpload is the route of archive uploads: their bodies are streamed to a file, outside
// the budget of request bodies in memory (transport.go).
const archiveUpload = "POST /v1/archives"

// serviceError maps an error of the session service to the API error: a document that
// breaks the contract to a 400 or 422 with its problems, a refusal to its code, anything
// else as a store error.
func serviceError(err error, id string) *api.Error {
	var (
		inv *session.InvalidError
		rej *session.RejectError
	)
	switch {
	case errors.As(err, &inv):
		return validationError(inv.What, inv.Problems)
	case errors.As(err, &rej):
		return &api.Error{Code: rej.Code, Message: rej.Message}
	}
	return storeError(err, id)
}

// decodeOptional decodes a JSON body that may be empty.
func (s *Server) decodeOptional(w http.ResponseWriter, r *http.Request, v any) *api.Error {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		return aerr
	}
	if len(body) == 0 {
		return nil
	}
	return decodeStrict(body, v)
}

func (s *Server) handleHeartbeat(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	sess, err := s.svc.Heartbeat(r.Context(), id)
	if err != nil {
		writeError(w, serviceError(err, id))
		return
	}
	writeJSON(w, http.StatusOK, s.resource(r.Context(), sess))
}

func (s *Server) handleAssess(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var req session.AssessRequest
	if aerr := s.decodeOptional(w, r, &req); aerr != nil {
		writeError(w, aerr)
		return
	}
	a, err := s.svc.Assess(r.Context(), id, req)
	if err != nil {
		writeError(w, serviceError(err, id))
		return
	}
	writeJSON(w, http.StatusOK, a)
}

func (s *Server) handleWarm(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var req api.WarmRequest
	if aerr := s.decodeOptional(w, r, &req); aerr != nil {
		writeError(w, aerr)
		return
	}
	if req.Hours < 0 || req.Hours > 24*7 {
		writeError(w, api.Errorf(api.CodeMalformed, "hours=%v must be from 0 (the default, %s) to 168", req.Hours, s.svc.Options().Window))
		return
	}
	opt := session.WarmOptions{Restart: req.Restart}
	if req.Hours > 0 {
		opt.Window = time.Duration(req.Hours * float64(time.Hour))
	}
	win, err := s.svc.Warm(r.Context(), id, opt)
	if err != nil {
		writeError(w, serviceError(err, id))
		return
	}
	writeJSON(w, http.StatusOK, win)
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	rep, err := s.svc.Status(r.Context(), id)
	if err != nil {
		writeError(w, serviceError(err, id))
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (s *Server) archiveDir() (string, *api.Error) {
	dir := s.svc.Options().ArchiveDir
	if dir == "" {
		return "", api.Errorf(api.CodeNotConfigured, "this server has no archive directory (it was started with --archive-dir -); restart sessiond serve with --archive-dir DIR, or without the flag for <data>/archives")
	}
	return dir, nil
}

func (s *Server) handleArchive(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	dir, aerr := s.archiveDir()
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var req api.ArchiveRequest
	if aerr := s.decodeOptional(w, r, &req); aerr != nil {
		writeError(w, aerr)
		return
	}
	if req.UpdatedByGate != "" && req.UpdatedByGate != "owner" && req.UpdatedByGate != "handoff" && req.UpdatedByGate != "user" && req.UpdatedByGate != "mission" {
		writeError(w, api.Errorf(api.CodeContractViolation, "updated_by_gate %s must be one of owner, handoff, user, mission", quote(req.UpdatedByGate)))
		return
	}
	ps := s.newProgressStream(w, r)
	res, err := s.svc.Archive(r.Context(), id, session.ArchiveOptions{Dir: dir, Note: req.Note, Gate: req.UpdatedByGate, Compact: req.Compact, Progress: ps.callback()})
	if err != nil {
		ps.fail(serviceError(err, id))
		return
	}
	ps.answer(http.StatusOK, api.ArchiveResponse{Archive: res.ArchiveInfo, Events: res.Events, Compacted: res.Compacted, Session: s.resource(r.Context(), res.Session)})
}

func (s *Server) handleListArchives(w http.ResponseWriter, r *http.Request) {
	dir, aerr := s.archiveDir()
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	project, aerr := projectFilter(r, r.URL.Query().Get("project"))
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var list []wire.ArchiveInfo
	var err error
	if principalOf(r.Context()).AllProjects() {
		list, err = archive.List(dir, project) // "-" asks for the sessions without a project
	} else {
		list, err = archive.ListProject(dir, &project) // the key's project, whatever its name
	}
	if err != nil {
		writeError(w, api.Errorf(api.CodeInternal, "%v", err))
		return
	}
	// Each archive is of a session: listed only when its session is one the caller may see,
	// by the same decision as every other id.
	list = slices.DeleteFunc(list, func(a wire.ArchiveInfo) bool {
		p := ""
		if a.Project != nil {
			p = *a.Project
		}
		return !session.Permits(r.Context(), a.SessionID, p)
	})
	for i := range list {
		list[i].Path = "" // names only: the list does not show the server's file system
	}
	writeJSON(w, http.StatusOK, api.ArchiveList{Archives: list})
}

// handleSaveArchive stores an archive file sent as the body (copied from another host) after
// verifying it; restore it then by name.
func (s *Server) handleSaveArchive(w http.ResponseWriter, r *http.Request) {
	dir, aerr := s.archiveDir()
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	// One upload is verified at a time. It is verified as a stream (session.SaveArchive), so its
	// memory does not grow with the file's size, which MaxArchiveBytes bounds on disk.
	select {
	case s.uploads <- struct{}{}:
		defer func() { <-s.uploads }()
	case <-r.Context().Done():
		return
	}
	upload, aerr := s.receiveUpload(w, r, dir)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	defer os.Remove(upload)
	info, err := s.svc.SaveArchive(dir, upload)
	if err != nil {
		writeError(w, serviceError(err, ""))
		return
	}
	info.Path = "" // the server's file system is not the client's business
	writeJSON(w, http.StatusCreated, info)
}

// receiveUpload streams an uploaded archive file to a temporary file in dir (never listed:
// archives are in its subdirectories) within MaxArchiveBytes, and returns its path; the caller
// removes it.
func (s *Server) receiveUpload(w http.ResponseWriter, r *http.Request, dir string) (string, *api.Error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", api.Errorf(api.CodeInternal, "archive upload: %v", err)
	}
	f, err := os.CreateTemp(dir, ".upload-*.json")
	if err != nil {
		return "", api.Errorf(api.CodeInternal, "archive upload: %v", err)
	}
	_, err = io.Copy(f, http.MaxBytesReader(w, r.Body, s.opt.MaxArchiveBytes))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", bodyError(err, "archive upload", " (serve --max-archive-bytes)")
	}
	return f.Name(), nil
}

func (s *Server) handleRestore(w http.ResponseWriter, r *http.Request) {
	dir, aerr := s.archiveDir()
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var req session.RestoreRequest
	if aerr := s.decodeOptional(w, r, &req); aerr != nil {
		writeError(w, aerr)
		return
	}
	ps := s.newProgressStream(w, r)
	req.Progress = ps.callback()
	res, err := s.svc.Restore(r.Context(), dir, req)
	if err != nil {
		ps.fail(serviceError(err, ""))
		return
	}
	ps.answer(http.StatusOK, api.RestoreResponse{Archive: res.Archive, Events: res.Events, Replaced: res.Replaced, How: res.How, Session: s.resource(r.Context(), res.Session)})
}

func (s *Server) handleSweep(w http.ResponseWriter, r *http.Request) {
	res, err := s.svc.Sweep(r.Context(), session.SweepOptions{}) // counted in the metrics (OnPass)
	if err != nil {
		writeError(w, storeError(err, ""))
		return
	}
	writeJSON(w, http.StatusOK, res)
}
