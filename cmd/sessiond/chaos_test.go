package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/internal/testenv"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
)

// TestChaosWorkers runs 8 examples/echoagent worker processes over the queued runs of 200
// sessions while the test SIGKILLs workers at random (and starts new ones in their place) and
// SIGKILLs and restarts a server instance, with 1s leases and --max-attempts 3. On SQLite one
// instance serves; with SESSIOND_TEST_POSTGRES two instances share a fresh schema, half the
// workers on each, and the second one is restarted.
//
// It checks that every run ends (completed, stopped, or failed: by its worker or by lease
// expiry), that kills did cost leases (LEASE_EXPIRED events, new attempts), and that no run
// has events from two lease holders interleaved. The worker names the fencing token it appends
// under in each event id ("echoagent-<runId>-t<token>-…"); the server refuses an append whose
// lease is not the run's current one, and a run changes hands only with a larger token. So in
// the log, the tokens of a run's worker events must never go down in sequence order, and none
// may exceed the run's fencingToken: a late append by an old holder after a newer one would
// show as a smaller token after a larger one.
func TestChaosWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test with real processes: skipped with -short")
	}
	t.Run("sqlite", func(t *testing.T) {
		chaos(t, []string{"--data", filepath.Join(t.TempDir(), "data")}, 1)
	})
	t.Run("postgres", func(t *testing.T) {
		if os.Getenv("SESSIOND_TEST_POSTGRES") == "" {
			t.Skip("set SESSIOND_TEST_POSTGRES to run it on PostgreSQL")
		}
		chaos(t, []string{"--store", pgtest.Schema(t), "--data", filepath.Join(t.TempDir(), "unused")}, 2)
	})
}

var tokenInEventID = regexp.MustCompile(`^echoagent-.*-t(\d+)-\d+-\d+$`)

