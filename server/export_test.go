package server

// RouteSpec is what the route table declares about one endpoint, for the tests that walk
// every route.
type RouteSpec struct {
	Pattern string
	Query   []string
	Body    []string
}

// RouteTable returns the route table the router is built from.
func (s *Server) RouteTable() []RouteSpec {
	var out []RouteSpec
	for _, rt := range s.routes() {
		out = append(out, RouteSpec{Pattern: rt.pattern, Query: rt.query, Body: rt.body})
	}
	return out
}
