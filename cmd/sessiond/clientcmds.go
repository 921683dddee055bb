package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
)

func init() {
	commands["create"] = command{summary: "create a session", run: runCreate}
	commands["get"] = command{summary: "show a session", args: "<session-id>", run: runGet}
	commands["list"] = command{summary: "list sessions", run: runList}
	commands["append"] = command{summary: "append NDJSON events from a file or stdin, all or nothing", args: "<session-id> [file|-]",
		about: "Reads one event per line from file, or from stdin when file is - or absent.", run: runAppend}
	commands["read"] = command{summary: "print a session's events", args: "<session-id>", run: runRead}
	commands["tail"] = command{summary: "follow a session's live stream, resuming after disconnects", args: "<session-id>", run: runTail}
}

// clientFlags are the command line of a client subcommand, with the flags they all share.
type clientFlags struct {
	*commandLine
	server *string
	key    *string
	json   *bool
}

func newClientFlags(name string, stdout, stderr io.Writer) clientFlags {
	cl := newCommandLine(name, stdout, stderr)
	def := os.Getenv("SESSIOND_SERVER")
	if def == "" {
		def = client.DefaultServer
	}
	return clientFlags{
		commandLine: cl,
		server:      cl.fs.String("server", def, "server URL (env SESSIOND_SERVER)"),
		key:         cl.fs.String("api-key", os.Getenv("SESSIOND_KEY"), "API key (sk_…) or OIDC token to send, for a server that requires credentials (env SESSIOND_KEY; docs/security.md)"),
		json:        cl.fs.Bool("json", false, "print JSON for programs instead of text for people"),
	}
}

func (f clientFlags) client() *client.Client { return client.New(*f.server, nil).WithKey(*f.key) }

// fail prints a client error with a hint and returns the exit code: 1 for an error the server
// reported, 2 when the server could not be reached.
func fail(stderr io.Writer, cmd string, err error) int {
	var ae *api.Error
	if errors.As(err, &ae) {
		fmt.Fprintf(stderr, "sessiond %s: %s: %s\n", cmd, ae.Code, ae.Message)
		for _, d := range ae.Details {
			p := d.Path
			if p == "" {
				p = "/"
			}
			fmt.Fprintf(stderr, "  %s: %s (%s)\n", p, d.Message, d.Rule)
		}
		return 1
	}
	fmt.Fprintf(stderr, "sessiond %s: %v\nhint: start a server with 'sessiond serve' or point --server at one\n", cmd, err)
	return 2
}

func printJSON(w io.Writer, v any) {
	b, _ := contract.Marshal(v)
	fmt.Fprintf(w, "%s\n", b)
}

// presets are the capability presets of the two snapshot modes (docs/reference.md#capabilities).
var presets = contract.CapabilityPresets

func presetCapabilities(mode string, extra ...string) contract.Capabilities {
	m := map[string]bool{}
	for _, n := range append(presets[mode], extra...) {
		m[strings.TrimSpace(n)] = true
	}
	b, _ := json.Marshal(m)
	var c contract.Capabilities
	json.Unmarshal(b, &c)
	return c
}

func runCreate(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("create", stdout, stderr)
	id := f.fs.String("id", "", "session id (S-...); generated when empty")
	agent := f.fs.String("agent", "", "agent id (required)")
	role := f.fs.String("role", "implementer", "role: "+strings.Join(contract.SessionRoles, ", "))
	mode := f.fs.String("mode", "", "record mode: code or general")
	project := f.fs.String("project", "", "project name")
	snapMode := f.fs.String("snapshot-mode", "work", "snapshot mode, which also picks the capability preset: chat or work")
	model := f.fs.String("model", "unknown-model", "model id of the snapshot")
	extra := f.fs.String("cap", "", "comma-separated capabilities to add to the preset, e.g. threadForking,steering")
	if _, code, ok := f.parse(args); !ok {
		return code
	}
	if *agent == "" {
		return f.usageError("--agent is required\nhint: sessiond create --agent my-agent")
	}
	var caps []string
	if *extra != "" {
		caps = strings.Split(*extra, ",")
	}
	for _, c := range caps {
		if !slices.Contains(contract.CapabilityNames, strings.TrimSpace(c)) {
			fmt.Fprintf(stderr, "sessiond create: unknown capability %q\nhint: capabilities are %s\n", c, strings.Join(contract.CapabilityNames, ", "))
			return 2
		}
	}
	req := api.CreateSessionRequest{SessionID: *id, AgentID: *agent, Role: *role,
		Snapshot: contract.Snapshot{Mode: *snapMode, ModelID: *model, Capabilities: presetCapabilities(*snapMode, caps...)}}
	if *mode != "" {
		req.Mode = mode
	}
	if *project != "" {
		req.Project = project
	}
	s, err := f.client().CreateSession(context.Background(), req)
	if err != nil {
		return fail(stderr, "create", err)
	}
	if *f.json {
		printJSON(stdout, s)
	} else {
		fmt.Fprintf(stdout, "created %s (agent %s, role %s)\n", s.Record.SessionID, s.Record.AgentID, s.Record.Role)
	}
	return 0
}

