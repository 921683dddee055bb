package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/wire"
)

func main() {
	def := os.Getenv("SESSIOND_SERVER") // as for the sessiond CLI
	if def == "" {
		def = client.DefaultServer
	}
	server := flag.String("server", def, "sessiond server URL (env SESSIOND_SERVER)")
	agent := flag.String("agent", "echoagent", "claim the runs of sessions with this agent_id (empty: any agent)")
	project := flag.String("project", "", "claim only the runs of sessions of this project")
	concurrency := flag.Int("concurrency", 8, "how many runs to work on at once")
	leaseTTL := flag.Duration("lease-ttl", 30*time.Second, "the length of a run's lease (renewed every third of it)")
	tick := flag.Duration("tick", 500*time.Millisecond, "pause between streamed chunks")
	chunks := flag.Int("chunks", 20, "progress chunks a run streams after its tool call")
	skipApproval := flag.Bool("skip-approval", false, "run the tool at once instead of asking for approval")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "echoagent: unexpected argument %q\nhint: echoagent takes flags only; see echoagent -h\n", flag.Arg(0))
		os.Exit(2)
	}
	if *concurrency < 1 {
		fmt.Fprintln(os.Stderr, "echoagent: --concurrency must be at least 1\nhint: pass --concurrency 1 or more")
		os.Exit(2)
	}
	if *leaseTTL < time.Second || *leaseTTL > 10*time.Minute {
		fmt.Fprintln(os.Stderr, "echoagent: --lease-ttl must be between 1s and 10m\nhint: pass e.g. --lease-ttl 30s")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "echoagent: "+format+"\n", args...) }
	a := &Agent{Client: client.New(*server, nil), Concurrency: *concurrency, Tick: *tick, Chunks: *chunks, SkipApproval: *skipApproval,
		Filter:  wire.ClaimRequest{AgentID: *agent, Project: *project, Wait: "30s", LeaseTTL: leaseTTL.String()},
		Log:     logf,
		OnError: func(err error) { logf("%v", err) }}
	fmt.Fprintf(os.Stderr, "echoagent: claiming runs (agent %q) on %s, %d at a time\n", *agent, *server, *concurrency)
	if err := a.Run(ctx); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "echoagent: %v\n", err)
		os.Exit(1)
	}
}
