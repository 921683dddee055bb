package failover

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgPrograms are PostgreSQL's own programs the test runs.
var pgPrograms = []string{"initdb", "postgres", "pg_ctl", "pg_basebackup", "psql"}

// pgEnv is where PostgreSQL's programs are and who runs them.
type pgEnv struct {
	bin  string              // the directory of initdb, postgres, pg_ctl, pg_basebackup
	cred *syscall.Credential // the postgres user's, when the test runs as root; nil otherwise
	uid  int                 // the owner to give the clusters' directories
	gid  int
}

// needPostgres finds PostgreSQL's programs (the newest /usr/lib/postgresql/*/bin holding them
// all, else PATH) and, under root, the postgres user to run them as (PostgreSQL refuses to run
// as root). Without them the test is skipped, or fails under CI=true (as testenv.Need).
func needPostgres(t *testing.T) *pgEnv {
	t.Helper()
	missing := func(why string) {
		t.Helper()
		const install = "apt-get install postgresql (.ci/run does)"
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s and CI=true requires it (the failover test runs a primary and a standby); %s", why, install)
		}
		t.Skipf("%s (the failover test runs a primary and a standby); %s; under CI=true this fails", why, install)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	env := &pgEnv{uid: os.Getuid(), gid: os.Getgid()}
	for _, d := range dirs {
		if hasAll(d) {
			env.bin = d
			break
		}
	}
	if env.bin == "" {
		for _, p := range pgPrograms {
			path, err := exec.LookPath(p)
			if err != nil {
				missing(fmt.Sprintf("PostgreSQL's %s is not installed", p))
			}
			if env.bin == "" {
				env.bin = filepath.Dir(path)
			}
		}
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			missing("the test runs as root, PostgreSQL refuses to, and there is no postgres user to run it as (useradd --system postgres)")
		}
		env.uid, _ = strconv.Atoi(u.Uid)
		env.gid, _ = strconv.Atoi(u.Gid)
		env.cred = &syscall.Credential{Uid: uint32(env.uid), Gid: uint32(env.gid)}
	}
	return env
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func hasAll(dir string) bool {
	for _, p := range pgPrograms {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil && p != "psql" {
			return false
		}
	}
	return true
}

// command returns a command running prog (a PostgreSQL program, or sh) as the postgres user.
func (e *pgEnv) command(ctx context.Context, prog string, args ...string) *exec.Cmd {
	if !strings.Contains(prog, "/") {
		if p := filepath.Join(e.bin, prog); fileExists(p) {
			prog = p
		}
	}
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = append(os.Environ(), "PATH="+e.bin+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.cred, Setpgid: true}
	return cmd
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// node is one PostgreSQL server of the test: a data directory and a loopback port.
type node struct {
	name string
	data string
	port int
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

func (n *node) host() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

// url is a URL of database db on the node alone.
func (n *node) url(db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable&connect_timeout=5", n.host(), db)
}

// cluster is the test's two servers, in a temporary directory the postgres user owns.
type cluster struct {
	t     *testing.T
	env   *pgEnv
	dir   string
	nodes [2]*node
}

func newCluster(t *testing.T, env *pgEnv) *cluster {
	dir, err := os.MkdirTemp("", "sessiond-failover-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, env.uid, env.gid); err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, env: env, dir: dir}
	for i, name := range []string{"a", "b"} {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		c.nodes[i] = &node{name: name, data: filepath.Join(dir, name), port: port}
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			c.kill(n, syscall.SIGKILL)
		}
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("the clusters' files are kept in %s", dir)
		}
	})
	return c
}

// run runs a command as the postgres user and fails the test when it fails.
func (c *cluster) run(prog string, args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := c.env.command(ctx, prog, args...).CombinedOutput()
	if err != nil {
		c.t.Fatalf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// initPrimary makes node n's cluster with the replication settings of docs/deploy.md.
func (c *cluster) initPrimary(n *node) {
	c.run("initdb", "-D", n.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	conf := strings.Join(append(replicationSettings(c.t),
		"listen_addresses = '127.0.0.1'",
		"unix_socket_directories = '"+c.dir+"'",
		"max_connections = 100",
		"log_min_messages = warning",
	), "\n") + "\n"
	f, err := os.OpenFile(filepath.Join(n.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(conf); err != nil {
		c.t.Fatal(err)
	}
}

// start starts node n's postmaster on its port and waits until it takes connections.
func (c *cluster) start(n *node) {
	c.t.Helper()
	logf, err := os.OpenFile(filepath.Join(c.dir, n.name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	n.log = logf
	n.cmd = c.env.command(context.Background(), "postgres", "-D", n.data, "-p", strconv.Itoa(n.port))
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	if err := n.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	n.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		cmd.Wait()
		close(done)
	}(n.cmd, n.done)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, n.url("postgres"))
		if err == nil {
			conn.Close(ctx)
			return
		}
		select {
		case <-n.done:
			c.t.Fatalf("postgres %s exited at start: %s", n.name, c.logTail(n))
		case <-ctx.Done():
			c.t.Fatalf("postgres %s does not take connections after a minute: %v\n%s", n.name, err, c.logTail(n))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *cluster) logTail(n *node) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, n.name+".log"))
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// kill sends sig to node n's postmaster and every process under it (PostgreSQL's backends are
// in sessions of their own, so a process group would not reach them). After SIGKILL it waits
// for the postmaster to end.
func (c *cluster) kill(n *node, sig syscall.Signal) {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	select {
	case <-n.done:
		return
	default:
	}
	for _, pid := range descendants(n.cmd.Process.Pid) {
		syscall.Kill(pid, sig)
	}
	if sig == syscall.SIGKILL {
		select {
		case <-n.done:
		case <-time.After(30 * time.Second):
			c.t.Errorf("postgres %s still runs 30 s after SIGKILL", n.name)
		}
		for _, pid := range descendants(n.cmd.Process.Pid) {
			syscall.Kill(pid, sig) // children forked meanwhile; and the orphans of the postmaster
		}
		if n.log != nil {
			n.log.Close()
		}
	}
}

// descendants returns pid and every process under it, the parent first.
func descendants(pid int) []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 {
			pp, _ := strconv.Atoi(f[1])
			parent[n] = pp
		}
	}
	out := []int{pid}
	for changed := true; changed; {
		changed = false
		for ch, pp := range parent {
			if slices.Contains(out, pp) && !slices.Contains(out, ch) {
				out = append(out, ch)
				changed = true
			}
		}
	}
	return out
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// exec runs one statement on node n's database postgres.
func (c *cluster) exec(n *node, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, n.url("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}
