package main

import (
	"bytes"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
)

// registered is every command line of the registry: each command, each verb of "session" and
// each kind of "cmd", with the positional arguments its usage shows.
type registered struct {
	words []string // what follows "sessiond": "read", "session warm", "cmd stop"
	args  string
	usage string // the usage line it prints
}

func allCommandLines(t *testing.T) []registered {
	t.Helper()
	var all []registered
	for name, c := range commands {
		switch name {
		case "session":
			for verb, v := range sessionVerbs {
				all = append(all, registered{[]string{"session", verb}, v.args, usageLine("session "+verb, v.args)})
			}
		case "cmd":
			for kind, k := range cmdKinds {
				all = append(all, registered{[]string{"cmd", kind}, k.args, usageLine("cmd", c.args)})
			}
		default:
			all = append(all, registered{[]string{name}, c.args, usageLine(name, c.args)})
		}
	}
	sort.Slice(all, func(i, j int) bool { return strings.Join(all[i].words, " ") < strings.Join(all[j].words, " ") })
	if len(all) < 20 {
		t.Fatalf("only %d command lines registered", len(all))
	}
	return all
}

// fill is one value for each positional argument of args: every one, optional ones included.
func fill(args string) []string {
	var v []string
	for i, s := range parseArgSpecs(args) {
		v = append(v, fmt.Sprintf("v%d", i))
		if s.variadic {
			v = append(v, "more")
		}
	}
	return v
}

