// Command sessiond is the one binary of sessiond: the server (serve) and its client and
// tooling subcommands. Run "sessiond help" for the list.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// command is one subcommand (or one verb of a command group such as "session"). run gets the
// arguments after the subcommand's name and returns the process exit code: 0 success, 1
// failure of the work, 2 usage or I/O error. Every run parses its arguments with
// newCommandLine, which takes the usage from here.
type command struct {
	summary string // one line, for the list of commands and the usage
	args    string // the positional arguments as the usage line shows them, e.g. "<session-id> [file]"
	about   string // more for the usage, may be empty
	run     func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

// commands is filled by the init functions of the files that implement each subcommand.
var commands = map[string]command{}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return 0
	case "help":
		return runHelp(args[1:], stdin, stdout, stderr)
	case "-version", "--version":
		args = append([]string{"version"}, args[1:]...)
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "sessiond: unknown command %q\nhint: run 'sessiond help' to see the commands\n", args[0])
		return 2
	}
	return c.run(args[1:], stdin, stdout, stderr)
}

// runHelp implements "sessiond help [command [verb]]": the list of commands, or a command's
// usage with its flags (what "sessiond command -h" prints).
func runHelp(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "sessiond help: unknown command %q\nhint: run 'sessiond help' to see the commands\n", args[0])
		return 2
	}
	if len(args) > 2 || (len(args) == 2 && args[0] != "session") {
		fmt.Fprintf(stderr, "sessiond help: too many arguments %q\nhint: sessiond help %s\n", args[1:], args[0])
		return 2
	}
	return c.run(append(args[1:len(args):len(args)], "-h"), stdin, stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "sessiond: a durable, streaming control plane for AI-agent sessions")
	fmt.Fprintln(w, "\nusage: sessiond <command> [arguments] [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'sessiond help <command>' (or 'sessiond <command> -h') for its arguments and flags;")
	fmt.Fprintln(w, "flags may come before or after the arguments. 'sessiond --version' prints the version.")
}
