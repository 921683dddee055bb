package sdk

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testenv"
)

// TestWorkerChaos runs the TypeScript and the Python SDK's Worker as real processes
// (sdk/typescript/testdata/chaos-worker.ts under node, sdk/python/tests/chaos_worker.py under
// python3) over the queued runs of 24 sessions, with 1 s leases and --max-attempts 3, while the
// test SIGKILLs workers at random and starts new ones in their place, SIGSTOPs one worker for
// 2.5 s (its lease is lost while it sleeps; it must not write after it wakes), and SIGKILLs the
// server and restarts it on the same port, as TestChaosWorkers (cmd/sessiond) does to the Go
// client.Worker.
//
// It checks that every run ends with exactly one terminal status; that the kills cost leases
// (LEASE_EXPIRED, later attempts); that no stale write is stored: the tokens the workers name
// in their event ids ("w-<runId>-t<token>-<i>") never go down in a run's log and none is above
// the run's fencing token; that a completed run holds its final attempt's work exactly once
// (each of its 10 events, once); and that the paused worker was told LEASE_LOST.
func TestWorkerChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test with real processes: skipped with -short")
	}
	t.Run("typescript", func(t *testing.T) {
		node := testenv.Need(t, "node", "it runs the TypeScript SDK's worker", "apt-get install nodejs npm")
		pkg := typescript(t)
		workerChaos(t, func(u, agent string) *exec.Cmd {
			return exec.Command(node, filepath.Join(pkg, "dist", "testdata", "chaos-worker.js"), u, agent)
		})
	})
	t.Run("python", func(t *testing.T) {
		py := testenv.Need(t, "python3", "it runs the Python SDK's worker", "apt-get install python3")
		dir, err := filepath.Abs("python")
		if err != nil {
			t.Fatal(err)
		}
		workerChaos(t, func(u, agent string) *exec.Cmd {
			cmd := exec.Command(py, filepath.Join(dir, "tests", "chaos_worker.py"), u, agent)
			cmd.Env = append(os.Environ(), "PYTHONPATH="+dir, "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
			return cmd
		})
	})
}

var chaosEventID = regexp.MustCompile(`^w-(.+)-t(\d+)-(\d+)$`)

// chaosRun is what GET /v1/sessions/{id}/runs says of a run.
type chaosRun struct {
	RunID        string `json:"runId"`
	Status       string `json:"status"`
	Attempt      int    `json:"attempt"`
	FencingToken int64  `json:"fencingToken"`
}

// chaosEvent is the part of a stored event the checks read.
type chaosEvent struct {
	EventID   string `json:"eventId"`
	RunID     string `json:"runId"`
	Sequence  int64  `json:"sequence"`
	EventType string `json:"eventType"`
	Payload   struct {
		Status string `json:"status"`
		Code   string `json:"code"`
	} `json:"payload"`
}

func getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func postJSON(ctx context.Context, u, contentType, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("POST %s: %s: %s", u, resp.Status, b)
	}
	return nil
}

