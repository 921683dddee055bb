//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// unprivileged runs sessiond as a user that file permissions apply to: the test's own user,
// or, when the tests run as root (whom permissions do not stop), nobody (65534) from a copy of
// the test binary that nobody may execute.
type unprivileged struct {
	bin      string
	uid, gid int
	cred     *syscall.Credential
}

func newUnprivileged(t *testing.T) unprivileged {
	t.Helper()
	if os.Geteuid() != 0 {
		return unprivileged{bin: os.Args[0], uid: os.Geteuid(), gid: os.Getegid()}
	}
	dir, err := os.MkdirTemp("", "sessiond-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "sessiond.test")
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return unprivileged{bin: bin, uid: 65534, gid: 65534, cred: &syscall.Credential{Uid: 65534, Gid: 65534}}
}

// base is a directory that belongs to the user.
func (u unprivileged) base(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sessiond-data-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Chmod(dir, 0o755)
		filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { os.Chmod(p, 0o755); return nil })
		os.RemoveAll(dir)
	})
	u.own(t, dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// own gives path to the user.
func (u unprivileged) own(t *testing.T, path string) {
	t.Helper()
	if err := os.Lchown(path, u.uid, u.gid); err != nil {
		t.Fatal(err)
	}
}

// tryServe runs "sessiond serve --data data" as the user. It reports whether the server
// started (then it is stopped) and, if not, its stderr and exit code.
func (u unprivileged) tryServe(t *testing.T, data string) (started bool, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, u.bin, "serve", "--addr", "127.0.0.1:0", "--data", data)
	cmd.Env = append(os.Environ(), "SESSIOND_AS_MAIN=1")
	cmd.Dir = filepath.Dir(u.bin)
	if u.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: u.cred}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if strings.HasPrefix(line, "sessiond listening on ") {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		return true, errBuf.String(), 0
	}
	err = cmd.Wait()
	code = -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return false, errBuf.String(), code
}

