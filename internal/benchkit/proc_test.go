package benchkit

import (
	"os"
	"strings"
	"testing"
)

// TestProcTail: a long log is shown by its first line (where a program that refuses its
// arguments says why) and its end.
func TestProcTail(t *testing.T) {
	path := t.TempDir() + "/p.log"
	long := "sessiond serve: flag provided but not defined: -x\n" + strings.Repeat("usage line\n", 400) + "the last line\n"
	if err := os.WriteFile(path, []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	got := (&Proc{log: path}).Tail()
	if !strings.HasPrefix(got, "sessiond serve: flag provided but not defined: -x\n…\n") || !strings.HasSuffix(got, "the last line") || len(got) > 1700 {
		t.Errorf("tail of a %d-byte log = %d bytes:\n%.200s…", len(long), len(got), got)
	}
	if err := os.WriteFile(path, []byte("short\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := (&Proc{log: path}).Tail(); got != "short" {
		t.Errorf("tail of a short log = %q, want it whole", got)
	}
}
