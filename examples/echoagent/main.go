package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/wire"
)

func main() {
	a, server, err := parseFlags(os.Args[1:], os.Getenv("SESSIOND_SERVER"), os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "echoagent: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "echoagent: claiming runs (agent %q) on %s, %d at a time\n", a.Filter.AgentID, server, a.Concurrency)
	if err := a.Run(ctx); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "echoagent: %v\n", err)
		os.Exit(1)
	}
}

// parseFlags reads the command line into an Agent that logs to stderr, and the server URL
// (envServer, from SESSIOND_SERVER, unless --server names one). A bad flag is an error that
// names it, the rule, and what to pass instead.
func parseFlags(args []string, envServer string, stderr io.Writer) (*Agent, string, error) {
	def := envServer // as for the sessiond CLI
	if def == "" {
		def = client.DefaultServer
	}
	fs := flag.NewFlagSet("echoagent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", def, "sessiond server URL (env SESSIOND_SERVER)")
	agent := fs.String("agent", "echoagent", "claim the runs of sessions with this agent_id (empty: any agent)")
	project := fs.String("project", "", "claim only the runs of sessions of this project")
	concurrency := fs.Int("concurrency", 8, "how many runs to work on at once")
	leaseTTL := fs.Duration("lease-ttl", 30*time.Second, "the length of a run's lease (renewed every third of it)")
	tick := fs.Duration("tick", 500*time.Millisecond, "pause between streamed chunks")
	chunks := fs.Int("chunks", 20, "progress chunks a run streams after its tool call")
	skipApproval := fs.Bool("skip-approval", false, "run the tool at once instead of asking for approval")
	if err := fs.Parse(args); err != nil {
		return nil, "", err
	}
	switch {
	case fs.NArg() > 0:
		return nil, "", fmt.Errorf("unexpected argument %q\nhint: echoagent takes flags only (see echoagent -h); it claims the runs of any session whose agent_id is --agent", fs.Arg(0))
	case *concurrency < 1:
		return nil, "", fmt.Errorf("--concurrency %d: must be at least 1\nhint: pass --concurrency 1 or more", *concurrency)
	case *leaseTTL < time.Second || *leaseTTL > 10*time.Minute:
		return nil, "", fmt.Errorf("--lease-ttl %s: must be between 1s and 10m\nhint: pass e.g. --lease-ttl 30s", *leaseTTL)
	case *tick <= 0:
		return nil, "", fmt.Errorf("--tick %s: must be more than 0\nhint: pass e.g. --tick 500ms", *tick)
	case *chunks < 1:
		return nil, "", fmt.Errorf("--chunks %d: must be at least 1\nhint: pass e.g. --chunks 20", *chunks)
	}
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, "echoagent: "+format+"\n", args...) }
	a := &Agent{Client: client.New(*server, nil), Concurrency: *concurrency, Tick: *tick, Chunks: *chunks, SkipApproval: *skipApproval,
		Filter:  wire.ClaimRequest{AgentID: *agent, Project: *project, Wait: "30s", LeaseTTL: leaseTTL.String()},
		Log:     logf,
		OnError: func(err error) { logf("%v", err) }}
	return a, *server, nil
}
