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

func runVersion(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	cl := newCommandLine("version", stdout, stderr)
	if _, code, ok := cl.parse(args); !ok {
		return code
	}
	info, ok := debug.ReadBuildInfo()
	fmt.Fprint(stdout, formatVersion(info, ok, runtime.GOOS+"/"+runtime.GOARCH))
	return 0
}

// formatVersion says what the binary is, in three lines:
//
//	sessiond v1.2.3
//	module github.com/sessiond/sessiond, go1.26.8, linux/amd64
//	revision 0123abcd… (2026-03-01T12:00:00Z), modified
//
// A build without a module version (go run, go test, go build outside a tagged checkout in
// older toolchains) says (devel); one without VCS information says so on the third line.
func formatVersion(info *debug.BuildInfo, ok bool, platform string) string {
	if !ok || info == nil {
		return "sessiond (devel)\nbuild information: none (the binary was built without module support)\n"
	}
	version := info.Main.Version
	if version == "" {
		version = "(devel)"
	}
	module := info.Main.Path
	if module == "" {
		module = "(unknown)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "sessiond %s\nmodule %s, %s, %s\n", version, module, info.GoVersion, platform)
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	rev := settings["vcs.revision"]
	if rev == "" {
		b.WriteString("revision unknown: built without VCS information (go run and go test do not record it; go build in a git checkout does)\n")
		return b.String()
	}
	b.WriteString("revision " + rev)
	if t := settings["vcs.time"]; t != "" {
		b.WriteString(" (" + t + ")")
	}
	if settings["vcs.modified"] == "true" {
		b.WriteString(", modified")
	}
	b.WriteString("\n")
	return b.String()
}