func chaos(t *testing.T, store []string, instances int) {
	const sessions, workers = 200, 8
	agentBin := filepath.Join(t.TempDir(), "echoagent")
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH to build examples/echoagent with: %v", err)
	}
	build := exec.Command(goBin, "build", "-o", agentBin, "./examples/echoagent")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/echoagent: %v\n%s", err, out)
	}

	serveArgs := append([]string{"--max-attempts", "3", "--sweep-interval", "0"}, store...)
	urls := make([]string, instances)
	servers := make([]*exec.Cmd, instances)
	logs := make([]*testenv.SyncBuffer, instances)
	for i := range instances {
		urls[i], servers[i], logs[i] = startServe(t, serveArgs...)
	}
	defer func() {
		if t.Failed() {
			for i, l := range logs {
				t.Logf("instance %d stderr:\n%s", i, l.String())
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := client.New(urls[0], nil)
	for i := range sessions {
		id := fmt.Sprintf("S-%03d", i)
		if _, err := cl.CreateSession(ctx, api.CreateSessionRequest{SessionID: id, AgentID: "echoagent", Role: "implementer",
			Snapshot: contract.Snapshot{Mode: "work", ModelID: "echo"}}); err != nil {
			t.Fatal(err)
		}
		ts := time.Now().UTC().Format(time.RFC3339)
		msg := contract.Event{Contract: "AgentSessionEvent", EventID: "u1", SessionID: id, IdempotencyKey: "u1", OccurredAt: ts, EventType: "message",
			Payload: &contract.MessagePayload{MessageID: "m1", Role: "user", Operation: "append", Parts: []contract.RawJSON{contract.RawJSON(`{"type":"text","text":"hi"}`)}}}
		queued := contract.Event{Contract: "AgentSessionEvent", EventID: "q1", SessionID: id, IdempotencyKey: "q1", RunID: "run-m1", SourceMessageID: "m1",
			OccurredAt: ts, EventType: "status", Payload: &contract.StatusPayload{Status: "queued"}}
		if _, err := cl.AppendEvents(ctx, id, []contract.Event{msg, queued}, nil); err != nil {
			t.Fatal(err)
		}
	}

	// The workers: slot i works through instance i%instances; a killed one is replaced.
	var mu sync.Mutex
	procs := make([]*exec.Cmd, workers)
	workerLog := &testenv.SyncBuffer{}
	startWorker := func(i int) {
		cmd := exec.Command(agentBin, "--server", urls[i%instances], "--concurrency", "4", "--lease-ttl", "1s",
			"--tick", "40ms", "--chunks", "6", "--skip-approval")
		cmd.Stderr = workerLog
		if err := cmd.Start(); err != nil {
			t.Errorf("start worker %d: %v", i, err)
			return
		}
		procs[i] = cmd
	}
	mu.Lock()
	for i := range workers {
		startWorker(i)
	}
	mu.Unlock()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range procs {
			if p != nil {
				p.Process.Kill()
				p.Wait()
			}
		}
	}()

	// Chaos for 6 s: a random worker SIGKILLed every 200 ms (and replaced); the last instance
	// SIGKILLed after 2 s and restarted on the same port.
	kills := 0
	restart := time.After(2 * time.Second)
	chaosEnd := time.After(6 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
chaos:
	for {
		select {
		case <-chaosEnd:
			break chaos
		case <-restart:
			last := instances - 1
			_, port, _ := net.SplitHostPort(hostOf(t, urls[last]))
			servers[last].Process.Signal(syscall.SIGKILL)
			servers[last].Wait()
			var u string
			u, servers[last], logs[last] = startServe(t, append(serveArgs, "--addr", "127.0.0.1:"+port)...)
			if u != urls[last] {
				t.Fatalf("the restarted instance listens on %s, not %s", u, urls[last])
			}
		case <-tick.C:
			i := rand.IntN(workers)
			mu.Lock()
			procs[i].Process.Signal(syscall.SIGKILL)
			procs[i].Wait()
			startWorker(i)
			mu.Unlock()
			kills++
		}
	}
	tick.Stop()

	// Every run ends.
	active := map[string]bool{"queued": true, "running": true, "waiting_approval": true, "stopping": true}
	var runs map[string][]api.RunResource
	var stillActive []string // at the last complete look, for the failure message
	for {
		runs = map[string][]api.RunResource{}
		var left []string
		for i := range sessions {
			id := fmt.Sprintf("S-%03d", i)
			rs, err := runResources(ctx, urls[0], id)
			if err != nil {
				t.Fatalf("%v\nruns still active at the last look: %v\nworker log (tail):\n%s", err, stillActive, tail(workerLog.String(), 4000))
			}
			runs[id] = rs
			for _, r := range rs {
				if active[r.Status] {
					left = append(left, fmt.Sprintf("%s/%s:%s(token %d)", id, r.RunID, r.Status, r.FencingToken))
				}
			}
		}
		if len(left) == 0 {
			break
		}
		stillActive = left
		if ctx.Err() != nil {
			t.Fatalf("%d runs never ended: %v\nworker log (tail):\n%s", len(left), left, tail(workerLog.String(), 4000))
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The log: tokens of a run's worker events never go down, and none is above the run's.
	completed, expired, attempts, checked := 0, 0, 0, 0
	for id, rs := range runs {
		fencing := map[string]int64{}
		for _, r := range rs {
			fencing[r.RunID] = r.FencingToken
			if r.Status == "completed" {
				completed++
			}
			attempts = max(attempts, r.Attempt)
		}
		page, err := cl.ReadEvents(ctx, id, -1, 1000)
		if err != nil {
			t.Fatal(err)
		}
		events := make([]contract.Event, len(page.Events))
		for i, raw := range page.Events {
			if err := events[i].UnmarshalJSON(raw); err != nil {
				t.Fatal(err)
			}
			if p, ok := events[i].Payload.(*contract.ErrorPayload); ok && p.Code == "LEASE_EXPIRED" {
				expired++
			}
		}
		problems, n := fencingProblems(events, fencing)
		for _, p := range problems {
			t.Errorf("%s: %s", id, p)
		}
		checked += n
	}
	t.Logf("%d sessions, %d worker kills, 1 instance restart: %d runs completed, %d leases expired, up to %d attempts; %d worker events checked",
		sessions, kills, completed, expired, attempts, checked)
	if checked < sessions*10 {
		t.Errorf("only %d worker events carry a token in their id: the check proved nothing", checked)
	}
	if kills == 0 || expired == 0 || attempts < 2 {
		t.Errorf("the chaos cost no lease (%d kills, %d expired, %d attempts at most): the test proved nothing", kills, expired, attempts)
	}
	if completed < sessions/2 {
		t.Errorf("only %d runs completed of at least %d sessions", completed, sessions)
	}
}

// runResources reads GET /v1/sessions/{id}/runs: the runs with their attempts, fencing tokens
// and leases (client.Runs keeps only the contract's fields).
func runResources(ctx context.Context, base, id string) ([]api.RunResource, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/sessions/"+id+"/runs", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET runs of %s: %s", id, resp.Status)
	}
	var out api.RunList
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	return out.Runs, nil
}

// fencingProblems checks a session's log against the fencing rule: the tokens named by the
// worker's event ids (tokenInEventID) never go down within a run in log order, and none is
// above the run's fencing token (fencing, by run id). It returns what breaks the rule and how
// many worker events it checked.
func fencingProblems(events []contract.Event, fencing map[string]int64) ([]string, int) {
	var problems []string
	checked := 0
	last := map[string]int64{}
	for _, e := range events {
		m := tokenInEventID.FindStringSubmatch(e.EventID)
		if m == nil || e.RunID == "" {
			continue
		}
		tok, _ := strconv.ParseInt(m[1], 10, 64)
		if tok < last[e.RunID] {
			problems = append(problems, fmt.Sprintf("run %s: event %s (seq %d) under token %d after an event under token %d", e.RunID, e.EventID, e.Sequence, tok, last[e.RunID]))
		}
		if tok > fencing[e.RunID] {
			problems = append(problems, fmt.Sprintf("run %s: event %s under token %d, above the run's fencing token %d", e.RunID, e.EventID, tok, fencing[e.RunID]))
		}
		last[e.RunID] = tok
		checked++
	}
	return problems, checked
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
