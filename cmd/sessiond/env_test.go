package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// TestApplyEnv: every serve flag is settable from its SESSIOND_ variable, the command line wins
// over the environment, a SESSIOND_ variable that names no flag is refused (naming it) unless
// it is one of the documented others, and a bad value is refused naming the variable.
func TestApplyEnv(t *testing.T) {
	newFS := func() (*flag.FlagSet, *string, *time.Duration, *int) {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		return fs, fs.String("addr", "127.0.0.1:7420", ""), fs.Duration("stale-after", time.Minute, ""), fs.Int("max-attempts", 1, "")
	}
	cases := []struct {
		name     string
		env      []string
		args     []string
		addr     string
		attempts int
		stale    time.Duration
		err      string // a substring of the error; "" for none
	}{
		{name: "defaults", addr: "127.0.0.1:7420", attempts: 1, stale: time.Minute},
		{name: "from the environment", env: []string{"SESSIOND_ADDR=0.0.0.0:80", "SESSIOND_MAX_ATTEMPTS=3", "SESSIOND_STALE_AFTER=2s"}, addr: "0.0.0.0:80", attempts: 3, stale: 2 * time.Second},
		{name: "the command line wins", env: []string{"SESSIOND_MAX_ATTEMPTS=3"}, args: []string{"--max-attempts", "5"}, addr: "127.0.0.1:7420", attempts: 5, stale: time.Minute},
		{name: "other variables pass", env: []string{"SESSIOND_KEY=k", "SESSIOND_SERVER=http://x", "SESSIOND_TEST_POSTGRES=postgres://", "PATH=/bin", "SESSIONDX=1"}, addr: "127.0.0.1:7420", attempts: 1, stale: time.Minute},
		{name: "a misspelling is refused", env: []string{"SESSIOND_MAX_ATTEMPT=3"}, err: "unknown environment variable SESSIOND_MAX_ATTEMPT"},
		{name: "a bad value names the variable", env: []string{"SESSIOND_STALE_AFTER=soon"}, err: `SESSIOND_STALE_AFTER="soon" (flag --stale-after)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs, addr, stale, attempts := newFS()
			err := applyEnv(fs, c.env)
			if err == nil {
				err = fs.Parse(c.args)
			}
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *addr != c.addr || *attempts != c.attempts || *stale != c.stale {
				t.Errorf("addr %q, max-attempts %d, stale-after %s; want %q, %d, %s", *addr, *attempts, *stale, c.addr, c.attempts, c.stale)
			}
		})
	}
}

// TestServeRefusesUnknownEnv runs serve as a user would with a misspelt variable: it exits 2
// before opening anything and names the variable.
func TestServeRefusesUnknownEnv(t *testing.T) {
	t.Setenv("SESSIOND_STALE_AFER", "1m")
	_, errOut, code := runCLI(t, "", "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir())
	if code != 2 || !strings.Contains(errOut, "SESSIOND_STALE_AFER") || !strings.Contains(errOut, "SESSIOND_STALE_AFTER") {
		t.Fatalf("exit %d, stderr %q; want 2 naming SESSIOND_STALE_AFER and listing SESSIOND_STALE_AFTER", code, errOut)
	}
}
