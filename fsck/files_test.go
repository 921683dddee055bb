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

// TestAfterACrash checks a copy of a data directory taken while a store was open (what a
// crash leaves: the database, its WAL with commits not yet checkpointed, no server), with
// and without the WAL index file: the committed events are read from the WAL and the store
// checks clean; the database file is not changed.
func TestAfterACrash(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fixture(t, st, t.TempDir())
	for _, keepShm := range []bool{true, false} {
		crashed := t.TempDir()
		for _, name := range []string{sqlite.DBFile, sqlite.DBFile + "-wal", sqlite.DBFile + "-shm"} {
			if name == sqlite.DBFile+"-shm" && !keepShm {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(crashed, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if fi, err := os.Stat(filepath.Join(crashed, sqlite.DBFile+"-wal")); err != nil || fi.Size() == 0 {
			t.Fatalf("the copied WAL is empty or missing (%v): the test needs commits in it", err)
		}
		db, _ := os.ReadFile(filepath.Join(crashed, sqlite.DBFile))
		in, err := sqlite.OpenInspector(context.Background(), crashed)
		if err != nil {
			t.Fatalf("WAL index kept %v: %v", keepShm, err)
		}
		rep, err := fsck.Check(context.Background(), in, fsck.Options{})
		in.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Clean() || rep.Sessions != 5 || rep.Events < 16 {
			t.Errorf("WAL index kept %v: %+v, findings:\n%s", keepShm, rep.Progress, findings(rep))
		}
		if after, _ := os.ReadFile(filepath.Join(crashed, sqlite.DBFile)); string(after) != string(db) {
			t.Errorf("WAL index kept %v: the database file changed", keepShm)
		}
	}
}