func runIn(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestEveryCommandLine checks, for every registered command line, that an unknown flag (before
// or after the arguments), a missing argument and an extra argument are usage errors (exit 2,
// the problem named, the usage on stderr, nothing done), and that help shows its usage. Each
// error happens before any server is contacted (--server points nowhere).
func TestEveryCommandLine(t *testing.T) {
	t.Setenv("SESSIOND_SERVER", "http://127.0.0.1:1")
	for _, c := range allCommandLines(t) {
		name := strings.Join(c.words, " ")
		t.Run(name, func(t *testing.T) {
			full := fill(c.args)
			variadic := slices.ContainsFunc(parseArgSpecs(c.args), func(s argSpec) bool { return s.variadic })
			type usageCase struct {
				what, want string
				args       []string
			}
			cases := []usageCase{
				{"unknown flag after the arguments", "flag provided but not defined: -no-such-flag", append(slices.Clone(full), "--no-such-flag")},
				{"unknown flag before the arguments", "flag provided but not defined: -no-such-flag", append([]string{"--no-such-flag"}, full...)},
				{"bad flag value", "invalid", append(slices.Clone(full), "--json=maybe")},
			}
			if name == "serve" {
				cases[2] = usageCase{"bad flag value", `invalid value "soon" for flag -stale-after`, []string{"--stale-after", "soon"}}
			}
			if !variadic {
				cases = append(cases, usageCase{"extra argument", `unexpected argument "extra"`, append(slices.Clone(full), "extra")})
			}
			if specs := parseArgSpecs(c.args); len(specs) > 0 && !specs[0].optional {
				cases = append(cases, usageCase{"missing argument", "missing " + specs[0].name, nil})
			}
			for _, uc := range cases {
				code, out, errOut := runIn(append(slices.Clone(c.words), uc.args...)...)
				prefix := "sessiond " + c.words[0] + ": "
				if c.words[0] == "session" {
					prefix = "sessiond " + name + ": "
				}
				if code != 2 || !strings.HasPrefix(errOut, prefix) || !strings.Contains(errOut, uc.want) ||
					!strings.Contains(errOut, "\nusage: "+c.usage+"\n") || out != "" {
					t.Errorf("%s (%q): exit %d, want 2 with %q and the usage %q\nstdout: %s\nstderr: %s", uc.what, uc.args, code, uc.want, c.usage, out, errOut)
				}
			}
			// Help, three ways: sessiond help NAME, sessiond NAME -h, sessiond NAME --help.
			helpUsage := c.usage
			if c.words[0] == "cmd" {
				helpUsage = usageLine("cmd", commands["cmd"].args)
			}
			for _, args := range [][]string{append([]string{"help"}, c.words...), append(slices.Clone(c.words), "-h"), append(slices.Clone(c.words), "--help")} {
				if c.words[0] == "cmd" && args[0] == "help" {
					args = []string{"help", "cmd"}
				}
				code, out, errOut := runIn(args...)
				if code != 0 || !strings.HasPrefix(out, "usage: "+helpUsage+"\n") || errOut != "" {
					t.Errorf("%q: exit %d, stdout %q, stderr %q; want the usage %q on stdout", args, code, out, errOut, helpUsage)
				}
				if strings.Contains(c.usage, "[flags]") && !strings.Contains(out, "flags (before or after the arguments") {
					t.Errorf("%q: no flags listed:\n%s", args, out)
				}
			}
		})
	}
}

// TestCommandGroupErrors covers what is between "sessiond" and a command line: unknown
// commands, verbs and kinds, and help for them.
func TestCommandGroupErrors(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		code       int
		want       string
		wantStdout bool
	}{
		{[]string{"help", "nosuch"}, 2, "sessiond help: unknown command \"nosuch\"\nhint: run 'sessiond help' to see the commands", false},
		{[]string{"help", "read", "extra"}, 2, "sessiond help: too many arguments", false},
		{[]string{"nosuch"}, 2, "hint: run 'sessiond help'", false},
		{[]string{"session"}, 2, "sessiond session: missing <verb>\nusage: sessiond session <verb> [arguments] [flags]", false},
		{[]string{"session", "bogus"}, 2, "sessiond session: unknown verb \"bogus\"\nusage: sessiond session", false},
		{[]string{"session", "--no-such-flag"}, 2, "unknown verb \"--no-such-flag\"\nusage: sessiond session", false},
		{[]string{"help", "session", "bogus"}, 2, "unknown verb \"bogus\"", false},
		{[]string{"cmd", "frobnicate", "S-1", "r1"}, 2, "sessiond cmd: unknown kind \"frobnicate\"\nusage: sessiond cmd <kind>", false},
		{[]string{"cmd", "approve", "S-1", "r1"}, 2, "sessiond cmd: missing <approval-id> (usage: sessiond cmd approve <session-id> <run-id> <approval-id> [reason...] [flags])", false},
		{[]string{"cmd", "resume", "S-1", "r1", "extra"}, 2, `unexpected argument "extra": it takes only <session-id> <run-id>`, false},
		{[]string{"cmd", "steer", "S-1", "r1", "hi", "--wait", "1s"}, 2, "sessiond cmd: --wait applies to stop only", false},
		{[]string{"cmd", "stop", "S-1", "r1", "--wait", "-1s"}, 2, "sessiond cmd: --wait must not be negative", false},
		{[]string{"create", "--id", "S-1"}, 2, "sessiond create: --agent is required", false},
		{[]string{"fork", "S-1", "m1", "r1", "--exclude", "nothing"}, 2, `--exclude "nothing": unknown resource`, false},
		{[]string{"import", "x.jsonl"}, 2, `sessiond import: --format must be claude-code, codex or sessiond, not ""` + "\nhint: sessiond import --format claude-code", false},
		{[]string{"import", "--format", "codex", "/no/such/dir"}, 2, "sessiond import: stat /no/such/dir: no such file or directory", false},
		{[]string{"export", "--format", "csv", "S-1"}, 2, `sessiond export: --format must be jsonl, not "csv"`, false},
		{[]string{"acp", "--", "no-such-agent-program"}, 2, "sessiond acp: agent command: exec: \"no-such-agent-program\": executable file not found in $PATH\nhint: give the agent's command after --", false},
		{[]string{"acp", "--root", "/no/such/dir", "--", "sh"}, 2, `sessiond acp: --root "/no/such/dir" is not a directory`, false},
		{[]string{"help"}, 0, "usage: sessiond <command> [arguments] [flags]", true},
		{[]string{"--help"}, 0, "usage: sessiond <command> [arguments] [flags]", true},
		{nil, 2, "usage: sessiond <command> [arguments] [flags]", false},
		{[]string{"help", "session"}, 0, "usage: sessiond session <verb> [arguments] [flags]", true},
	} {
		code, out, errOut := runIn(tc.args...)
		got := errOut
		if tc.wantStdout {
			got = out
		}
		if code != tc.code || !strings.Contains(got, tc.want) {
			t.Errorf("sessiond %q: exit %d, want %d with %q\nstdout: %s\nstderr: %s", tc.args, code, tc.code, tc.want, out, errOut)
		}
	}
}

func TestParseInterleaved(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		pos     []string
		json    bool
		key     string
		wantErr string
	}{
		{[]string{"S-1", "--json"}, []string{"S-1"}, true, "", ""},
		{[]string{"--json", "S-1"}, []string{"S-1"}, true, "", ""},
		{[]string{"S-1", "--key", "k1", "r1", "-json"}, []string{"S-1", "r1"}, true, "k1", ""},
		{[]string{"S-1", "--key=k1", "r1"}, []string{"S-1", "r1"}, false, "k1", ""},
		{[]string{"S-1", "--json=false", "r1"}, []string{"S-1", "r1"}, false, "", ""},
		{[]string{"S-1", "--", "--json", "-x"}, []string{"S-1", "--json", "-x"}, false, "", ""},
		{[]string{"--", "S-1"}, []string{"S-1"}, false, "", ""},
		{[]string{"S-1", "--key", "--", "r1"}, []string{"S-1", "r1"}, false, "--", ""},
		{[]string{"S-1", "--key", "--", "--", "--json"}, []string{"S-1", "--json"}, false, "--", ""},
		{[]string{"--json", "--key", "--json", "--", "--x"}, []string{"--x"}, true, "--json", ""},
		{[]string{"-", "--json"}, []string{"-"}, true, "", ""},
		{[]string{"S-1", "--nope"}, nil, false, "", "flag provided but not defined: -nope"},
		{[]string{"S-1", "--key"}, nil, false, "", "flag needs an argument: -key"},
		{nil, nil, false, "", ""},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(new(bytes.Buffer))
		js := fs.Bool("json", false, "")
		key := fs.String("key", "", "")
		pos, err := parseInterleaved(fs, tc.args)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%q: error %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(pos, tc.pos) || *js != tc.json || *key != tc.key {
			t.Errorf("%q: %q json=%v key=%q (%v), want %q json=%v key=%q", tc.args, pos, *js, *key, err, tc.pos, tc.json, tc.key)
		}
	}
}

