package bridge

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestPureProjection: package bridge is a pure projection of the log (docs/architecture.md):
// of this module, it and everything it depends on, directly or not, is package contract.
// Carrying a client's request out is package session's (session.Chat).
func TestPureProjection(t *testing.T) {
	const module = "github.com/sessiond/sessiond/"
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var own []string
	for _, p := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(p, module); ok {
			own = append(own, rest)
		}
	}
	slices.Sort(own)
	if want := []string{"bridge", "contract"}; !slices.Equal(own, want) {
		t.Errorf("go list -deps ./bridge shows %v of this module; want only %v: move what needs more to package session or server", own, want)
	}
}
