package web

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"testing"
)

// vendorRow is one row of static/vendor/VENDOR.md's table of files.
var vendorRow = regexp.MustCompile("^\\| `([^`]+)` \\| ([^|]+) \\| ([^|]+) \\| `([^`]+)` \\| `([0-9a-f]{64})` \\| ([^|]+) \\|$")

// TestVendoredChecksums recomputes the sha256 of every vendored file and compares it with
// static/vendor/VENDOR.md, the one place that records them; every file of static/vendor/ is
// listed there, and every listed file exists. A file changed by hand fails here: update it
// as static/vendor/VENDOR.md says (npm pack, copy, record the new checksum).
func TestVendoredChecksums(t *testing.T) {
	const manifest = "static/vendor/VENDOR.md"
	doc, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for line := range strings.SplitSeq(string(doc), "\n") {
		m := vendorRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name, want := m[1], m[5]
		listed[name] = true
		b, err := static.ReadFile("static/vendor/" + name)
		if err != nil {
			t.Errorf("%s is listed in static/vendor/VENDOR.md but not embedded: %v", name, err)
			continue
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != want {
			t.Errorf("%s (%s %s): sha256 %s, static/vendor/VENDOR.md says %s", name, strings.TrimSpace(m[2]), strings.TrimSpace(m[3]), got, want)
		}
	}
	if len(listed) == 0 {
		t.Fatal("static/vendor/VENDOR.md lists no files (its table's format changed?)")
	}
	entries, err := fs.ReadDir(static, "static/vendor")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if "static/vendor/"+e.Name() != manifest && !listed[e.Name()] {
			t.Errorf("static/vendor/%s is not listed in static/vendor/VENDOR.md with its version and checksum", e.Name())
		}
	}
}

// TestImportMapNamesVendoredFiles: every module the page's import map names is an embedded
// file, and the Content-Security-Policy carries the import map's hash (else the browser
// would refuse it).
func TestImportMapNamesVendoredFiles(t *testing.T) {
	page := string(index.body)
	for _, m := range regexp.MustCompile(`"(/ui/[^"]+)"`).FindAllStringSubmatch(page, -1) {
		if _, ok := assets[strings.TrimPrefix(m[1], "/ui/")]; !ok {
			t.Errorf("index.html names %s, which is not embedded", m[1])
		}
	}
	if !strings.Contains(csp, importMapHash(index.body)) || !strings.HasPrefix(importMapHash(index.body), "sha256-") {
		t.Errorf("CSP %q lacks the import map's hash", csp)
	}
}
