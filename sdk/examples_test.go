package sdk

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testenv"
)

// TestExampleAISDKWorker runs examples/aisdk-worker (a worker running an AI SDK agent with two
// tools against the mock model) under node against the real server, and steers it and stops
// it with sessiond cmd, as a person would from the web UI.
func TestExampleAISDKWorker(t *testing.T) {
	url, log := serve(t)
	node := testenv.Need(t, "node", "it runs the TypeScript example", "apt-get install nodejs npm")
	pkg := typescript(t)
	example(t, url, log, "aisdk-example", "Understood (in Celsius please)", func(agent string) *exec.Cmd {
		cmd := exec.Command(node, filepath.Join(pkg, "dist", "examples", "aisdk-worker.js"))
		cmd.Env = append(os.Environ(), "SESSIOND_URL="+url, "AGENT="+agent, "WORD_MS=100")
		return cmd
	})
}

// TestExamplePythonWorker runs examples/python-worker (a worker running a scripted agent with
// two tools) under python3 against the real server, and steers it and stops it with sessiond
// cmd, as a person would from the web UI.
func TestExamplePythonWorker(t *testing.T) {
	url, log := serve(t)
	py := testenv.Need(t, "python3", "it runs the Python example", "apt-get install python3")
	dir, err := filepath.Abs("python")
	if err != nil {
		t.Fatal(err)
	}
	example(t, url, log, "python-example", "(steered: in Celsius please)", func(agent string) *exec.Cmd {
		cmd := exec.Command(py, filepath.Join("..", "examples", "python-worker", "worker.py"))
		cmd.Env = append(os.Environ(), "PYTHONPATH="+dir, "PYTHONDONTWRITEBYTECODE=1", "SESSIOND_URL="+url, "AGENT="+agent, "WORD_MS=100")
		return cmd
	})
}

// transcriptOf is the part of GET /v1/sessions/{id}/transcript the example tests read.
type transcriptOf struct {
	Messages []struct {
		Role   string `json:"role"`
		Status string `json:"status"`
		Parts  []struct {
			Text string `json:"text"`
		} `json:"parts"`
	} `json:"messages"`
	Tools []struct {
		ToolName string `json:"toolName"`
		Status   string `json:"status"`
	} `json:"tools"`
	Steers []struct {
		Status string `json:"status"`
	} `json:"steers"`
	Usage struct {
		Total struct {
			TotalTokens int `json:"totalTokens"`
		} `json:"total"`
	} `json:"usage"`
}

// text is the assistant's text so far.
func (tr *transcriptOf) text() string {
	var b strings.Builder
	for _, m := range tr.Messages {
		if m.Role == "assistant" {
			for _, p := range m.Parts {
				b.WriteString(p.Text)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// example starts a session of a fresh agent with a queued run, starts the example worker
// (start), waits for its answer to stream, steers it (the steer must be applied and its mark,
// steered, must show in the answer), stops it and checks the run stopped with both tools done.
func example(t *testing.T, url string, log *testenv.SyncBuffer, prefix, steered string, start func(agent string) *exec.Cmd) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	agent := prefix + "-" + fmt.Sprint(time.Now().UnixNano()%1e6)
	id := "S-" + agent
	body := fmt.Sprintf(`{"session_id":%q,"agent_id":%q,"role":"implementer","snapshot":{"mode":"work","modelId":"example","capabilities":{"text":true,"tools":true,"approval":true,"steering":true}}}`, id, agent)
	if err := postJSON(ctx, url+"/v1/sessions", "application/json", body); err != nil {
		t.Fatal(err)
	}
	ts := time.Now().UTC().Format(time.RFC3339)
	events := fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"u1","sessionId":%q,"sequence":0,"idempotencyKey":"u1","occurredAt":%q,"eventType":"message","payload":{"messageId":"m1","role":"user","operation":"append","parts":[{"type":"text","text":"What is the weather in Paris?"}]}}
{"contract":"AgentSessionEvent","eventId":"q1","sessionId":%q,"sequence":0,"idempotencyKey":"q1","occurredAt":%q,"runId":"run-1","sourceMessageId":"m1","eventType":"status","payload":{"status":"queued"}}
`, id, ts, id, ts)
	if err := postJSON(ctx, url+"/v1/sessions/"+id+"/events", "application/x-ndjson", events); err != nil {
		t.Fatal(err)
	}
	out := &testenv.SyncBuffer{}
	cmd := start(agent)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	defer func() {
		if t.Failed() {
			t.Logf("example:\n%s\nsessiond:\n%s", out.String(), tail(log.String(), 4000))
		}
	}()
	var tr transcriptOf
	until := func(what string, ok func() bool) {
		t.Helper()
		for {
			if err := getJSON(ctx, url+"/v1/sessions/"+id+"/transcript", &tr); err != nil {
				t.Fatal(err)
			}
			if ok() {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("timed out waiting for %s; the assistant said:\n%s", what, tr.text())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	until("the answer to stream", func() bool { return strings.Contains(tr.text(), "sunny") })
	// Steer as a person would (a busy worker may make it conflict: read the head and resend).
	for i := 0; ; i++ {
		c := exec.CommandContext(ctx, sessiondBin, "cmd", "steer", id, "run-1", "in Celsius please", "--server", url)
		b, err := c.CombinedOutput()
		if err == nil {
			break
		}
		if !strings.Contains(string(b), "SEQUENCE_CONFLICT") || i == 20 {
			t.Fatalf("sessiond cmd steer: %v\n%s", err, b)
		}
	}
	until("the steer to be applied", func() bool {
		return len(tr.Steers) == 1 && tr.Steers[0].Status == "applied" && strings.Contains(tr.text(), steered)
	})
	b, err := exec.CommandContext(ctx, sessiondBin, "cmd", "--wait", "10s", "stop", id, "run-1", "--server", url).CombinedOutput()
	if err != nil || !strings.Contains(string(b), "termination confirmed") {
		t.Fatalf("sessiond cmd stop: %v\n%s", err, b)
	}
	var runs struct {
		Runs []struct {
			RunID  string `json:"runId"`
			Status string `json:"status"`
		} `json:"runs"`
	}
	if err := getJSON(ctx, url+"/v1/sessions/"+id+"/runs", &runs); err != nil {
		t.Fatal(err)
	}
	if len(runs.Runs) != 1 || runs.Runs[0].Status != "stopped" {
		t.Errorf("runs: %+v, want run-1 stopped", runs.Runs)
	}
	if err := getJSON(ctx, url+"/v1/sessions/"+id+"/transcript", &tr); err != nil {
		t.Fatal(err)
	}
	var tools []string
	for _, tool := range tr.Tools {
		tools = append(tools, tool.ToolName+":"+tool.Status)
	}
	if strings.Join(tools, " ") != "weather:completed clock:completed" {
		t.Errorf("tools: %v, want weather and clock completed", tools)
	}
	if tr.Usage.Total.TotalTokens == 0 {
		t.Errorf("no usage recorded")
	}
	t.Logf("the assistant said:\n%s", tr.text())
}
