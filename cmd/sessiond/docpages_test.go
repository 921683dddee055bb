//go:build unix

package main

// The reference pages' commands as tests: every ```sh block of docs/api.md, docs/forks.md,
// docs/deploy.md and docs/security.md is run as written by the runner of docs_test.go (its rules and substitutions
// are at the top of that file), and every go test command line of docs/benchmarks.md is
// checked against the benchmarks that exist.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sessiond/sessiond/store/postgres/pgtest"
)

// runDoc runs every ```sh block of the document, in order, after the setup commands.
func runDoc(t *testing.T, r *docRun, doc string, setup ...docCommand) {
	t.Helper()
	blocks, err := parseSection(doc, "")
	if err != nil {
		t.Fatalf("%s: %v", r.name, err)
	}
	if len(blocks) == 0 {
		t.Fatalf("%s: no ```sh block", r.name)
	}
	for _, c := range setup {
		r.t.Logf("%s setup, as its prose says:", r.name)
		r.run(c)
	}
	for _, b := range blocks {
		for _, c := range b {
			r.run(c)
		}
	}
	r.finish()
}

// TestAPIDoc runs every example of docs/api.md in order against one fresh server, started as
// the page says: "sessiond serve" in an empty directory.
func TestAPIDoc(t *testing.T) {
	needTool(t, "curl", "docs/api.md's examples")
	doc := readDoc(t, "docs/api.md")
	if !strings.Contains(doc, "in an empty directory with `sessiond serve`") {
		t.Fatal("docs/api.md no longer says which server its examples run against; say it, and update this test")
	}
	r := newDocRun(t, "docs/api.md")
	runDoc(t, r, doc, docCommand{text: "sessiond serve"})
}

// TestSecurityDoc runs docs/security.md's commands in order in an empty directory: the first
// key made on the store, the server started with --auth, keys made through it, and the CLI
// with SESSIOND_KEY.
func TestSecurityDoc(t *testing.T) {
	needTool(t, "curl", "docs/security.md's commands")
	r := newDocRun(t, "docs/security.md")
	runDoc(t, r, readDoc(t, "docs/security.md"))
}

// TestForksDoc runs docs/forks.md's example against a fresh server, in the repository's root
// as the page says (examples/ is a link to the checkout's).
func TestForksDoc(t *testing.T) {
	doc := readDoc(t, "docs/forks.md")
	if !strings.Contains(doc, "Against a running server (`sessiond serve`), in the repository's root") {
		t.Fatal("docs/forks.md no longer says where its example runs; say it, and update this test")
	}
	r := newDocRun(t, "docs/forks.md")
	if err := os.Symlink(filepath.Join(r.repo, "examples"), filepath.Join(r.dir, "examples")); err != nil {
		t.Fatal(err)
	}
	runDoc(t, r, doc, docCommand{text: "sessiond serve"})
}

