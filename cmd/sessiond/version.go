package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

func init() {
	commands["version"] = command{summary: "print the module version and the VCS revision it was built from (also --version)", run: runVersion}
}

// buildVersion is what "sessiond version --json" prints.
type buildVersion struct {
	Version  string `json:"version"`            // the module version, or "(devel)"
	Module   string `json:"module"`             // the main module's path
	Go       string `json:"go"`                 // the toolchain that built the binary
	Platform string `json:"platform"`           // GOOS/GOARCH
	Revision string `json:"revision,omitempty"` // the VCS revision; empty when not recorded
	Time     string `json:"time,omitempty"`     // the revision's commit time
	Modified bool   `json:"modified"`           // the work tree had uncommitted changes
}

func runVersion(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	cl := newCommandLine("version", stdout, stderr)
	asJSON := cl.fs.Bool("json", false, "print JSON for programs instead of text for people")
	if _, code, ok := cl.parse(args); !ok {
		return code
	}
	info, ok := debug.ReadBuildInfo()
	v := readVersion(info, ok, runtime.GOOS+"/"+runtime.GOARCH)
	if *asJSON {
		printJSON(stdout, v)
		return 0
	}
	fmt.Fprint(stdout, v.String())
	return 0
}

// readVersion takes the version from the build information. A build without a module version
// (go run, go test, go build of a checkout without a tag) has "(devel)"; one without VCS
// information (go run, go test) has no revision.
func readVersion(info *debug.BuildInfo, ok bool, platform string) buildVersion {
	v := buildVersion{Version: "(devel)", Module: "(unknown)", Go: runtime.Version(), Platform: platform}
	if !ok || info == nil {
		return v
	}
	if info.Main.Version != "" {
		v.Version = info.Main.Version
	}
	if info.Main.Path != "" {
		v.Module = info.Main.Path
	}
	if info.GoVersion != "" {
		v.Go = info.GoVersion
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String says what the binary is, in three lines:
//
//	sessiond v1.2.3
//	module github.com/sessiond/sessiond, go1.26.8, linux/amd64
//	revision 0123abcd… (2026-03-01T12:00:00Z), modified
func (v buildVersion) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sessiond %s\nmodule %s, %s, %s\n", v.Version, v.Module, v.Go, v.Platform)
	if v.Revision == "" {
		b.WriteString("revision unknown: built without VCS information (go run, go test and go build -buildvcs=false do not record it)\n")
		return b.String()
	}
	b.WriteString("revision " + v.Revision)
	if v.Time != "" {
		b.WriteString(" (" + v.Time + ")")
	}
	if v.Modified {
		b.WriteString(", modified")
	}
	b.WriteString("\n")
	return b.String()
}
