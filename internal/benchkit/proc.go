package benchkit

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrMissing is wrapped by a process's start when a program it needs is not installed: a
// benchmark skips that system with the error's message.
var ErrMissing = errors.New("missing program")

// FreePort returns a loopback TCP port nothing listens on now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// WaitPort waits until something accepts connections on addr, the process p is still alive
// and the deadline has not passed.
func WaitPort(addr string, p *Proc, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if p != nil && p.Exited() {
			return fmt.Errorf("%s exited before listening on %s; its output: %s", p.name, addr, p.Tail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s after %s: %w", addr, within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Proc is a server process the benchmark started (or, for PostgreSQL, the postmaster whose
// children count too). Its output goes to a log file in its directory.
type Proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
	// tree says whether the process's descendants count as the server too (PostgreSQL
	// runs a process per connection and its WAL writer and checkpointer as children).
	tree bool
}

// StartProc starts the program with its output in dir/name.log.
func StartProc(name, dir string, cmd *exec.Cmd) (*Proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true // its own process group: a signal to the benchmark's does not reach it
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Tail returns the end of the process's log, for error messages, after its first line when
// the log is longer: a program that refuses its arguments says why first, then its usage.
func (p *Proc) Tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 2000 {
		first, _, _ := bytes.Cut(b, []byte("\n"))
		b = append(append(first[:len(first):len(first)], "\n…\n"...), b[len(b)-1500:]...)
	}
	return strings.TrimSpace(string(b))
}

// Stop ends the process with SIGTERM, then SIGKILL after a grace period.
func (p *Proc) Stop() error {
	if p.Exited() {
		return nil
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
	return nil
}

// PIDs returns the process ids that count as the server: the process, and with tree its
// descendants.
func (p *Proc) PIDs() []int {
	root := p.cmd.Process.Pid
	if !p.tree {
		return []int{root}
	}
	return descendants(root)
}

// descendants returns pid and every process below it.
func descendants(pid int) []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, err := ppidOf(n); err == nil {
			parent[n] = pp
		}
	}
	out := []int{pid}
	for changed := true; changed; {
		changed = false
		for c, pp := range parent {
			if slices.Contains(out, pp) && !slices.Contains(out, c) {
				out = append(out, c)
				changed = true
			}
		}
	}
	return out
}

// statFields returns the fields of /proc/pid/stat after the command name.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	return strings.Fields(string(b[i+1:])), nil
}

func ppidOf(pid int) (int, error) {
	f, err := statFields(pid)
	if err != nil || len(f) < 2 {
		return 0, fmt.Errorf("ppid of %d: %v", pid, err)
	}
	return strconv.Atoi(f[1])
}

// Usage is what the server's processes had used at one moment.
type Usage struct {
	// CPU is user plus system time, with that of the children they have waited for.
	CPU time.Duration
	// WriteBytes is what they caused to be written to storage (/proc/<pid>/io write_bytes).
	WriteBytes int64
	// OK says both counters could be read (Linux, and the right to read the process's io).
	OK bool
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every Linux platform Go
// runs on.
const clockTick = 10 * time.Millisecond

// Usage reads the server's counters now. Processes that ended since the last reading are no
// longer counted (the benchmark's connections are pooled, so PostgreSQL's backends live
// through a workload).
func (p *Proc) Usage() Usage {
	u := Usage{OK: true}
	for _, pid := range p.PIDs() {
		f, err := statFields(pid)
		if err != nil || len(f) < 15 {
			continue // gone
		}
		// Fields 14-17 of stat (utime, stime, cutime, cstime) are f[11:15] after the name.
		for _, s := range f[11:15] {
			n, _ := strconv.ParseInt(s, 10, 64)
			u.CPU += time.Duration(n) * clockTick
		}
		io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
		if err != nil {
			u.OK = false
			continue
		}
		for _, l := range strings.Split(string(io), "\n") {
			if v, ok := strings.CutPrefix(l, "write_bytes: "); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				u.WriteBytes += n
			}
		}
	}
	return u
}

// UsageOf adds up the usage of several servers (sessiond and its PostgreSQL cluster).
func UsageOf(ps []*Proc) Usage {
	u := Usage{OK: len(ps) > 0}
	for _, p := range ps {
		pu := p.Usage()
		u.CPU += pu.CPU
		u.WriteBytes += pu.WriteBytes
		u.OK = u.OK && pu.OK
	}
	return u
}

// LookProgram finds a program on PATH or in the extra directories, or returns an error
// wrapping ErrMissing that says how to install it.
func LookProgram(name, install string, dirs ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range dirs {
		matches, _ := filepath.Glob(filepath.Join(d, name))
		if len(matches) > 0 {
			return matches[len(matches)-1], nil
		}
	}
	return "", fmt.Errorf("%w: %s not found (%s)", ErrMissing, name, install)
}
