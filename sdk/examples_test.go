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

	"github.com/chromedp/chromedp"
	"github.com/sessiond/sessiond/internal/testenv"
)

// TestExampleAISDKWorker runs examples/aisdk-worker (a worker running an AI SDK agent with two
// tools against the mock model) under node against the real server, and steers it and stops
// it from the web UI, in Chromium.
func TestExampleAISDKWorker(t *testing.T) {
	url, log := serve(t)
	node := testenv.Need(t, "node", "it runs the TypeScript example", "apt-get install nodejs npm")
	pkg := typescript(t)
	example(t, url, log, "aisdk-example", "Understood (in Celsius please)", func(agent string) *exec.Cmd {
		cmd := exec.Command(node, filepath.Join(pkg, "dist", "examples", "aisdk-worker.js"))
		cmd.Env = append(os.Environ(), "SESSIOND_URL="+url, "AGENT="+agent, "WORD_MS=300")
		return cmd
	})
}

// TestExamplePythonWorker runs examples/python-worker (a worker running a scripted agent with
// two tools) under python3 against the real server, and steers it and stops it from the web UI,
// in Chromium.
func TestExamplePythonWorker(t *testing.T) {
	url, log := serve(t)
	py := testenv.Need(t, "python3", "it runs the Python example", "apt-get install python3")
	dir, err := filepath.Abs("python")
	if err != nil {
		t.Fatal(err)
	}
	example(t, url, log, "python-example", "(steered: in Celsius please)", func(agent string) *exec.Cmd {
		cmd := exec.Command(py, filepath.Join("..", "examples", "python-worker", "worker.py"))
		cmd.Env = append(os.Environ(), "PYTHONPATH="+dir, "PYTHONDONTWRITEBYTECODE=1", "SESSIOND_URL="+url, "AGENT="+agent, "WORD_MS=300")
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

// example starts a session of a fresh agent with a queued run, opens it in the web UI, starts
// the example worker (start), waits for its answer to stream, then, in the web UI, steers it (the steer must be
// applied and its mark, steered, must show in the answer) and stops it, and checks the run
// stopped with both tools done.
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
	// A person has the session open in the web UI before the worker starts.
	page := browser(t)
	ui(t, page, "open the session", chromedp.Navigate(url+"/#/s/"+id), chromedp.WaitVisible(chromedp.CSS(`.conn[data-state="live"]`)))
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
	// The person steers the run, then stops it.
	ui(t, page, "type the steer", chromedp.SendKeys(chromedp.CSS(`#steer-text`), "in Celsius please"))
	for i := 0; ; i++ {
		// The page sends what it has seen as expectedSequence: while the worker writes, the
		// server may refuse it SEQUENCE_CONFLICT; the text stays and the person sends again.
		ui(t, page, "send the steer", chromedp.Click(chromedp.CSS(`.controls .steer button`)))
		var accepted bool
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if err := getJSON(ctx, url+"/v1/sessions/"+id+"/transcript", &tr); err != nil {
				t.Fatal(err)
			}
			if accepted = len(tr.Steers) > 0; accepted {
				break
			}
			notice, _ := chromedp.Run(page, chromedp.Evaluate[string](`document.querySelector('.notice.error')?.textContent ?? ""`))
			if notice != "" {
				if !strings.Contains(notice, "SEQUENCE_CONFLICT") || i == 30 {
					t.Fatalf("the page's steer was refused: %s", notice)
				}
				break
			}
		}
		if accepted {
			break
		}
	}
	until("the steer to be applied", func() bool {
		return len(tr.Steers) == 1 && tr.Steers[0].Status == "applied" && strings.Contains(tr.text(), steered)
	})
	ui(t, page, "stop the run", chromedp.Click(chromedp.CSS(`.controls button.danger`)))
	ui(t, page, "see it stopped", uiWait(`document.querySelector('main').dataset.runStatus === 'stopped'`))
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

// browser starts a headless Chromium (Debian's chromium) for the test and answers its context.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := testenv.Need(t, "chromium", "the examples are steered and stopped from the web UI in it", "apt-get install -y chromium")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// ui runs browser actions and fails the test on an error, showing the page.
func ui(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		dom, _ := chromedp.Run(c, chromedp.OuterHTML(chromedp.CSS("body")))
		t.Fatalf("%s: %v\npage: %s", what, err, tail(dom, 4000))
	}
}

// uiWait polls a JavaScript condition in the page until it is true (15 s at most).
func uiWait(expr string) chromedp.Action[chromedp.Void] {
	poll := chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(15*time.Second))
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := poll(ctx, tg)
		return chromedp.Void{}, err
	}
}
