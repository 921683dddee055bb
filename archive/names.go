package archive

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// SafeName turns s (a session id or project name) into one file name component that cannot
// escape a directory: bytes other than ASCII letters, digits, '.', '_' and '-' become '_', a
// leading '.' becomes '_' (no ".", "..", or hidden files), and the result is at most
// maxNameBytes long. When anything was changed, a hash of s is appended, so that different
// inputs keep different names.
func SafeName(s string) string {
	var b strings.Builder
	changed := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || (c == '.' && i > 0)
		if !ok {
			c, changed = '_', true
		}
		b.WriteByte(c)
	}
	out := b.String()
	if len(out) > maxNameBytes-9 {
		out, changed = out[:maxNameBytes-9], true
	}
	if out == "" || changed {
		h := sha256.Sum256([]byte(s))
		out += "-" + hex.EncodeToString(h[:4])
	}
	return out
}

func ProjectDir(project *string) string {
	if project == nil || *project == "" {
		return noProject
	}
	return "p-" + SafeName(*project)
}

// FileName is RC-<stamp>-<session>.json.
func FileName(sessionID string, at time.Time) string {
	return "RC-" + at.UTC().Format("20060102T150405.000Z") + "-" + SafeName(sessionID) + ".json"
}

// ValidName reports whether name is an archive name this package writes.
func ValidName(name string) bool {
	return strings.HasPrefix(name, "RC-") && strings.HasSuffix(name, ".json") && len(name) <= 128 &&
		SafeName(strings.TrimSuffix(name, ".json")) == strings.TrimSuffix(name, ".json")
}

// Within fails unless path is inside dir (defence in depth: names are already safe).
func Within(dir, path string) error {
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") || filepath.IsAbs(rel) {
		return fmt.Errorf("archive path %q is outside the archive directory %q", path, dir)
	}
	return nil
}
