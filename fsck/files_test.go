package fsck_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/fsck"
	"github.com/sessiond/sessiond/store/sqlite"
)

// snapshotDir returns every file of dir (recursively) with its bytes.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		files[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func sameFiles(t *testing.T, before, after map[string]string) {
	t.Helper()
	for p, b := range before {
		if a, ok := after[p]; !ok {
			t.Errorf("%s was removed", p)
		} else if a != b {
			t.Errorf("%s changed", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s was created", p)
		}
	}
}

// TestTruncatedAndForeignFiles: fsck on a truncated database reports it, on a file that is
// not a sessiond database refuses to check it, and neither changes a byte of the directory.
func TestTruncatedAndForeignFiles(t *testing.T) {
	good := t.TempDir()
	st, err := sqlite.Open(context.Background(), good)
	if err != nil {
		t.Fatal(err)
	}
	fixture(t, st, t.TempDir())
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(filepath.Join(good, sqlite.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(db) < 8*4096 {
		t.Fatalf("the fixture's database is %d bytes; the test needs some pages to cut", len(db))
	}

	t.Run("truncated", func(t *testing.T) {
		for _, size := range []int{len(db) / 2, len(db) - 4096, 4096} {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, sqlite.DBFile), db[:size], 0o600); err != nil {
				t.Fatal(err)
			}
			before := snapshotDir(t, dir)
			in, err := sqlite.OpenInspector(context.Background(), dir)
			switch {
			case err != nil && !errors.Is(err, sqlite.ErrCorrupt):
				t.Errorf("cut at %d bytes: %v; want ErrCorrupt", size, err)
			case err == nil:
				rep, cerr := fsck.Check(context.Background(), in, fsck.Options{})
				in.Close()
				switch {
				case cerr != nil:
					t.Errorf("cut at %d bytes: the check failed (%v) instead of reporting the damage", size, cerr)
				case rep.Clean():
					t.Errorf("cut at %d bytes: a truncated database checks clean", size)
				case rep.Findings[0].Check != fsck.CheckDatabase:
					t.Errorf("cut at %d bytes: first finding %v; want the database's own check", size, rep.Findings[0])
				}
			}
			sameFiles(t, before, snapshotDir(t, dir))
		}
	})

	t.Run("foreign", func(t *testing.T) {
		for name, content := range map[string][]byte{
			"text":   []byte("these are not the pages you are looking for\n"),
			"sqlite": nil, // an SQLite database of another program, made below
		} {
			dir := t.TempDir()
			path := filepath.Join(dir, sqlite.DBFile)
			if content == nil {
				otherSQLite(t, path)
			} else if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			before := snapshotDir(t, dir)
			in, err := sqlite.OpenInspector(context.Background(), dir)
			if err == nil {
				in.Close()
				t.Errorf("%s: OpenInspector accepted a foreign file", name)
			} else if !errors.Is(err, sqlite.ErrNotAStore) {
				t.Errorf("%s: %v; want ErrNotAStore", name, err)
			}
			sameFiles(t, before, snapshotDir(t, dir))
		}
	})

	t.Run("missing", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := sqlite.OpenInspector(context.Background(), dir); err == nil || !strings.Contains(err.Error(), sqlite.DBFile) {
			t.Errorf("got %v; want an error naming the missing database", err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("the empty directory now holds %v", ents)
		}
	})
}

// TestOnlineBesideServer checks a store while it is open and appending: the inspector reads
// beside the writer (Online), and a check in the middle of appends finds nothing.
func TestOnlineBesideServer(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fixture(t, st, t.TempDir())
	in, err := sqlite.OpenInspector(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if !in.Online() {
		t.Error("Online is false while a store holds the directory")
	}
	stop := make(chan struct{})
	done := make(chan error)
	go func() { done <- keepAppending(st, "S-run", stop) }()
	for range 5 {
		rep, err := fsck.Check(context.Background(), in, fsck.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Clean() {
			t.Fatalf("a check beside appends has findings:\n%s", findings(rep))
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
