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
)

func main() {
	def := os.Getenv("SESSIOND_SERVER") // as for the sessiond CLI
	if def == "" {
		def = client.DefaultServer
	}
	server := flag.String("server", def, "sessiond server URL (env SESSIOND_SERVER)")
	session := flag.String("session", "", "the session to work in (required)")
	tick := flag.Duration("tick", 500*time.Millisecond, "pause between streamed chunks")
	flag.Parse()
	if *session == "" {
		fmt.Fprintln(os.Stderr, "echoagent: --session is required\nhint: create one with 'sessiond create --agent echoagent' and pass its id")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := &Agent{Client: client.New(*server, nil), Session: *session, Tick: *tick,
		Log: func(format string, args ...any) { fmt.Fprintf(os.Stderr, "echoagent: "+format+"\n", args...) }}
	fmt.Fprintf(os.Stderr, "echoagent: following %s on %s; append a user message to start a run\n", *session, *server)
	if err := a.Run(ctx); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "echoagent: %v\n", err)
		os.Exit(1)
	}
}
