package openapigen

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite "+Path+" from the operations table")

// root is the repository root, from this package's directory.
const root = "../.."

// TestOpenAPIDocument regenerates api/openapi.json and fails when the committed document
// differs, so the document always says what the tables and Go types say. With -update it
// rewrites the document instead.
func TestOpenAPIDocument(t *testing.T) {
	got, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, Path)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v\nhint: generate it with: %s", err, RegenerateCommand)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		line := 0
		for line < len(gl) && line < len(wl) && gl[line] == wl[line] {
			line++
		}
		t.Fatalf("%s is out of date from line %d\nhint: regenerate it with: %s", Path, line+1, RegenerateCommand)
	}
}

// TestEveryReferenceResolves: every $ref of the document names a component it has, and every
// component is referred to (extensions included, which linters do not follow).
func TestEveryReferenceResolves(t *testing.T) {
	doc, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, m := range regexp.MustCompile(`"\$ref": "#/components/schemas/([^"]+)"`).FindAllSubmatch(doc, -1) {
		name := string(m[1])
		used[name] = true
		if _, ok := d.Components.Schemas[name]; !ok {
			t.Errorf("$ref to #/components/schemas/%s, which the document does not have", name)
		}
	}
	for name := range d.Components.Schemas {
		if !used[name] && name != "ErrorCode" {
			t.Errorf("component %s is never referred to", name)
		}
	}
}