func runGet(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("get", stdout, stderr)
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	id := pos[0]
	s, err := f.client().GetSession(context.Background(), id)
	if err != nil {
		return fail(stderr, "get", err)
	}
	if *f.json {
		printJSON(stdout, s)
		return 0
	}
	printSession(stdout, s)
	return 0
}

func printSession(w io.Writer, s *api.Session) {
	r := s.Record
	run := "none"
	if s.CurrentRun != nil {
		run = s.CurrentRun.RunID + " (" + s.CurrentRun.Status + ")"
	}
	fmt.Fprintf(w, "%s  status %-8s agent %s  role %s  last sequence %d  run %s\n", r.SessionID, r.Status, r.AgentID, r.Role, s.LastSequence, run)
}

func runList(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("list", stdout, stderr)
	status := f.fs.String("status", "", "only sessions with this status")
	agent := f.fs.String("agent", "", "only sessions of this agent")
	project := f.fs.String("project", "", "only sessions of this project")
	if _, code, ok := f.parse(args); !ok {
		return code
	}
	q := url.Values{}
	for k, v := range map[string]string{"status": *status, "agent": *agent, "project": *project} {
		if v != "" {
			q.Set(k, v)
		}
	}
	c := f.client()
	for {
		page, err := c.ListSessions(context.Background(), q)
		if err != nil {
			return fail(stderr, "list", err)
		}
		for i := range page.Sessions {
			if *f.json {
				printJSON(stdout, &page.Sessions[i])
			} else {
				printSession(stdout, &page.Sessions[i])
			}
		}
		if page.Next == "" {
			return 0
		}
		q.Set("after", page.Next)
	}
}

func runAppend(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("append", stdout, stderr)
	expected := f.fs.Int64("expected-sequence", -2, "append only if the log ends at this sequence (-1: empty)")
	multitask := f.fs.String("multitask", "", "for a run the batch queues while another run is active: reject, enqueue or interrupt (default: the session's, else reject)")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	id := pos[0]
	in := stdin
	if len(pos) == 2 && pos[1] != "-" {
		name := pos[1]
		file, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(stderr, "sessiond append: %v\n", err)
			return 2
		}
		defer file.Close()
		in = file
	}
	data, err := io.ReadAll(in)
	if err != nil {
		fmt.Fprintf(stderr, "sessiond append: read input: %v\n", err)
		return 2
	}
	opt := client.AppendOptions{Multitask: *multitask}
	if *expected >= -1 {
		opt.Expected = expected
	}
	res, err := f.client().AppendNDJSONWith(context.Background(), id, data, opt)
	if err != nil {
		return fail(stderr, "append", err)
	}
	if *f.json {
		printJSON(stdout, res)
		return 0
	}
	acc, dup := 0, 0
	for _, r := range res.Results {
		if r.Status == api.Duplicate {
			dup++
		} else {
			acc++
		}
	}
	if in := res.Interrupted; in != nil {
		fmt.Fprintf(stdout, "interrupted run %s first (%d events)\n", in.RunID, len(in.Results))
	}
	fmt.Fprintf(stdout, "%d accepted, %d duplicate; last sequence %d\n", acc, dup, res.LastSequence)
	return 0
}

func runRead(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("read", stdout, stderr)
	after := f.fs.Int64("after", -1, "print events after this sequence")
	limit := f.fs.Int("limit", 0, "print at most this many events (0: all)")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if *limit == 0 {
		// The whole rest of the log: one streamed answer (client.Export), not a request per page.
		for ev, err := range f.client().Export(context.Background(), pos[0], *after) {
			if err != nil {
				return fail(stderr, "read", err)
			}
			printEvent(stdout, ev.Data, *f.json)
		}
		return 0
	}
	err := readPages(context.Background(), f.client(), pos[0], *after, *limit, func(raw json.RawMessage) {
		printEvent(stdout, raw, *f.json)
	})
	return pagingFail(stderr, "read", err)
}

// readPages reads session id's events after the sequence after, in pages of at most 1000
// (and at most limit in all when limit > 0), and calls each with every event in order. It
// stops at an empty page or once limit events were read. It decodes only the last
// event of each page, for the sequence to read after; a failure to do so is a
// [pageDecodeError].
func readPages(ctx context.Context, c *client.Client, id string, after int64, limit int, each func(json.RawMessage)) error {
	read := 0
	for {
		n := 1000
		if limit > 0 && limit-read < n {
			n = limit - read
		}
		page, err := c.ReadEvents(ctx, id, after, n)
		if err != nil {
			return err
		}
		for _, raw := range page.Events {
			each(raw)
		}
		read += len(page.Events)
		if len(page.Events) == 0 || (limit > 0 && read >= limit) {
			return nil
		}
		var last struct {
			Sequence int64 `json:"sequence"`
		}
		if err := json.Unmarshal(page.Events[len(page.Events)-1], &last); err != nil {
			return pageDecodeError{err}
		}
		after = last.Sequence
	}
}

