package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// TestFileURI pins the SQLite URI of a database path: an absolute path gets an empty
// authority (file:///…), a relative one none at all (file:rel/…), and the characters SQLite
// reads as query, fragment or escape are %-escaped.
func TestFileURI(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the table holds POSIX paths")
	}
	for _, tc := range []struct{ path, want string }{
		{"/var/lib/sessiond/sessiond.db", "file:///var/lib/sessiond/sessiond.db"},
		{"sessiond-data/sessiond.db", "file:sessiond-data/sessiond.db"},
		{"./sessiond-data/sessiond.db", "file:./sessiond-data/sessiond.db"},
		{"../up/sessiond.db", "file:../up/sessiond.db"},
		{"/tmp/with space/sessiond.db", "file:///tmp/with%20space/sessiond.db"},
		{"/tmp/q?x=1/sessiond.db", "file:///tmp/q%3Fx=1/sessiond.db"},
		{"/tmp/hash#1/sessiond.db", "file:///tmp/hash%231/sessiond.db"},
		{"/tmp/pct%41/sessiond.db", "file:///tmp/pct%2541/sessiond.db"},
		{"rel:colon/sessiond.db", "file:rel:colon/sessiond.db"},
	} {
		if got := fileURI(tc.path); got != tc.want {
			t.Errorf("fileURI(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

// TestOpenRelativeDir opens the store with relative data directories, as "sessiond serve"
// does with its default ./sessiond-data: the database lands in the directory relative to the
// working directory at Open, and the same store opens again by its absolute path from
// elsewhere.
func TestOpenRelativeDir(t *testing.T) {
	for _, rel := range []string{"sessiond-data", "./sessiond-data", "a/b/../data", "nested/deeper/data"} {
		t.Run(rel, func(t *testing.T) {
			cwd := t.TempDir()
			t.Chdir(cwd)
			st, err := Open(context.Background(), rel)
			if err != nil {
				t.Fatalf("Open(%q) from %s: %v", rel, cwd, err)
			}
			createOne(t, st, "S-rel")
			// A later change of working directory does not move the store.
			t.Chdir(t.TempDir())
			createOne(t, st, "S-after-chdir")
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			abs := filepath.Join(cwd, rel)
			if _, err := os.Stat(filepath.Join(abs, DBFile)); err != nil {
				t.Fatalf("the database is not in %s: %v", abs, err)
			}
			st = openAt(t, abs)
			for _, id := range []string{"S-rel", "S-after-chdir"} {
				if _, err := st.GetSession(context.Background(), id); err != nil {
					t.Errorf("session %s, reopened by the absolute path: %v", id, err)
				}
			}
		})
	}
}

// TestOpenSpecialCharacters opens data directories whose names hold the characters a URI
// gives a meaning to, relative and absolute, and checks that the database is where it was
// asked to be (not in a directory named after part of the path).
func TestOpenSpecialCharacters(t *testing.T) {
	names := []string{"with space", "q?x=1", "hash#1", "pct%41", "pct%2F", "amp&eq=1", "colon:1", "semi;1", "plus+1", "ünï"}
	if runtime.GOOS == "windows" {
		names = []string{"with space", "hash#1", "pct%41", "amp&eq=1", "semi;1", "plus+1", "ünï"}
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			cwd := t.TempDir()
			t.Chdir(cwd)
			for _, dir := range []string{name, filepath.Join(cwd, "abs", name)} {
				st, err := Open(context.Background(), dir)
				if err != nil {
					t.Fatalf("Open(%q): %v", dir, err)
				}
				createOne(t, st, "S-1")
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}
				path := dir
				if !filepath.IsAbs(path) {
					path = filepath.Join(cwd, dir)
				}
				if _, err := os.Stat(filepath.Join(path, DBFile)); err != nil {
					t.Errorf("the database is not in %s: %v", path, err)
				}
				st = openAt(t, path)
				if _, err := st.GetSession(context.Background(), "S-1"); err != nil {
					t.Errorf("reopened %s: %v", path, err)
				}
			}
			// Nothing was created beside the asked-for directories.
			entries, err := os.ReadDir(cwd)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if e.Name() != name && e.Name() != "abs" {
					t.Errorf("unexpected %q in the working directory", e.Name())
				}
			}
		})
	}
}

// createOne creates the fixture session id in st.
func createOne(t *testing.T, st store.Store, id string) {
	t.Helper()
	if err := st.CreateSession(context.Background(), storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
		t.Fatalf("CreateSession %s: %v", id, err)
	}
}