// TestDeployDoc runs docs/deploy.md's commands against the PostgreSQL database of
// SESSIOND_TEST_POSTGRES (skipped without it, failed under CI=true), with these rewrites, the
// ones the page lists: the role and the schema named sessiond in the psql commands and the
// --store URL get a name of their own for the run (dropped when the test ends); the URL's
// host, port, database and sslmode are the test database's; psql connects to it through
// libpq's PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE and PGSSLMODE. The high-availability
// section is left out: internal/failover's test runs its commands against two servers of its own.
func TestDeployDoc(t *testing.T) {
	base := pgtest.BaseURL(t)
	needTool(t, "psql", "docs/deploy.md's commands")
	needTool(t, "curl", "docs/deploy.md's commands")
	needTool(t, "openssl", "docs/deploy.md's TLS example")
	bu, err := url.Parse(base)
	if err != nil || bu.Scheme == "" {
		t.Fatalf("%s is not a URL (%v); this test needs postgres://user@host:port/db", pgtest.EnvVar, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "sessiond_doc_" + hex.EncodeToString(b[:])
	// Registered before the run's own cleanup, so it runs after the server has stopped.
	t.Cleanup(func() { dropRoleAndSchema(t, base, name) })

	r := newDocRun(t, "docs/deploy.md")
	r.env = append(r.env, "PGHOST="+bu.Hostname(), "PGDATABASE="+strings.TrimPrefix(bu.Path, "/"), "PGUSER="+bu.User.Username(), "PGCONNECT_TIMEOUT=10")
	if p := bu.Port(); p != "" {
		r.env = append(r.env, "PGPORT="+p)
	}
	if pw, ok := bu.User.Password(); ok {
		r.env = append(r.env, "PGPASSWORD="+pw)
	}
	if m := bu.Query().Get("sslmode"); m != "" {
		r.env = append(r.env, "PGSSLMODE="+m)
	}
	rewrites := 0
	r.rewrite = func(s string) string {
		if strings.HasPrefix(s, "psql ") {
			rewrites++
			return regexp.MustCompile(`\bsessiond\b`).ReplaceAllString(s, name)
		}
		return regexp.MustCompile(`'postgres(ql)?://[^']*'`).ReplaceAllStringFunc(s, func(q string) string {
			rewrites++
			return "'" + testStoreURL(t, strings.Trim(q, "'"), bu, name) + "'"
		})
	}
	doc := readDoc(t, "docs/deploy.md")
	// The high-availability recipe needs two PostgreSQL servers of its own: the failover test
	// runs its commands (internal/failover, TestRecipeIsTheDocs).
	doc, ok := withoutSection(doc, "## High availability: a failover of the database")
	if !ok {
		t.Fatal("docs/deploy.md has no section \"## High availability: a failover of the database\"; internal/failover runs its commands: update both")
	}
	runDoc(t, r, doc)
	if rewrites < 3 {
		t.Errorf("docs/deploy.md: %d commands rewritten, want the two psql commands and the --store URL: update the page's test note and this test", rewrites)
	}
	// The instance made its tables in the schema the page created, as the role it created.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var owner string
	if err := conn.QueryRow(ctx, "SELECT tableowner FROM pg_tables WHERE schemaname = $1 AND tablename = 'schema_migrations'", name).Scan(&owner); err != nil || owner != name {
		t.Errorf("docs/deploy.md: sessiond's schema_migrations in schema %s: owner %q, %v; want it made by role %s", name, owner, err, name)
	}
}

// withoutSection returns doc without the section that starts at the heading line heading (up
// to the next heading of its level or above, outside code fences), and whether it was there.
func withoutSection(doc, heading string) (string, bool) {
	level := len(strings.SplitN(heading, " ", 2)[0])
	lines := strings.Split(doc, "\n")
	out := make([]string, 0, len(lines))
	found, in, fence := false, false, false
	for _, l := range lines {
		if strings.HasPrefix(l, "```") {
			fence = !fence
		}
		if !fence && strings.HasPrefix(l, "#") {
			if l == heading {
				found, in = true, true
				continue
			}
			if h := strings.SplitN(l, " ", 2)[0]; in && strings.Trim(h, "#") == "" && len(h) <= level {
				in = false
			}
		}
		if !in {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n"), found
}

// testStoreURL returns the document's --store URL pointed at the test database: its host,
// port, database and sslmode are base's, and the role and search_path named sessiond are name.
func testStoreURL(t *testing.T, doc string, base *url.URL, name string) string {
	t.Helper()
	u, err := url.Parse(doc)
	if err != nil {
		t.Fatalf("docs/deploy.md: the --store URL %q: %v", doc, err)
	}
	pw, _ := u.User.Password()
	if u.User.Username() == "sessiond" {
		u.User = url.UserPassword(name, pw)
	}
	u.Host, u.Path = base.Host, base.Path
	q := u.Query()
	if q.Get("search_path") == "sessiond" {
		q.Set("search_path", name)
	}
	q.Del("sslmode")
	if m := base.Query().Get("sslmode"); m != "" {
		q.Set("sslmode", m)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// dropRoleAndSchema removes what docs/deploy.md's commands created for the run.
func dropRoleAndSchema(t *testing.T, base, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Errorf("connect to drop the schema and role %s: %v", name, err)
		return
	}
	defer conn.Close(context.Background())
	id := pgx.Identifier{name}.Sanitize()
	for _, q := range []string{"DROP SCHEMA IF EXISTS " + id + " CASCADE", "DROP ROLE IF EXISTS " + id} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
}

// benchCommand is a go test command line of docs/benchmarks.md.
type benchCommand struct {
	line       int
	pkgs       []string // ./pkg/ arguments, from the repository's root (go -C dir joined in)
	bench, run string   // the -bench and -run patterns
}

// parseBenchCommand reads a "go test" or "go -C dir test" command line (after optional
// VAR=value assignments); the benchmark harness's module is run with -C bench.
func parseBenchCommand(c docCommand) (benchCommand, error) {
	f, err := shellWords(c.text)
	if err != nil {
		return benchCommand{}, err
	}
	for len(f) > 0 && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(f[0]) {
		f = f[1:]
	}
	dir := ""
	if len(f) >= 4 && f[0] == "go" && f[1] == "-C" {
		dir, f = f[2], append([]string{"go"}, f[3:]...)
	}
	if len(f) < 2 || f[0] != "go" || f[1] != "test" {
		return benchCommand{}, fmt.Errorf("not a go test command")
	}
	bc := benchCommand{line: c.line}
	for i := 2; i < len(f); i++ {
		switch a := f[i]; {
		case strings.HasPrefix(a, "./"):
			bc.pkgs = append(bc.pkgs, "./"+path.Join(dir, a)+"/")
		case a == "-bench" || a == "-run":
			if i+1 == len(f) {
				return bc, fmt.Errorf("%s without a value", a)
			}
			i++
			if a == "-bench" {
				bc.bench = f[i]
			} else {
				bc.run = f[i]
			}
		case strings.HasPrefix(a, "-bench=") || strings.HasPrefix(a, "-run="):
			k, v, _ := strings.Cut(a, "=")
			if k == "-bench" {
				bc.bench = v
			} else {
				bc.run = v
			}
		}
	}
	if len(bc.pkgs) == 0 || bc.bench == "" {
		return bc, fmt.Errorf("no ./package or no -bench pattern")
	}
	return bc, nil
}

// shellWords splits a command line as sh would for the simple forms the documents use:
// single and double quotes without expansions, backslash-newline continuations.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0 && ch == quote:
			quote = 0
		case quote != 0:
			w.WriteByte(ch)
		case ch == '\'' || ch == '"':
			quote, in = ch, true
		case ch == '\\' && i+1 < len(s) && s[i+1] == '\n':
			i++
		case ch == ' ' || ch == '\t' || ch == '\n':
			if in {
				words, in = append(words, w.String()), false
				w.Reset()
			}
		default:
			w.WriteByte(ch)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("an unclosed %c quote", quote)
	}
	if in {
		words = append(words, w.String())
	}
	return words, nil
}

func TestParseBenchCommand(t *testing.T) {
	for _, tc := range []struct {
		text string
		want benchCommand
		err  string
	}{
		{"go test ./contract/ -run '^$' -bench 'A|B' -cpu 1 -count 5", benchCommand{pkgs: []string{"./contract/"}, bench: "A|B", run: "^$"}, ""},
		{"SESSIOND_TEST_POSTGRES='postgres://x/y?a=b&c=d' \\\n  go test ./store/postgres/ -run='^$' -bench=\"Cross\" -benchtime 1x", benchCommand{pkgs: []string{"./store/postgres/"}, bench: "Cross", run: "^$"}, ""},
		{"go build ./...", benchCommand{}, "not a go test command"},
		{"go test ./x/ -run X", benchCommand{}, "no -bench pattern"},
		{"go test ./x/ -bench 'A", benchCommand{}, "unclosed"},
	} {
		got, err := parseBenchCommand(docCommand{text: tc.text})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseBenchCommand(%q): %v, want an error with %q", tc.text, err, tc.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("parseBenchCommand(%q) = %+v, %v; want %+v", tc.text, got, err, tc.want)
		}
	}
}

// listTests returns, for each package (./dir/), the names of its tests, benchmarks, fuzz targets
// and examples, as one "go test -list . PKG..." prints them (which fails for a package that
// does not exist). One command builds the packages' test binaries in parallel.
func listTests(t *testing.T, repo string, pkgs []string) map[string][]string {
	t.Helper()
	// Each package is listed by the go command in its own module's root (the repository's,
	// or a nested module's such as bench/).
	byModule := map[string][]string{} // module root, relative to repo -> ./pkg/ paths in it
	for _, p := range pkgs {
		root := moduleRootOf(t, repo, p)
		byModule[root] = append(byModule[root], p)
	}
	listed := map[string][]string{}
	for root, ps := range byModule {
		maps.Copy(listed, listModuleTests(t, repo, root, ps))
	}
	return listed
}

// moduleRootOf returns the directory (relative to repo, "." for the repository's own) of the
// nearest go.mod at or above the package directory pkg ("./dir/").
func moduleRootOf(t *testing.T, repo, pkg string) string {
	t.Helper()
	for dir := path.Clean(pkg); ; dir = path.Dir(dir) {
		if _, err := os.Stat(filepath.Join(repo, dir, "go.mod")); err == nil {
			return dir
		}
		if dir == "." {
			t.Fatalf("no go.mod at or above %s", pkg)
		}
	}
}

// listModuleTests lists the tests and benchmarks of pkgs (paths from repo) in the module whose
// root is repo/root, keyed by the paths given.
func listModuleTests(t *testing.T, repo, root string, pkgs []string) map[string][]string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH: %v", err)
	}
	mod, err := os.ReadFile(filepath.Join(repo, root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^module (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatalf("%s/go.mod has no module line", root)
	}
	byPath := map[string]string{} // import path -> ./dir/ from repo
	var args []string             // ./dir/ from the module's root
	for _, p := range pkgs {
		rel := strings.TrimPrefix(path.Clean(p), root)
		rel = strings.Trim(strings.TrimPrefix(rel, "."), "/")
		byPath[path.Join(string(m[1]), rel)] = p
		args = append(args, "./"+rel)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, append([]string{"test", "-list", "."}, args...)...)
	cmd.Dir = filepath.Join(repo, root)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go test -list . %s (in %s): %v\n%s%s", strings.Join(args, " "), root, err, out.String(), errb.String())
	}
	listed := map[string][]string{}
	var names []string
	for _, l := range strings.Split(out.String(), "\n") {
		switch f := strings.Fields(l); {
		case regexp.MustCompile(`^(Test|Benchmark|Fuzz|Example)\w*$`).MatchString(l):
			names = append(names, l)
		case len(f) >= 2 && f[0] == "ok" && byPath[f[1]] != "":
			listed[byPath[f[1]]], names = names, nil
		}
	}
	for _, p := range pkgs {
		if _, ok := listed[p]; !ok {
			t.Fatalf("go test -list . %s: no list for %s in:\n%s", strings.Join(args, " "), p, out.String())
		}
	}
	return listed
}

// topLevel returns the alternatives of a -bench or -run pattern (split at the '|' outside
// parentheses and brackets), each cut at its first '/' (go test matches the part before it
// against the top-level names).
func topLevel(pattern string) []string {
	var alts []string
	depth, start := 0, 0
	for i, ch := range pattern {
		switch ch {
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case '|':
			if depth == 0 {
				alts = append(alts, pattern[start:i])
				start = i + 1
			}
		}
	}
	alts = append(alts, pattern[start:])
	for i, a := range alts {
		alts[i], _, _ = strings.Cut(a, "/")
	}
	return alts
}

func TestTopLevel(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"A|B", []string{"A", "B"}},
		{"Commands", []string{"Commands"}},
		{"(A|B)C|D/sub", []string{"(A|B)C", "D"}},
		{"^$", []string{"^$"}},
	} {
		if got := topLevel(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("topLevel(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// benchTableName is the benchmark a row of a figures table names: the first cell's leading
// identifier ("Fanout in-process, …" names BenchmarkFanout, "ValidateEvent/oracle"
// BenchmarkValidateEvent).
var benchTableName = regexp.MustCompile(`^\| *([A-Z][A-Za-z0-9]*)`)

// TestBenchmarksDoc checks docs/benchmarks.md without running its benchmarks (too slow for a
// test): every ```sh command is a go test command line whose packages exist and whose -bench
// pattern (and -run pattern, unless it is '^$', "no tests") has each alternative match at
// least one benchmark (test) of those packages, so its reproduce commands cannot rot; and
// every row of a table headed "benchmark" names a benchmark of those packages.
// Sub-benchmark names (after '/') are not checked: go test lists only top-level names.
func TestBenchmarksDoc(t *testing.T) {
	doc := readDoc(t, "docs/benchmarks.md")
	blocks, err := parseSection(doc, "")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []benchCommand
	var pkgs []string
	for _, b := range blocks {
		for _, c := range b {
			bc, err := parseBenchCommand(c)
			if err != nil {
				t.Errorf("docs/benchmarks.md %s: %v; this test checks go test command lines only", c, err)
				continue
			}
			cmds = append(cmds, bc)
			for _, p := range bc.pkgs {
				if !slices.Contains(pkgs, p) {
					pkgs = append(pkgs, p)
				}
			}
		}
	}
	if len(cmds) == 0 {
		t.Fatal("docs/benchmarks.md: no go test command found")
	}
	listed := listTests(t, repo, pkgs)
	var all []string
	for _, p := range pkgs {
		all = append(all, listed[p]...)
	}
	for _, bc := range cmds {
		var names []string
		for _, p := range bc.pkgs {
			names = append(names, listed[p]...)
		}
		check := func(flag, pattern, prefix string) {
			for _, alt := range topLevel(pattern) {
				re, err := regexp.Compile(alt)
				if err != nil {
					t.Errorf("docs/benchmarks.md line %d: %s %q: %v", bc.line, flag, pattern, err)
					continue
				}
				if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, prefix) && re.MatchString(n) }) {
					t.Errorf("docs/benchmarks.md line %d: %s %q: %q matches no %s in %s", bc.line, flag, pattern, alt, prefix, strings.Join(bc.pkgs, " "))
				}
			}
		}
		check("-bench", bc.bench, "Benchmark")
		if bc.run != "^$" && bc.run != "" {
			check("-run", bc.run, "Test")
		}
	}
	rows, inTable := 0, false
	for n, l := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(l, "| benchmark"):
			inTable = true
		case !strings.HasPrefix(l, "|"):
			inTable = false
		case inTable && !strings.HasPrefix(l, "|---"):
			m := benchTableName.FindStringSubmatch(l)
			if m == nil {
				t.Errorf("docs/benchmarks.md line %d: a row of a benchmark table that names no benchmark: %s", n+1, l)
				continue
			}
			rows++
			if !slices.Contains(all, "Benchmark"+m[1]) {
				t.Errorf("docs/benchmarks.md line %d: no Benchmark%s in the packages the page's commands run (%s)", n+1, m[1], strings.Join(pkgs, " "))
			}
		}
	}
	if rows == 0 {
		t.Error("docs/benchmarks.md: no table headed \"benchmark\" found")
	}
}