// pageDecodeError is an event of a page that is not JSON with a sequence.
type pageDecodeError struct{ err error }

func (e pageDecodeError) Error() string { return e.err.Error() }

// pagingFail reports readPages' error for cmd and returns the exit code: 0 for none, 1 for
// an event that would not decode, and [fail]'s code for a failed request.
func pagingFail(stderr io.Writer, cmd string, err error) int {
	var de pageDecodeError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &de):
		fmt.Fprintf(stderr, "sessiond %s: %v\n", cmd, err)
		return 1
	}
	return fail(stderr, cmd, err)
}

func runTail(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := newClientFlags("tail", stdout, stderr)
	after := f.fs.Int64("after", -1, "start after this sequence (-1: from the start)")
	onlyNew := f.fs.Bool("new", false, "only events appended from now on")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	id := pos[0]
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := f.client().Stream(ctx, id, client.StreamOptions{After: *after, Tail: *onlyNew,
		OnReconnect: func(at int64, cause error) {
			fmt.Fprintf(stderr, "sessiond tail: connection lost (%v); resuming after sequence %d\n", cause, at)
		}}, func(e client.StreamEvent) error {
		printEvent(stdout, e.Data, *f.json)
		return nil
	})
	if errors.Is(err, context.Canceled) {
		return 0
	}
	return fail(stderr, "tail", err)
}

// printEvent prints one stored event: the JSON itself, or a one-line summary for people.
func printEvent(w io.Writer, raw json.RawMessage, asJSON bool) {
	if asJSON {
		fmt.Fprintf(w, "%s\n", raw)
		return
	}
	var e contract.Event
	if err := json.Unmarshal(raw, &e); err != nil {
		fmt.Fprintf(w, "%s\n", raw)
		return
	}
	run := ""
	if e.RunID != "" {
		run = " run=" + e.RunID
	}
	fmt.Fprintf(w, "%6d  %s  %-14s %s%s\n", e.Sequence, e.OccurredAt, e.EventType, summarize(e.Payload), run)
}

// summarize says in a few words what a payload holds.
func summarize(p contract.Payload) string {
	switch p := p.(type) {
	case *contract.MessagePayload:
		var text []string
		for _, part := range p.Parts {
			text = append(text, partText(part))
		}
		return fmt.Sprintf("%s: %s", p.Role, clip(strings.Join(text, " "), 80))
	case *contract.ReasoningPayload:
		return clip(p.Text, 80)
	case *contract.PlanPayload:
		return fmt.Sprintf("plan %s %s (%d steps)", p.PlanID, p.Status, len(p.Steps))
	case *contract.TaskPayload:
		return fmt.Sprintf("%s %s", p.Status, clip(p.Title, 60))
	case *contract.ToolPayload:
		return fmt.Sprintf("%s %s", p.ToolName, p.Status)
	case *contract.ApprovalPayload:
		return fmt.Sprintf("%s %s", p.Status, clip(p.Title, 60))
	case *contract.StatusPayload:
		return p.Status
	case *contract.ArtifactPayload:
		return fmt.Sprintf("%s %s (%s)", p.Kind, p.Name, p.Status)
	case *contract.UsagePayload:
		if p.TotalTokens != nil {
			return fmt.Sprintf("%d tokens", *p.TotalTokens)
		}
		return "usage"
	case *contract.ErrorPayload:
		return fmt.Sprintf("%s: %s", p.Code, clip(p.Message, 70))
	case *contract.DiffPayload:
		return fmt.Sprintf("%s %s", p.Status, p.Path)
	case *contract.WorkspaceFilePayload:
		return fmt.Sprintf("%s %s", p.Operation, p.Path)
	case *contract.TerminalPayload:
		return fmt.Sprintf("%s: %s", p.Stream, clip(strings.TrimSpace(p.Chunk), 70))
	case *contract.TestResultPayload:
		return fmt.Sprintf("%s %s", p.Status, p.Name)
	case *contract.SteerPayload:
		return fmt.Sprintf("%s: %s", p.Status, clip(p.Text, 60))
	case *contract.SummaryPayload:
		return fmt.Sprintf("%s: %s", p.Status, clip(p.Text, 60))
	case *contract.ResumePayload:
		return fmt.Sprintf("resumable=%v", p.Resumable)
	}
	return ""
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// partText is the text of a message part: a string part, or an object part's "text".
func partText(part json.RawMessage) string {
	var s string
	if json.Unmarshal(part, &s) == nil {
		return s
	}
	var obj struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(part, &obj) == nil {
		return obj.Text
	}
	return ""
}
