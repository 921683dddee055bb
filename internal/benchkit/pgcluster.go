package benchkit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a PostgreSQL cluster of the benchmark's own: initdb in a temporary directory,
// the postmaster on a free loopback port with fsync and synchronous_commit on (every commit
// is flushed before it is acknowledged) and room for 400 connections (one per live
// subscriber of the plain table). Its processes (the postmaster and every child) are the
// server that is measured.
type Cluster struct {
	dir  string
	proc *Proc
	port int
}

// pgBinDirs is where Debian installs PostgreSQL's server programs.
const pgBinDirs = "/usr/lib/postgresql/*/bin"

// pgProgram finds a PostgreSQL server program: the newest version in pgBinDirs, else PATH.
func pgProgram(name string) (string, error) {
	matches, _ := filepath.Glob(filepath.Join(pgBinDirs, name))
	sort.Slice(matches, func(i, j int) bool { return pgVersion(matches[i]) < pgVersion(matches[j]) })
	if len(matches) > 0 {
		return matches[len(matches)-1], nil
	}
	return LookProgram(name, "apt-get install postgresql")
}

func pgVersion(path string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}

// asPostgres runs cmd as the postgres user when the benchmark runs as root (PostgreSQL
// refuses to run as root), and returns the uid it will run as.
func asPostgres(cmd *exec.Cmd) (int, int, error) {
	if os.Geteuid() != 0 {
		return os.Getuid(), os.Getgid(), nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return 0, 0, fmt.Errorf("%w: PostgreSQL refuses to run as root and there is no postgres user (useradd --system postgres, as .ci/run does): %v", ErrMissing, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	return uid, gid, nil
}

// StartCluster initialises and starts a new cluster with a database named bench.
func StartCluster() (*Cluster, error) {
	initdb, err := pgProgram("initdb")
	if err != nil {
		return nil, err
	}
	postgres, err := pgProgram("postgres")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "benchkit-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir}
	fail := func(err error) (*Cluster, error) {
		c.Close()
		return nil, err
	}
	cmd := exec.Command(initdb, "-D", filepath.Join(dir, "data"), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	uid, gid, err := asPostgres(cmd)
	if err != nil {
		return fail(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return fail(fmt.Errorf("give the cluster's directory to the postgres user: %w", err))
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	if c.port, err = FreePort(); err != nil {
		return fail(err)
	}
	cmd = exec.Command(postgres, "-D", filepath.Join(dir, "data"), "-p", strconv.Itoa(c.port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=400",
		"-c", "fsync=on", "-c", "synchronous_commit=on", "-c", "full_page_writes=on")
	if _, _, err := asPostgres(cmd); err != nil {
		return fail(err)
	}
	// The log file is created by this process (root); the server only writes to it.
	if c.proc, err = StartProc("postgres", dir, cmd); err != nil {
		return fail(err)
	}
	c.proc.tree = true
	if err := WaitPort("127.0.0.1:"+strconv.Itoa(c.port), c.proc, time.Minute); err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var conn *pgx.Conn
	for { // the port answers a moment before the server takes connections
		if conn, err = pgx.Connect(ctx, c.URL("postgres")); err == nil {
			break
		}
		if ctx.Err() != nil {
			return fail(fmt.Errorf("connect to the new cluster: %w", err))
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE bench"); err != nil {
		return fail(fmt.Errorf("create the database: %w", err))
	}
	return c, nil
}

// URL returns the connection URL of database db.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// Proc is the cluster's postmaster, whose children count with it.
func (c *Cluster) Proc() *Proc { return c.proc }

// Close stops the cluster (a fast shutdown) and removes its files.
func (c *Cluster) Close() error {
	if c.proc != nil && !c.proc.Exited() {
		c.proc.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
		select {
		case <-c.proc.done:
		case <-time.After(30 * time.Second):
			c.proc.cmd.Process.Kill()
			<-c.proc.done
		}
	}
	return os.RemoveAll(c.dir)
}
