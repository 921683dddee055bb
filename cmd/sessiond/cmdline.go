package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// commandLine parses the command line of one (sub)command: its flags, which may come before,
// between and after its positional arguments ("--" ends the flags), and its positional
// arguments, checked against the spec the command registry holds for it.
type commandLine struct {
	fs     *flag.FlagSet
	name   string // as typed after "sessiond": "read", "session warm"
	spec   command
	stdout io.Writer
	stderr io.Writer
}

// newCommandLine returns the parser of the command called name ("read", "session warm"),
// whose spec is in the command registry. The flag set is empty; the command adds its flags.
func newCommandLine(name string, stdout, stderr io.Writer) *commandLine {
	spec, ok := lookupCommand(name)
	if !ok {
		panic("sessiond: command " + strconv.Quote(name) + " is not registered")
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse prints the problems and the usage itself
	return &commandLine{fs: fs, name: name, spec: spec, stdout: stdout, stderr: stderr}
}

// lookupCommand finds a command of the registry by the name typed after "sessiond": a
// command ("read") or a verb of a command group ("session warm").
func lookupCommand(name string) (command, bool) {
	group, verb, isVerb := strings.Cut(name, " ")
	if !isVerb {
		c, ok := commands[name]
		return c, ok
	}
	if group == "session" {
		c, ok := sessionVerbs[verb]
		return c, ok
	}
	return command{}, false
}

// parse parses args and returns the positional arguments. On -h or --help it prints the usage
// to stdout; on an unknown flag, a bad flag value or a missing or extra positional argument it
// prints the problem and the usage to stderr. ok is false in those cases and code is the exit
// code to return: 0 after help, 2 after a usage error.
func (c *commandLine) parse(args []string) (pos []string, code int, ok bool) {
	pos, err := parseInterleaved(c.fs, args)
	if errors.Is(err, flag.ErrHelp) {
		c.usage(c.stdout)
		return nil, 0, false
	}
	if err == nil {
		err = checkPositionals(c.spec.args, pos)
	}
	if err != nil {
		return nil, c.usageError(err.Error()), false
	}
	return pos, 0, true
}

// parseWithEnv is parse after the flags have been set from their SESSIOND_ variables in
// environ (applyEnv): the command line wins over the environment.
func (c *commandLine) parseWithEnv(args, environ []string) (pos []string, code int, ok bool) {
	if err := applyEnv(c.fs, environ); err != nil {
		fmt.Fprintf(c.stderr, "sessiond %s: %v\n", c.name, err)
		return nil, 2, false
	}
	return c.parse(args)
}

// usageError prints "sessiond NAME: msg" and the usage to stderr and returns exit code 2.
func (c *commandLine) usageError(msg string) int {
	fmt.Fprintf(c.stderr, "sessiond %s: %s\n", c.name, msg)
	c.usage(c.stderr)
	return 2
}

// usage prints the usage line, the description and the flags.
func (c *commandLine) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", usageLine(c.name, c.spec.args), c.spec.summary)
	if c.spec.about != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(c.spec.about, "\n"))
	}
	hasFlags := false
	c.fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprintln(w, "\nflags (before or after the arguments; -- ends them):")
		c.fs.SetOutput(w)
		c.fs.PrintDefaults()
		c.fs.SetOutput(io.Discard)
	}
}

// usageLine is "sessiond NAME ARGS [flags]".
func usageLine(name, args string) string {
	if args == "" {
		return "sessiond " + name + " [flags]"
	}
	return "sessiond " + name + " " + args + " [flags]"
}

// parseInterleaved parses flags anywhere among the positional arguments, which it returns in
// order. "--" where a flag may stand ends the flags: everything after it is positional (a
// "--" that is the value of a flag, as in --reason --, is a value).
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		used := len(args) - len(rest)
		if used > 0 && args[used-1] == "--" && !lastIsValue(fs, args[:used]) {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// lastIsValue reports whether the last of tokens, which fs.Parse consumed as flags, was the
// value of the flag before it: it walks them as the flag package does.
func lastIsValue(fs *flag.FlagSet, tokens []string) bool {
	i := 0
	for i < len(tokens) {
		if tokens[i] == "--" {
			return false // the end of the flags
		}
		name := strings.TrimLeft(tokens[i], "-")
		f := fs.Lookup(name)
		if f == nil || strings.Contains(name, "=") {
			i++
			continue
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			i++
			continue
		}
		if i+1 == len(tokens)-1 {
			return true // tokens[i+1], the last, is this flag's value
		}
		i += 2
	}
	return false
}

// argSpec is one positional argument of a usage: <name> (required), [name] (optional), and
// either with "..." (one or more, or any number; only last).
type argSpec struct {
	name     string
	optional bool
	variadic bool
}

// parseArgSpecs reads a usage's positional arguments, e.g. "<session-id> [file]".
func parseArgSpecs(args string) []argSpec {
	var specs []argSpec
	for _, f := range strings.Fields(args) {
		s := argSpec{name: f, optional: strings.HasPrefix(f, "[")}
		s.variadic = strings.HasSuffix(strings.TrimRight(f, "]>"), "...")
		specs = append(specs, s)
	}
	return specs
}

// checkPositionals returns an error naming the first missing positional argument, or the
// first extra one.
func checkPositionals(args string, pos []string) error {
	specs := parseArgSpecs(args)
	for i, s := range specs {
		if s.variadic {
			if i >= len(pos) && !s.optional {
				return fmt.Errorf("missing %s", s.name)
			}
			return nil
		}
		if i >= len(pos) {
			if s.optional {
				return nil
			}
			return fmt.Errorf("missing %s", s.name)
		}
	}
	if len(pos) > len(specs) {
		takes := "no arguments"
		if args != "" {
			takes = "only " + args
		}
		return fmt.Errorf("unexpected argument %q: it takes %s", pos[len(specs)], takes)
	}
	return nil
}
