package refdoc

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The docs must never send a reader to a file that is not in the repository. These tests check
// every relative link and every file path mentioned in README.md and docs/*.md, and every
// Markdown file named in a Go file.

var (
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeSpan   = regexp.MustCompile("`([^`\n]+)`")
	mdMention  = regexp.MustCompile(`(?:^|[^\w./-])((?:\.\.?/)?(?:[\w.-]+/)*[\w.-]+\.md)\b`)
	pathInText = regexp.MustCompile(`(?:^|[\s(])((?:\.\.?/)?(?:[\w.-]+/)+[\w.-]+\.(?:md|go|json|jsonl|ndjson|sql))\b`)
)

// docFiles are the Markdown files a reader of the repository meets.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		files = append(files, rel)
	}
	if len(files) < 5 {
		t.Fatalf("found only %v; is the repository root %s?", files, root)
	}
	return files
}

// withoutFences drops fenced code blocks (commands and their output, checked by the tests
// that run them), keeping line numbers.
func withoutFences(text string) []string {
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
		}
	}
	return lines
}

// slug is the anchor GitHub gives a heading.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists the anchors of a Markdown file's headings, numbered as GitHub numbers repeats.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range withoutFences(text) {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimLeft(l, "#")
		if !strings.HasPrefix(h, " ") {
			continue
		}
		s := slug(h)
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// exists reports whether a path names a file or directory, relative to one of the bases.
func exists(p string, bases ...string) (string, bool) {
	for _, base := range bases {
		full := filepath.Join(base, filepath.FromSlash(p))
		if _, err := os.Stat(full); err == nil {
			return full, true
		}
	}
	return "", false
}

// topLevel lists the names at the repository root, which a path mentioned in prose starts with.
func topLevel(t *testing.T) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range entries {
		out[e.Name()] = true
	}
	return out
}

// TestDocLinks: every relative link in README.md and docs/*.md names a file of the repository
// (and, with a #fragment, a heading of that file), and every repository path the prose or an
// inline code span mentions exists.
func TestDocLinks(t *testing.T) {
	top := topLevel(t)
	for _, doc := range docFiles(t) {
		data, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, filepath.Dir(doc))
		own := anchors(string(data))
		for n, line := range withoutFences(string(data)) {
			at := doc + ":" + strconv.Itoa(n+1)
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				if file == "" {
					if !own[frag] {
						t.Errorf("%s: link to #%s, which is no heading of %s", at, frag, doc)
					}
					continue
				}
				full, ok := exists(file, dir)
				if !ok {
					t.Errorf("%s: link to %s, which is not in the repository", at, file)
					continue
				}
				if frag != "" && strings.HasSuffix(file, ".md") {
					b, err := os.ReadFile(full)
					if err != nil {
						t.Fatal(err)
					}
					if !anchors(string(b))[frag] {
						t.Errorf("%s: link to %s#%s, which is no heading of %s", at, file, frag, file)
					}
				}
			}
			var mentions []string
			for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
				if repoPath(m[1], top) {
					mentions = append(mentions, m[1])
				}
			}
			prose := codeSpan.ReplaceAllString(mdLink.ReplaceAllString(line, "]"), "")
			for _, m := range mdMention.FindAllStringSubmatch(prose, -1) {
				mentions = append(mentions, m[1])
			}
			for _, m := range pathInText.FindAllStringSubmatch(prose, -1) {
				if repoPath(m[1], top) {
					mentions = append(mentions, m[1])
				}
			}
			for _, p := range mentions {
				if _, ok := exists(strings.TrimSuffix(p, "/"), dir, root); !ok {
					t.Errorf("%s: mentions %s, which is not in the repository", at, p)
				}
			}
		}
	}
}

// repoPath reports whether an inline code span names a path of the repository: a Markdown
// file, or a path whose first element is at the repository root (`server/sessions.go`,
// `examples/echoagent`). Placeholders (`<...>`, `{id}`, `*`, `…`) and commands are not paths.
func repoPath(s string, top map[string]bool) bool {
	if strings.ContainsAny(s, " <>{}*…$=:") || strings.Contains(s, "...") {
		return false
	}
	if strings.HasSuffix(s, ".md") {
		return true
	}
	first, _, ok := strings.Cut(strings.TrimPrefix(s, "./"), "/")
	return ok && top[first]
}

// TestGoFilesCiteRepoFiles: a Markdown file named in a Go file (a comment pointing at the docs,
// a test reading one) is in the repository.
func TestGoFilesCiteRepoFiles(t *testing.T) {
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for n, line := range strings.Split(string(data), "\n") {
			reported := map[string]bool{}
			for _, m := range mdMention.FindAllStringSubmatch(line, -1) {
				// A page of docs/ may be named by its bare name, as the pages link each other.
				if _, ok := exists(m[1], filepath.Dir(path), root, filepath.Join(root, "docs")); !ok && !reported[m[1]] {
					reported[m[1]] = true
					rel, _ := filepath.Rel(root, path)
					t.Errorf("%s:%d: names %s, which is not in the repository; point at docs/reference.md or another page of docs/", rel, n+1, m[1])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
