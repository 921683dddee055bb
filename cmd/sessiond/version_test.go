package main

import (
	"encoding/json"
	"regexp"
	"runtime/debug"
	"testing"
)

func TestVersionString(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{"go build of a tagged checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/sessiond/sessiond", Version: "v1.2.3"},
			Settings: vcs("vcs", "git", "vcs.revision", "0123abcd", "vcs.time", "2026-03-01T12:00:00Z", "vcs.modified", "false")}, true,
			"sessiond v1.2.3\nmodule github.com/sessiond/sessiond, go1.26.8, linux/amd64\nrevision 0123abcd (2026-03-01T12:00:00Z)\n"},
		{"modified work tree", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/sessiond/sessiond", Version: "v0.0.0-20260301120000-0123abcd+dirty"},
			Settings: vcs("vcs.revision", "0123abcd", "vcs.time", "2026-03-01T12:00:00Z", "vcs.modified", "true")}, true,
			"sessiond v0.0.0-20260301120000-0123abcd+dirty\nmodule github.com/sessiond/sessiond, go1.26.8, linux/amd64\nrevision 0123abcd (2026-03-01T12:00:00Z), modified\n"},
		{"go run: (devel), no VCS", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/sessiond/sessiond", Version: "(devel)"}}, true,
			"sessiond (devel)\nmodule github.com/sessiond/sessiond, go1.26.8, linux/amd64\nrevision unknown: built without VCS information (go run, go test and go build -buildvcs=false do not record it)\n"},
		{"revision without time", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "m"}, Settings: vcs("vcs.revision", "abc")}, true,
			"sessiond (devel)\nmodule m, go1.26.8, linux/amd64\nrevision abc\n"},
	} {
		if got := readVersion(tc.info, tc.ok, "linux/amd64").String(); got != tc.want {
			t.Errorf("%s:\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
	// Without build information at all, the module and revision are unknown, the toolchain is
	// this binary's own.
	if got := readVersion(nil, false, "linux/amd64"); got.Version != "(devel)" || got.Module != "(unknown)" || got.Go == "" || got.Revision != "" {
		t.Errorf("no build info: %+v", got)
	}
}

// TestVersionCommand runs "sessiond --version" and "sessiond version --json" in this test
// binary, which go test builds without VCS information.
func TestVersionCommand(t *testing.T) {
	shape := regexp.MustCompile(`^sessiond \S+\nmodule \S+, go1\.\S+, [a-z0-9]+/[a-z0-9]+\nrevision \S.*\n$`)
	for _, args := range [][]string{{"--version"}, {"version"}, {"-version"}} {
		code, out, errOut := runIn(args...)
		if code != 0 || !shape.MatchString(out) || errOut != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	code, out, _ := runIn("version", "--json")
	var v buildVersion
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.Version == "" || v.Module == "" || v.Go == "" || v.Platform == "" {
		t.Errorf("version --json: exit %d, %q (%v)", code, out, err)
	}
}