// archRow is a row of docs/architecture.md's package table: a package (its path in the
// repository) and the packages of the repository it may import.
var archRow = regexp.MustCompile("^\\| `([a-z0-9/]+)` \\|[^|]*\\| ([^|]*) \\|$")

// TestArchitectureDoc: docs/architecture.md's package table lists exactly the packages of the
// repository (the product's module and the bench module), and no package imports (outside its
// tests) a package of the repository its row does not name. A row whose last cell is
// "everything above" (the binary) or "(tests only)" is not checked for imports.
func TestArchitectureDoc(t *testing.T) {
	doc := readDoc(t, "docs/architecture.md")
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string][]string{} // package -> may import; nil: not checked
	for _, l := range strings.Split(doc, "\n") {
		m := archRow.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		may := []string{}
		cell, _, _ := strings.Cut(m[2], "its tests:") // what its tests import is not checked
		if strings.Contains(cell, "everything above") || strings.Contains(cell, "(tests only)") {
			may = nil
		} else {
			for _, f := range regexp.MustCompile("`([a-z0-9/]+)`").FindAllStringSubmatch(cell, -1) {
				may = append(may, f[1])
			}
		}
		if _, dup := allowed[m[1]]; dup {
			t.Errorf("docs/architecture.md lists %s twice", m[1])
		}
		allowed[m[1]] = may
	}
	if len(allowed) == 0 {
		t.Fatal("docs/architecture.md: no package table found")
	}
	imports := map[string][]string{} // package -> the repository's packages it imports
	for _, mod := range []struct{ dir, prefix string }{{".", ""}, {"bench", "bench/"}} {
		cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
		cmd.Dir = filepath.Join(repo, mod.dir)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list ./... in %s: %v", mod.dir, err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(l)
			pkg := strings.TrimPrefix(f[0], "github.com/sessiond/sessiond/")
			var own []string
			for _, imp := range f[1:] {
				if p, ok := strings.CutPrefix(imp, "github.com/sessiond/sessiond/"); ok {
					own = append(own, p)
				}
			}
			imports[pkg] = own
		}
	}
	if _, ok := imports["bench/peerbench"]; !ok {
		t.Fatal("go list found no bench/peerbench: is the bench module in bench/?")
	}
	for pkg, own := range imports {
		may, listed := allowed[pkg]
		if !listed {
			t.Errorf("package %s is not in docs/architecture.md's package table: add a row saying what it holds and what it may import", pkg)
			continue
		}
		if may == nil {
			continue
		}
		for _, imp := range own {
			if !slices.Contains(may, imp) {
				t.Errorf("package %s imports %s, which its row in docs/architecture.md does not allow: add it there (and to the picture) or remove the import", pkg, imp)
			}
		}
	}
	for pkg := range allowed {
		if _, ok := imports[pkg]; !ok {
			t.Errorf("docs/architecture.md lists package %s, which does not exist", pkg)
		}
	}
}

// TestSearchDoc runs docs/search.md's first search against a fresh server.
func TestSearchDoc(t *testing.T) {
	needTool(t, "curl", "docs/search.md's commands")
	r := newDocRun(t, "docs/search.md")
	runDoc(t, r, readDoc(t, "docs/search.md"))
}
