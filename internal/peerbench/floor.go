package peerbench

import (
	"os"
	"os/exec"
	"strconv"
	"time"
)

// FloorName is the floor's column in the table.
const FloorName = "http-floor"

var floorBuild = &build{pkg: "./internal/peerbench/httpfloor", name: "httpfloor"}

// StartHTTPFloor builds and starts the floor (the httpfloor command: sessiond's append, read
// and stream routes over Go's net/http, in memory, with no storage, sync or validation) on a
// free loopback port, and returns it as a System driven by sessiond's client. It is not
// durable and not a peer to be ahead of: its append figures are the cost of HTTP with this
// client on this machine, which no system answering the same requests over Go's HTTP/1.1
// server can beat.
func StartHTTPFloor() (*Sessiond, error) {
	bin, err := floorBuild.path()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "peerbench-floor-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p, err := startProc("httpfloor", dir, exec.Command(bin, "--addr", addr))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := waitPort(addr, p, time.Minute); err != nil {
		p.stop()
		os.RemoveAll(dir)
		return nil, err
	}
	return NewSessiondClient(FloorName, "http://"+addr, []*Proc{p}, func() {
		p.stop()
		os.RemoveAll(dir)
	}), nil
}
