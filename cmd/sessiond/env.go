package main

import (
	"flag"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// envPrefix starts the name of every environment variable sessiond reads.
const envPrefix = "SESSIOND_"

// envName is the environment variable that sets the serve flag called name: SESSIOND_ and the
// name in upper case with '-' as '_' (--max-attempts: SESSIOND_MAX_ATTEMPTS).
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// otherEnv are the SESSIOND_ variables that are not serve flags, with what reads them: serve
// accepts them in its environment (a container's environment is shared by every process in
// it) and ignores them. The test-only ones are set by the project's tests for the processes
// they start.
var otherEnv = map[string]string{
	"SESSIOND_SERVER":            "the server the client commands talk to",
	"SESSIOND_KEY":               "the API key the client commands send",
	"SESSIOND_TEST_POSTGRES":     "test-only: the PostgreSQL database of the driver's tests",
	"SESSIOND_AS_MAIN":           "test-only: a test binary runs as sessiond",
	"SESSIOND_URL":               "test-only: the server of a Node test",
	"SESSIOND_DIFF_SESSIONS":     "test-only: the sessions per bridge of the interop differential test",
	"SESSIOND_CRASH_DIR":         "test-only: the crash test's child process",
	"SESSIOND_CRASH_ITER":        "test-only: the crash test's child process",
	"SESSIOND_WRITE_SCREENSHOTS": "test-only: the web UI's screenshots are written again",
	"SESSIOND_FANOUT_ADDR":       "test-only: the fan-out benchmark's child process",
	"SESSIOND_FANOUT_PATH":       "test-only: the fan-out benchmark's child process",
	"SESSIOND_FANOUT_N":          "test-only: the fan-out benchmark's child process",
	"SESSIOND_FANOUT_TOTAL":      "test-only: the fan-out benchmark's child process",
	"SESSIOND_FANOUT_FIRST":      "test-only: the fan-out benchmark's child process",
	"SESSIOND_IDLE_CLIENTS_ADDR": "test-only: the idle-subscriber benchmark's child process",
	"SESSIOND_IDLE_CLIENTS_PATH": "test-only: the idle-subscriber benchmark's child process",
	"SESSIOND_IDLE_CLIENTS_N":    "test-only: the idle-subscriber benchmark's child process",
}

// applyEnv sets each flag of fs from its SESSIOND_ variable in environ (os.Environ's form),
// before the command line is parsed, so that a flag given on the command line wins. It refuses
// a SESSIOND_ variable that names no flag of fs and is not one of otherEnv (a misspelt setting
// must not be ignored silently), and a value the flag refuses, naming the variable.
func applyEnv(fs *flag.FlagSet, environ []string) error {
	byEnv := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { byEnv[envName(f.Name)] = f.Name })
	var unknown []string
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, envPrefix) {
			continue
		}
		name, isFlag := byEnv[k]
		if !isFlag {
			if _, other := otherEnv[k]; !other {
				unknown = append(unknown, k)
			}
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("environment variable %s=%q (flag --%s): %v", k, v, name, err)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		known := make([]string, 0, len(byEnv))
		for k := range byEnv {
			known = append(known, k)
		}
		slices.Sort(known)
		return fmt.Errorf("unknown environment variable %s: it sets nothing (a misspelling?); the variables serve reads are %s, each named after its flag (sessiond serve --help lists them)",
			strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	return nil
}