// TestServeOpenHints makes the SQLite store fail to open in each way serve tells apart, checks
// that the hint names the cause, then does what the hint says and checks that the server
// starts.
func TestServeOpenHints(t *testing.T) {
	u := newUnprivileged(t)
	for _, tc := range []struct {
		name string
		// setup prepares base and returns the --data to pass.
		setup func(t *testing.T, base string) string
		want  []string // in the hint, after "<base>" is replaced
		// follow does what the hint says and returns the --data to pass then.
		follow func(t *testing.T, base, data string) string
	}{
		{"data is a file",
			func(t *testing.T, base string) string {
				p := filepath.Join(base, "f")
				os.WriteFile(p, nil, 0o644)
				u.own(t, p)
				return p
			},
			[]string{"hint: --data <base>/f is a file, not a directory; pass a directory (sessiond creates it if it is missing)"},
			func(t *testing.T, base, data string) string { return filepath.Join(base, "a-directory") }},
		{"a parent is a file",
			func(t *testing.T, base string) string {
				p := filepath.Join(base, "f")
				os.WriteFile(p, nil, 0o644)
				u.own(t, p)
				return filepath.Join(p, "data", "x")
			},
			[]string{"hint: cannot create --data <base>/f/data/x: <base>/f is a file, not a directory; choose another --data"},
			func(t *testing.T, base, data string) string { return filepath.Join(base, "another") }},
		{"directory not writable",
			func(t *testing.T, base string) string {
				p := filepath.Join(base, "ro")
				os.Mkdir(p, 0o555)
				u.own(t, p)
				return p
			},
			[]string{"hint: --data <base>/ro is not writable by this user (", "permission denied); make it writable (chmod u+w <base>/ro) or choose another --data"},
			func(t *testing.T, base, data string) string { chmodUW(t, data); return data }},
		{"parent not writable",
			func(t *testing.T, base string) string {
				p := filepath.Join(base, "ro")
				os.Mkdir(p, 0o555)
				u.own(t, p)
				return filepath.Join(p, "data")
			},
			[]string{"hint: cannot create --data <base>/ro/data: <base>/ro is not writable by this user (", "make it writable (chmod u+w <base>/ro) or choose another --data"},
			func(t *testing.T, base, data string) string { chmodUW(t, filepath.Dir(data)); return data }},
		{"directory above not searchable",
			func(t *testing.T, base string) string {
				p := filepath.Join(base, "nx")
				os.Mkdir(p, 0o600)
				u.own(t, p)
				return filepath.Join(p, "data")
			},
			[]string{"hint: cannot reach --data <base>/nx/data: <base>/nx cannot be searched by this user (permission denied); make it searchable (chmod u+x <base>/nx) or choose another --data"},
			func(t *testing.T, base, data string) string {
				p := filepath.Dir(data)
				fi, _ := os.Stat(p)
				os.Chmod(p, fi.Mode().Perm()|0o100)
				return data
			}},
		{"database file not writable",
			func(t *testing.T, base string) string {
				p := filepath.Join(base, "data")
				os.Mkdir(p, 0o755)
				u.own(t, p)
				db := filepath.Join(p, "sessiond.db")
				os.WriteFile(db, nil, 0o444)
				u.own(t, db)
				return p
			},
			[]string{"hint: <base>/data/sessiond.db is not writable by this user (", "make it writable (chmod u+w <base>/data/sessiond.db) or choose another --data"},
			func(t *testing.T, base, data string) string {
				chmodUW(t, filepath.Join(data, "sessiond.db"))
				return data
			}},
		{"not a database",
			func(t *testing.T, base string) string {
				p := filepath.Join(base, "data")
				os.Mkdir(p, 0o755)
				u.own(t, p)
				db := filepath.Join(p, "sessiond.db")
				os.WriteFile(db, bytes.Repeat([]byte("not a database\n"), 512), 0o644)
				u.own(t, db)
				return p
			},
			[]string{"file is not a database", "hint: --data <base>/data is writable and not in use, so the cause is the error above: check the free space (df <base>/data)",
				"if sessiond.db is damaged or not a sessiond database, move the directory aside and start on a new --data"},
			func(t *testing.T, base, data string) string {
				if err := os.Rename(data, data+".damaged"); err != nil {
					t.Fatal(err)
				}
				return data
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := u.base(t)
			data := tc.setup(t, base)
			started, errOut, code := u.tryServe(t, data)
			if started || code != 1 {
				t.Fatalf("serve started (%v) or exit %d, want exit 1\n%s", started, code, errOut)
			}
			if strings.Count(errOut, "hint:") != 1 {
				t.Errorf("want one hint:\n%s", errOut)
			}
			for _, w := range tc.want {
				if w = strings.ReplaceAll(w, "<base>", base); !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			data = tc.follow(t, base, data)
			if started, errOut, code := u.tryServe(t, data); !started {
				t.Errorf("after following the hint: exit %d\n%s", code, errOut)
			}
		})
	}
}

// chmodUW is chmod u+w.
func chmodUW(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, fi.Mode().Perm()|0o200); err != nil {
		t.Fatal(err)
	}
}

// TestServeLockedHint opens a data directory a running sessiond holds: the hint names that
// process; stopping it as the hint says frees the directory.
func TestServeLockedHint(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	_, first, _ := startServer(t, data)
	_, errOut, code := runCLI(t, "", "serve", "--addr", "127.0.0.1:0", "--data", data)
	m := regexp.MustCompile(`hint: --data (\S+) is in use by process (\d+), another sessiond; stop it \(kill (\d+)\) or choose another --data`).FindStringSubmatch(errOut)
	if code != 1 || m == nil || m[1] != data || m[2] != strconv.Itoa(first.Process.Pid) || m[3] != m[2] {
		t.Fatalf("exit %d, stderr %q; want the hint naming pid %d", code, errOut, first.Process.Pid)
	}
	pid, _ := strconv.Atoi(m[3])
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	if started, errOut, code := (unprivileged{bin: os.Args[0]}).tryServe(t, data); !started {
		t.Errorf("after kill %d: exit %d\n%s", pid, code, errOut)
	}
}