func workerChaos(t *testing.T, worker func(url, agent string) *exec.Cmd) {
	const sessions, workers = 24, 3
	agent := "chaos-" + strings.ReplaceAll(strings.ToLower(filepath.Base(t.Name())), "/", "-")
	data := filepath.Join(t.TempDir(), "data")
	serveArgs := []string{"serve", "--data", data, "--max-attempts", "3", "--sweep-interval", "0"}
	server := exec.Command(sessiondBin, append(serveArgs, "--addr", "127.0.0.1:0")...)
	base, serverLog := testenv.StartServe(t, server)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(u.Host)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range sessions {
		id := fmt.Sprintf("S-%s-%02d", agent, i)
		body := fmt.Sprintf(`{"session_id":%q,"agent_id":%q,"role":"implementer","snapshot":{"mode":"work","modelId":"chaos","capabilities":{"text":true}}}`, id, agent)
		if err := postJSON(ctx, base+"/v1/sessions", "application/json", body); err != nil {
			t.Fatal(err)
		}
		ts := time.Now().UTC().Format(time.RFC3339)
		events := fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"u1","sessionId":%q,"sequence":0,"idempotencyKey":"u1","occurredAt":%q,"eventType":"message","payload":{"messageId":"m1","role":"user","operation":"append","parts":[{"type":"text","text":"hi"}]}}
{"contract":"AgentSessionEvent","eventId":"q1","sessionId":%q,"sequence":0,"idempotencyKey":"q1","occurredAt":%q,"runId":"run-m1","sourceMessageId":"m1","eventType":"status","payload":{"status":"queued"}}
`, id, ts, id, ts)
		if err := postJSON(ctx, base+"/v1/sessions/"+id+"/events", "application/x-ndjson", events); err != nil {
			t.Fatal(err)
		}
	}

	// The workers: each says "busy" and "idle" on its standard output; slot i's process is
	// procs[i], and busy[i] whether it holds a run, as far as the test has read.
	var mu sync.Mutex
	procs := make([]*exec.Cmd, workers)
	busy := make([]bool, workers)
	workerLog := &testenv.SyncBuffer{}
	start := func(i int) {
		cmd := worker(base, agent)
		cmd.Stderr = workerLog
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Errorf("start worker %d: %v", i, err)
			return
		}
		procs[i], busy[i] = cmd, false
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				mu.Lock()
				if procs[i] == cmd {
					busy[i] = sc.Text() == "busy"
				}
				mu.Unlock()
			}
		}()
	}
	// victim picks a random busy slot other than the paused one; -1 when none is busy.
	victim := func(paused int) int {
		var slots []int
		for i, b := range busy {
			if b && i != paused {
				slots = append(slots, i)
			}
		}
		if len(slots) == 0 {
			return -1
		}
		return slots[rand.IntN(len(slots))]
	}
	mu.Lock()
	for i := range workers {
		start(i)
	}
	mu.Unlock()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range procs {
			if p != nil {
				p.Process.Signal(syscall.SIGCONT)
				p.Process.Kill()
				p.Wait()
			}
		}
	}()
	defer func() {
		if t.Failed() {
			t.Logf("sessiond:\n%s\nworkers:\n%s", tail(serverLog.String(), 6000), tail(workerLog.String(), 6000))
		}
	}()

	// Chaos for 5 s: a random busy worker (not the paused one) SIGKILLed every 400 ms and
	// replaced; from 1 s on, the first busy worker paused for 2.5 s; the server SIGKILLed at 2 s
	// and restarted. The chaos ends when the paused worker has been resumed.
	kills := 0
	paused := -1
	pause := time.After(1 * time.Second)
	var resume <-chan time.Time // set when a worker is paused: 2.5 s later
	restart := time.After(2 * time.Second)
	end := time.After(5 * time.Second)
	tick := time.NewTicker(400 * time.Millisecond)
chaos:
	for {
		select {
		case <-end:
			if paused >= 0 || resume == nil {
				if ctx.Err() != nil {
					t.Fatalf("no worker was busy to be paused")
				}
				end = time.After(100 * time.Millisecond) // not before the paused worker is resumed
				continue
			}
			break chaos
		case <-pause:
			mu.Lock()
			if paused = victim(-1); paused < 0 {
				mu.Unlock()
				pause = time.After(50 * time.Millisecond) // none busy yet: try again soon
				continue
			}
			procs[paused].Process.Signal(syscall.SIGSTOP)
			resume = time.After(2500 * time.Millisecond)
			mu.Unlock()
		case <-resume:
			mu.Lock()
			procs[paused].Process.Signal(syscall.SIGCONT)
			paused = -1
			mu.Unlock()
		case <-restart:
			server.Process.Signal(syscall.SIGKILL)
			server.Wait()
			server = exec.Command(sessiondBin, append(serveArgs, "--addr", "127.0.0.1:"+port)...)
			var again string
			again, serverLog = testenv.StartServe(t, server)
			if again != base {
				t.Fatalf("the restarted server listens on %s, not %s", again, base)
			}
		case <-tick.C:
			mu.Lock()
			if i := victim(paused); i >= 0 {
				procs[i].Process.Signal(syscall.SIGKILL)
				procs[i].Wait()
				start(i)
				kills++
			}
			mu.Unlock()
		}
	}
	tick.Stop()

	// Every run ends. A run whose lease expired ends failed, and the server queues its next
	// attempt as a new run (up to --max-attempts).
	terminal := map[string]bool{"completed": true, "stopped": true, "failed": true}
	runs := map[string][]chaosRun{}
	for {
		var left []string
		for i := range sessions {
			id := fmt.Sprintf("S-%s-%02d", agent, i)
			var out struct{ Runs []chaosRun }
			if err := getJSON(ctx, base+"/v1/sessions/"+id+"/runs", &out); err != nil {
				t.Fatal(err)
			}
			runs[id] = out.Runs
			for _, r := range out.Runs {
				if !terminal[r.Status] {
					left = append(left, fmt.Sprintf("%s/%s:%s", id, r.RunID, r.Status))
				}
			}
		}
		if len(left) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d runs never ended: %v", len(left), left)
		}
		time.Sleep(100 * time.Millisecond)
	}

	completed, expired, attempts, checked := 0, 0, 0, 0
	for id, rs := range runs {
		var page struct{ Events []chaosEvent }
		if err := getJSON(ctx, base+"/v1/sessions/"+id+"/events?after=-1&limit=1000", &page); err != nil {
			t.Fatal(err)
		}
		fencing := map[string]int64{}
		done := 0
		for _, r := range rs {
			fencing[r.RunID] = r.FencingToken
			attempts = max(attempts, r.Attempt)
			if r.Status == "completed" {
				done++
			}
		}
		if done > 1 {
			t.Errorf("%s: %d runs completed, want at most one (the work done once)", id, done)
		}
		completed += done
		ends := map[string]int{}
		last := map[string]int64{}
		work := map[string]map[int64]map[int]int{} // run → token → step → how many times stored
		for _, e := range page.Events {
			if e.EventType == "error" && e.Payload.Code == "LEASE_EXPIRED" {
				expired++
			}
			if e.EventType == "status" && terminal[e.Payload.Status] {
				ends[e.RunID]++
			}
			m := chaosEventID.FindStringSubmatch(e.EventID)
			if m == nil {
				continue
			}
			tok, _ := strconv.ParseInt(m[2], 10, 64)
			step, _ := strconv.Atoi(m[3])
			if m[1] != e.RunID {
				t.Errorf("%s: event %s carries run %s", id, e.EventID, e.RunID)
			}
			if tok < last[e.RunID] {
				t.Errorf("%s: event %s (seq %d) under token %d after an event under token %d: a stale write was stored", id, e.EventID, e.Sequence, tok, last[e.RunID])
			}
			if tok > fencing[e.RunID] {
				t.Errorf("%s: event %s under token %d, above the run's fencing token %d", id, e.EventID, tok, fencing[e.RunID])
			}
			last[e.RunID] = tok
			if work[e.RunID] == nil {
				work[e.RunID] = map[int64]map[int]int{}
			}
			if work[e.RunID][tok] == nil {
				work[e.RunID][tok] = map[int]int{}
			}
			work[e.RunID][tok][step]++
			checked++
		}
		for _, r := range rs {
			if ends[r.RunID] != 1 {
				t.Errorf("%s: run %s has %d terminal statuses, want exactly 1", id, r.RunID, ends[r.RunID])
			}
			if r.Status != "completed" {
				continue
			}
			final := work[r.RunID][last[r.RunID]]
			for step := 0; step <= 9; step++ {
				if final[step] != 1 {
					t.Errorf("%s: run %s's completing holder (token %d) stored step %d %d times, want exactly once", id, r.RunID, last[r.RunID], step, final[step])
				}
			}
		}
	}
	leaseLost := strings.Count(workerLog.String(), "LEASE_LOST")
	t.Logf("%d sessions, %d worker kills, a worker paused 2.5 s, 1 server restart: %d sessions' work completed, %d leases expired, up to %d attempts, %d LEASE_LOST answers; %d worker events checked",
		sessions, kills, completed, expired, attempts, leaseLost, checked)
	if leaseLost == 0 {
		t.Errorf("no worker was told LEASE_LOST: the paused worker's lease was not lost, or it did not notice")
	}
	if kills == 0 || expired == 0 || attempts < 2 {
		t.Errorf("the chaos cost no lease (%d kills, %d expired, %d attempts at most): the test proved nothing", kills, expired, attempts)
	}
	if completed < sessions/2 {
		t.Errorf("only %d runs completed of %d", completed, sessions)
	}
	if checked < sessions*10 {
		t.Errorf("only %d worker events checked: the check proved nothing", checked)
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