func TestCheckPositionals(t *testing.T) {
	for _, tc := range []struct {
		spec string
		pos  []string
		want string
	}{
		{"", nil, ""},
		{"", []string{"a"}, `unexpected argument "a": it takes no arguments`},
		{"<session-id>", nil, "missing <session-id>"},
		{"<session-id>", []string{"S"}, ""},
		{"<session-id>", []string{"S", "x", "y"}, `unexpected argument "x": it takes only <session-id>`},
		{"<session-id> [file|-]", []string{"S"}, ""},
		{"<session-id> [file|-]", []string{"S", "-"}, ""},
		{"<session-id> [file|-]", []string{"S", "f", "g"}, `unexpected argument "g": it takes only <session-id> [file|-]`},
		{"<session-id> <run-id> [reason...]", []string{"S"}, "missing <run-id>"},
		{"<session-id> <run-id> [reason...]", []string{"S", "R"}, ""},
		{"<session-id> <run-id> [reason...]", []string{"S", "R", "a", "b", "c"}, ""},
		{"<session-id> <run-id> <text>...", []string{"S", "R"}, "missing <text>..."},
		{"<session-id> <run-id> <text>...", []string{"S", "R", "hi", "there"}, ""},
	} {
		err := checkPositionals(tc.spec, tc.pos)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%q with %q: %q, want %q", tc.spec, tc.pos, got, tc.want)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"S-1": "S-1", "--key": "--key", "http://127.0.0.1:7420": "http://127.0.0.1:7420",
		"be brief": "'be brief'", "it's": `'it'\''s'`, "": "''", "a$b": "'a$b'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
