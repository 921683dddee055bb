package client

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestClientImportsNoDomain: importing the Go client pulls in neither the session domain nor
// the storage, only the wire shapes (api, wire, contract): the packages `go list -deps` shows
// for client and api hold none of the forbidden ones.
func TestClientImportsNoDomain(t *testing.T) {
	const mod = "github.com/sessiond/sessiond/"
	forbidden := []string{mod + "session", mod + "store", mod + "server"}
	for _, pkg := range []string{"./", "../api", "../wire"} {
		deps := goListDeps(t, pkg)
		if !slices.Contains(deps, mod+"contract") {
			t.Fatalf("go list -deps %s does not list contract, so it did not list the module's packages: %v", pkg, deps)
		}
		for _, d := range deps {
			for _, f := range forbidden {
				if d == f || strings.HasPrefix(d, f+"/") {
					t.Errorf("%s depends on %s; move the shape it needs to package wire or api", pkg, d)
				}
			}
		}
	}
}

// goListDeps returns the import paths `go list -deps` reports for the package in dir.
func goListDeps(t *testing.T, dir string) []string {
	t.Helper()
	// go test puts the go command of the toolchain that runs the test first on PATH.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to list dependencies with: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-deps", ".")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps in %s: %v", dir, err)
	}
	return strings.Fields(string(out))
}
