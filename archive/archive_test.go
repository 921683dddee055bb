package archive

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
)

// sample returns the bytes of a small, valid archive file and its content.
func sample(t *testing.T) ([]byte, *Content) {
	t.Helper()
	p := "demo"
	c := &Content{SessionID: "S-1", Project: &p, ArchivedAt: "2026-03-01T12:00:00.000Z",
		Record:       contract.SessionRecord{SessionID: "S-1"},
		LastSequence: -1, Runs: []contract.Run{}, Events: []json.RawMessage{}}
	data, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return data, c
}

// TestDecodeRefusesAsInvalid: Decode reads back what Encode wrote, and refuses every damaged
// file with an *Error of kind ErrInvalid.
func TestDecodeRefusesAsInvalid(t *testing.T) {
	good, want := sample(t)
	got, sum, err := Decode(good)
	if err != nil || got.SessionID != want.SessionID || *got.Project != *want.Project || sum == "" {
		t.Fatalf("Decode(Encode(c)) = %+v, %q, %v", got, sum, err)
	}
	for _, tc := range []struct{ name, from, to string }{
		{"truncated", "", ""},
		{"other format", `"format":"sessiond-archive"`, `"format":"zip"`},
		{"newer version", `"version":2`, `"version":3`},
		{"other checksum", `"checksum":"sha256:`, `"checksum":"sha256:00`},
		{"header disagrees", `"sessionId":"S-1","project"`, `"sessionId":"S-2","project"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := good[:len(good)/2]
			if tc.from != "" {
				if !bytes.Contains(good, []byte(tc.from)) {
					t.Fatalf("the sample file has no %s", tc.from)
				}
				data = bytes.Replace(good, []byte(tc.from), []byte(tc.to), 1)
			}
			_, _, err := Decode(data)
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrInvalid) || e.Message == "" {
				t.Errorf("Decode = %v, want an *Error of kind ErrInvalid", err)
			}
		})
	}
}

// TestDirectory: Save stores a file under the name its content gives it, List finds it, Find
// returns its path, and names that are not archive names are not found.
func TestDirectory(t *testing.T) {
	data, c := sample(t)
	dir := t.TempDir()
	info, err := Save(dir, data)
	if err != nil {
		t.Fatal(err)
	}
	at, _ := time.Parse(time.RFC3339, c.ArchivedAt)
	if info.Name != FileName(c.SessionID, at) || filepath.Dir(info.Path) != filepath.Join(dir, ProjectDir(c.Project)) {
		t.Errorf("Save stored %+v", info)
	}
	if again, err := Save(dir, data); err != nil || again.Path != info.Path {
		t.Errorf("saving the same file again = %+v, %v; want a no-op", again, err)
	}
	if list, err := List(dir, "demo"); err != nil || len(list) != 1 || list[0].Name != info.Name {
		t.Errorf("List = %+v, %v", list, err)
	}
	if p, err := Find(dir, info.Name); err != nil || p != info.Path {
		t.Errorf("Find = %q, %v", p, err)
	}
	for _, name := range []string{"../" + info.Name, ".tmp-RC-1", "RC-nope.json"} {
		if _, err := Find(dir, name); !errors.Is(err, ErrNotFound) {
			t.Errorf("Find(%q) = %v, want ErrNotFound", name, err)
		}
	}
	if err := Within(dir, filepath.Join(dir, "..", "x")); err == nil {
		t.Error("Within accepted a path outside the directory")
	}
}

// TestChainHeadChecked: an archive records the hash chain's head over its events (version 2);
// a file whose events were altered and whose checksum was made to match again is refused by
// Decode and VerifyFile, since its events no longer chain to the recorded head; a version 1
// file (no chainHead) still reads, and a version 2 file without one is refused.
func TestChainHeadChecked(t *testing.T) {
	p := "demo"
	c := &Content{SessionID: "S-1", Project: &p, ArchivedAt: "2026-03-01T12:00:00.000Z",
		Record: contract.SessionRecord{SessionID: "S-1"}, LastSequence: 1, Runs: []contract.Run{},
		Events: []json.RawMessage{json.RawMessage(`{"a":1}`), json.RawMessage(`{"b":2}`)}}
	good, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.ChainHead) != 64 {
		t.Fatalf("chainHead %q", c.ChainHead)
	}
	// rewrap makes a file of content with a header that matches it (checksum and length).
	rewrap := func(version int, content []byte) []byte {
		sum := sha256.Sum256(content)
		h := header{Format: Format, Version: version, SessionID: "S-1", Project: &p, ArchivedAt: c.ArchivedAt,
			Checksum: "sha256:" + hex.EncodeToString(sum[:]), ContentBytes: len(content)}
		hb, _ := json.Marshal(h)
		return append(append(append(hb[:len(hb)-1:len(hb)-1], `,"content":`...), content...), "}\n"...)
	}
	content := func(data []byte) []byte {
		var f file
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		return f.Content
	}(good)
	for _, tc := range []struct {
		name    string
		version int
		content []byte
		says    string
	}{
		{"as written", 2, content, ""},
		{"an event altered", 2, bytes.Replace(content, []byte(`{"b":2}`), []byte(`{"b":3}`), 1), "do not chain"},
		{"no chainHead", 2, bytes.Replace(content, []byte(`,"chainHead":"`+c.ChainHead+`"`), nil, 1), "no chainHead"},
		{"version 1 without chainHead", 1, bytes.Replace(content, []byte(`,"chainHead":"`+c.ChainHead+`"`), nil, 1), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := rewrap(tc.version, tc.content)
			path := filepath.Join(t.TempDir(), "a.json")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, derr := Decode(data)
			_, _, verr := VerifyFile(path, func(int, []byte) error { return nil })
			for what, err := range map[string]error{"Decode": derr, "VerifyFile": verr} {
				switch {
				case tc.says == "" && err != nil:
					t.Errorf("%s: %v", what, err)
				case tc.says != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.says)):
					t.Errorf("%s = %v, want ErrInvalid saying %q", what, err, tc.says)
				}
			}
		})
	}
}
