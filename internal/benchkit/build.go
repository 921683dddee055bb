package benchkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// Build is one program built once per process, by its import path, into a temporary directory
// that Cleanup removes. The build runs in the test's working directory, so the path resolves
// in the module of the package under test (this module, or the bench module, which requires it).
type Build struct {
	Pkg  string // import path of the main package
	Name string // the binary's file name

	once sync.Once
	at   string
	err  error
}

// The binaries' directory, made once per process.
var (
	binDirOnce sync.Once
	binDir     string
	binDirErr  error
)

// Path builds the program the first time it is called and returns the binary's path.
func (b *Build) Path() (string, error) {
	b.once.Do(func() {
		binDirOnce.Do(func() { binDir, binDirErr = os.MkdirTemp("", "benchkit-bin-") })
		if binDirErr != nil {
			b.err = binDirErr
			return
		}
		b.at = filepath.Join(binDir, b.Name)
		if out, err := exec.Command("go", "build", "-o", b.at, b.Pkg).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", b.Pkg, err, out)
		}
	})
	return b.at, b.err
}

var sessiondBuild = &Build{Pkg: "github.com/sessiond/sessiond/cmd/sessiond", Name: "sessiond"}

// Binary builds cmd/sessiond once per process (removed by Cleanup) and returns the binary's
// path: the one StartSessiond runs.
func Binary() (string, error) { return sessiondBuild.Path() }

// Cleanup removes every binary the package built in this process.
func Cleanup() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}
