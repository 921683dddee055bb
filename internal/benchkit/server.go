package benchkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Server is an HTTP server the benchmark started as a process of its own on a loopback port.
type Server struct {
	// URL is the server's base URL (http://host:port).
	URL string
	// Procs are the processes whose CPU and storage writes count as the server's (sessiond's,
	// and its PostgreSQL cluster's when it has one).
	Procs []*Proc
	stop  func()
}

// Close stops the server's processes and removes their files.
func (s *Server) Close() error {
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
	return nil
}

// ArgsEnv names the environment variable whose words (split at white space) are added to the
// arguments of every "sessiond serve" the benchmarks start: "--admin-addr 127.0.0.1:7472",
// say, to take CPU profiles of the server while a workload runs. sessiond refuses an
// argument it does not know, and the server's start fails with its message.
const ArgsEnv = "PEERBENCH_SESSIOND_ARGS"

// StartServer starts the program at bin, called prog (its log's name), in a new temporary
// directory with the arguments args returns for its loopback address (a free port) and that
// directory, and waits until it listens. Close stops it and removes the directory.
func StartServer(prog, bin string, args func(addr, dir string) []string) (*Server, error) {
	dir, err := os.MkdirTemp("", "benchkit-"+prog+"-")
	if err != nil {
		return nil, err
	}
	// failDir is the way out until the server runs: Close takes over after.
	failDir := func(err error) (*Server, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return failDir(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p, err := StartProc(prog, dir, exec.Command(bin, args(addr, dir)...))
	if err != nil {
		return failDir(err)
	}
	if err := WaitPort(addr, p, time.Minute); err != nil {
		p.Stop()
		return failDir(err)
	}
	return &Server{URL: "http://" + addr, Procs: []*Proc{p}, stop: func() {
		p.Stop()
		os.RemoveAll(dir)
	}}, nil
}

// StartSessiond builds sessiond (Binary) and starts "sessiond serve" on a free loopback port
// with its data in a new temporary directory: on SQLite when storeURL is empty, else on the
// PostgreSQL database storeURL names.
func StartSessiond(storeURL string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	return StartSessiondBinary(bin, storeURL)
}

// StartSessiondBinary is StartSessiond with the sessiond binary at bin.
func StartSessiondBinary(bin, storeURL string) (*Server, error) {
	return StartServer("sessiond", bin, func(addr, dir string) []string {
		args := []string{"serve", "--addr", addr, "--data", filepath.Join(dir, "data")}
		if storeURL != "" {
			args = append(args, "--store", storeURL)
		}
		return append(args, strings.Fields(os.Getenv(ArgsEnv))...)
	})
}

// StartSessiondPostgres starts a PostgreSQL cluster of its own (StartCluster) and the sessiond
// binary at bin on it; both count as the server.
func StartSessiondPostgres(bin string) (*Server, error) {
	c, err := StartCluster()
	if err != nil {
		return nil, err
	}
	s, err := StartSessiondBinary(bin, c.URL("bench"))
	if err != nil {
		c.Close()
		return nil, err
	}
	stop := s.stop
	s.Procs = append(s.Procs, c.Proc())
	s.stop = func() {
		stop()
		c.Close()
	}
	return s, nil
}
