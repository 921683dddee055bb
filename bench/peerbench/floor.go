package peerbench

import "github.com/sessiond/sessiond/internal/benchkit"

// FloorName is the floor's column in the table.
const FloorName = "http-floor"

var floorBuild = &benchkit.Build{Pkg: "github.com/sessiond/sessiond/bench/peerbench/httpfloor", Name: "httpfloor"}

// StartHTTPFloor builds and starts the floor (the httpfloor command: sessiond's append, read
// and stream routes over Go's net/http, in memory, with no storage, sync or validation) on a
// free loopback port, and returns it as a System driven by sessiond's client. It is not
// durable and not a peer to be ahead of: its append figures are the cost of HTTP with this
// client on this machine, which no system answering the same requests over Go's HTTP/1.1
// server can beat.
func StartHTTPFloor() (*Sessiond, error) {
	bin, err := floorBuild.Path()
	if err != nil {
		return nil, err
	}
	return clientOf(FloorName)(benchkit.StartServer("httpfloor", bin, func(addr, _ string) []string {
		return []string{"--addr", addr}
	}))
}
