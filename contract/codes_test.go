package contract

import (
	"encoding/json"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestErrorCodesMatchSchemaEnum: the command error codes are exactly the enum of
// error.code in the contract's JSON Schema, in its order, and every code constant is spelt
// once: a code the schema gains without a constant, or a constant the schema lacks, fails here.
func TestErrorCodesMatchSchemaEnum(t *testing.T) {
	raw, err := os.ReadFile(eventSchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	// Every enum in the schema that lists SESSION_NOT_FOUND is an enum of command error codes.
	var enums [][]string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if e, ok := v["enum"].([]any); ok && slices.Contains(e, any(string(CodeSessionNotFound))) {
				var vals []string
				for _, x := range e {
					vals = append(vals, x.(string))
				}
				enums = append(enums, vals)
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(doc)
	if len(enums) == 0 {
		t.Fatalf("%s has no enum of command error codes", eventSchemaFile)
	}
	for _, e := range enums {
		if !slices.Equal(e, codeStrings(ErrorCodes)) {
			t.Errorf("schema enum %v\nErrorCodes    %v", e, ErrorCodes)
		}
	}
	seen := map[ErrorCode]string{}
	for _, list := range []struct {
		name  string
		codes []ErrorCode
	}{{"ErrorCodes", ErrorCodes}, {"APIErrorCodes", APIErrorCodes}, {"StreamErrorCodes", StreamErrorCodes}, {"RunErrorCodes", RunErrorCodes}} {
		for _, c := range list.codes {
			if prev, ok := seen[c]; ok {
				t.Errorf("%s is listed in %s and in %s", c, prev, list.name)
			}
			seen[c] = list.name
		}
	}
	// Every constant of codes.go is in one of the lists.
	f, err := goparser.ParseFile(token.NewFileSet(), "codes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			for _, v := range s.(*ast.ValueSpec).Values {
				code, _ := strconv.Unquote(v.(*ast.BasicLit).Value)
				n++
				if _, ok := seen[ErrorCode(code)]; !ok {
					t.Errorf("constant %s is in none of ErrorCodes, APIErrorCodes, StreamErrorCodes, RunErrorCodes", code)
				}
			}
		}
	}
	if n != len(seen) {
		t.Errorf("codes.go declares %d code constants, the lists hold %d", n, len(seen))
	}
}

// codeLiteral is how an error code looks: upper-case words joined by underscores.
var codeLiteral = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$`)

// TestNoCodeLiterals: the packages that refuse requests (the domain, the HTTP API and its
// server) name error codes only by the constants of codes.go, never by a string literal outside
// a constant declaration, so a misspelt code cannot compile into an answer with an unknown code.
func TestNoCodeLiterals(t *testing.T) {
	for _, dir := range []string{"../session", "../archive", "../wire", "../api", "../server", "../client"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("no Go files in %s", dir)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := goparser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, lit := range codeLiterals(f) {
				t.Errorf("%s: string literal %s looks like an error code; use the contract.Code… constant (contract/codes.go)", fset.Position(lit.Pos()), lit.Value)
			}
		}
	}
}

// codeLiterals returns the string literals of f outside constant declarations that look like
// error codes.
func codeLiterals(f *ast.File) []*ast.BasicLit {
	var out []*ast.BasicLit
	ast.Inspect(f, func(n ast.Node) bool {
		if g, ok := n.(*ast.GenDecl); ok && g.Tok == token.CONST {
			return false
		}
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil && codeLiteral.MatchString(s) {
				out = append(out, lit)
			}
		}
		return true
	})
	return out
}

// TestCodeLiteralsFound: the scan of TestNoCodeLiterals finds a literal code in a call, and
// leaves constant declarations and ordinary strings alone.
func TestCodeLiteralsFound(t *testing.T) {
	src := `package p
const HeartbeatLost = "HEARTBEAT_LOST"
func f() { reject("SESION_NOT_FOUND", "session %q does not exist", "x"); g("a_b", "Hello") }`
	f, err := goparser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	lits := codeLiterals(f)
	if len(lits) != 1 || lits[0].Value != `"SESION_NOT_FOUND"` {
		t.Errorf("found %v, want only the misspelt code", lits)
	}
}
