package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/sessiond/sessiond/acp"
	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
)

func init() {
	commands["acp"] = command{summary: "run an Agent Client Protocol agent and record it into a session", args: "<agent-command> [args...]",
		about: `Runs the agent as a child process and speaks ACP (JSON-RPC over its stdin and stdout) to it.
Each user message appended to the session becomes a prompt (a run); what the agent reports
becomes the run's events; approve/reject answer its permission requests; stop cancels its turn.
Its file and terminal calls are served inside --root and refused outside it. Put "--" before
the agent's command so that its own flags are not read as sessiond's:

  sessiond acp --session S-1 -- npx @agentclientprotocol/claude-agent-acp

docs/agents.md has the mapping and the adapters of Claude, Codex and Gemini.`, run: runACP}
}

func runACP(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("acp", stdout, stderr)
	sid := f.fs.String("session", "", "the session to record into (created when it does not exist; generated when empty)")
	root := f.fs.String("root", ".", "the directory the agent works in; its file and terminal calls are refused outside it")
	agentID := f.fs.String("agent", "", "agent id of a session this creates (default: the agent command's name)")
	model := f.fs.String("model", "unknown-model", "model id of the snapshot of a session this creates")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	path, err := exec.LookPath(pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "sessiond acp: agent command: %v\nhint: give the agent's command after --, e.g. sessiond acp -- gemini --experimental-acp\n", err)
		return 2
	}
	if fi, err := os.Stat(*root); err != nil || !fi.IsDir() {
		fmt.Fprintf(stderr, "sessiond acp: --root %q is not a directory\n", *root)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := f.client()
	id := *sid
	if id != "" {
		_, err = c.GetSession(ctx, id)
	}
	var ae *api.Error
	if id == "" || (errors.As(err, &ae) && ae.Code == contract.CodeSessionNotFound) {
		agent := *agentID
		if agent == "" {
			agent = filepath.Base(pos[0])
		}
		s, err := c.CreateSession(ctx, api.CreateSessionRequest{SessionID: id, AgentID: agent, Role: "implementer",
			Snapshot: contract.Snapshot{Mode: "work", ModelID: *model, Capabilities: presetCapabilities("work", "reasoning", "plan")}})
		if err != nil {
			return fail(stderr, "acp", err)
		}
		id = s.Record.SessionID
	} else if err != nil {
		return fail(stderr, "acp", err)
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stdout, "acp: "+format+"\n", a...) }
	if *f.json {
		logf = func(format string, a ...any) {
			printJSON(stdout, map[string]string{"session": id, "log": fmt.Sprintf(format, a...)})
		}
	}
	logf("recording %s into session %s (root %s)", pos[0], id, *root)
	rec := &acp.Recorder{Client: c, SessionID: id, Root: *root, Log: logf}
	err = rec.Run(ctx, acp.Agent{Path: path, Args: pos[1:], Stderr: stderr})
	if ctx.Err() != nil {
		return 0
	}
	fmt.Fprintf(stderr, "sessiond acp: %v\n", err)
	return 1
}
