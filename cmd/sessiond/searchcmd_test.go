package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/sqlite"
	"github.com/sessiond/sessiond/store/storetest"
)

// TestSearchIndexCommands: search-index rebuild indexes a store's logs and reports a clean
// check; check finds a document removed behind the index's back (exit 1) and refuses an
// unknown action (exit 2).
func TestSearchIndexCommands(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateSession(ctx, storetest.NewSession("S-1", storetest.SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, "S-1", append(storetest.Batch(t, "S-1", "k", 5), storetest.TerminalEvent(t, "S-1", "w", "findme")), store.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	run1 := func(want int, args ...string) (string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(args, nil, &out, &errOut); code != want {
			t.Fatalf("sessiond %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out.String(), errOut.String())
		}
		return out.String(), errOut.String()
	}
	out, _ := run1(0, "search-index", "rebuild", "--data", dir, "--json")
	var rep searchIndexReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.Clean || rep.Indexed != 6 || rep.Documents != 6 || rep.Sessions != 1 {
		t.Fatalf("rebuild: %s (%v)", out, err)
	}
	if out, _ := run1(0, "search-index", "check", "--data", dir); !strings.Contains(out, "the index equals a rebuild") {
		t.Errorf("check: %s", out)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, sqlite.SearchFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM docs WHERE seq = 5`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if out, _ := run1(1, "search-index", "check", "--data", dir); !strings.Contains(out, `session "S-1": the event at 5 is not in the index`) {
		t.Errorf("check of a damaged index: %s", out)
	}
	run1(0, "search-index", "rebuild", "--data", dir)
	run1(0, "search-index", "check", "--data", dir)
	if _, errOut := run1(2, "search-index", "vacuum", "--data", dir); !strings.Contains(errOut, "give rebuild or check") {
		t.Errorf("unknown action: %s", errOut)
	}
}
