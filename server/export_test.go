package server

import (
	"net/http"

	"github.com/sessiond/sessiond/bridge"
)

// RouteSpec is what the route table declares about one endpoint, for the tests that walk
// every route.
type RouteSpec struct {
	Pattern string
	Query   []string
	Body    []string
	// Public, Scope, Global and Token are the route's access rule (access.go).
	Public bool
	Scope  string
	Global bool
	Token  bool
}

// RouteTable returns the route table the router is built from.
func (s *Server) RouteTable() []RouteSpec {
	var out []RouteSpec
	for _, rt := range s.routes() {
		out = append(out, RouteSpec{Pattern: rt.pattern, Query: rt.query, Body: rt.body,
			Public: rt.access.public, Scope: string(rt.access.scope), Global: rt.access.global, Token: rt.access.token})
	}
	return out
}

// FlushKeyUses writes the keys' last uses now, as the server does every few seconds.
func (s *Server) FlushKeyUses() { s.flushKeys(s.life) }

// JoinRunAt streams the run runID of session sid in AG-UI as a tab that joins it does, with its
// cut at the sequence cut: what handleAGUI does once it found the run active and read the
// log's last sequence, for the test of a run that ends between the two.
func (s *Server) JoinRunAt(w http.ResponseWriter, r *http.Request, sid, runID string, cut int64) {
	s.streamRun(w, r, sid, runID, -1, cut, aguiProtocol(bridge.AGUIRun{ThreadID: sid, RunID: "joined"}))
}
