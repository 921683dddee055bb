package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/wire"
)

// doLease sends a request with the Sessiond-Lease header set to lease (none when "").
func (b *bundle) doLease(t testing.TB, method, path, lease, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, b.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if lease != "" {
		req.Header.Set(wire.LeaseHeader, lease)
	}
	resp, err := b.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: string(data), header: resp.Header}
}

// queueRun creates session sid with a user message m1 and run r1 queued for it.
func (b *bundle) queueRun(t testing.TB, sid string) *runtimeSim {
	t.Helper()
	r := b.runtime(t, sid, allCaps)
	r.message("m1", "user", "go")
	r.status("r1", "m1", "queued")
	return r
}

// claim claims with body and decodes the answer; it fails the test unless the status is want.
func (b *bundle) claim(t testing.TB, body string, want int) wire.Claim {
	t.Helper()
	resp := b.do(t, "POST", "/v1/runs/claim", "", body)
	if resp.status != want {
		t.Fatalf("claim %s: %d %s, want %d", body, resp.status, resp.body, want)
	}
	var c wire.Claim
	if want == http.StatusOK {
		if err := json.Unmarshal([]byte(resp.body), &c); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// runEvent is a terminal event of run r1 of session sid with key k.
func runEvent(sid, k string) string {
	return fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":%q,"sessionId":%q,"sequence":0,"idempotencyKey":%q,"occurredAt":"2026-03-01T12:00:00Z","runId":"r1","eventType":"terminal","payload":{"terminalId":"t","stream":"stdout","chunk":"x"}}`, k, sid, k)
}

// TestClaimRefusesAMalformedFilter: every malformed claim body is refused naming the field,
// and nothing is claimed.
func TestClaimRefusesAMalformedFilter(t *testing.T) {
	b := setup(t, server.Options{})
	b.queueRun(t, "S-1")
	for _, tc := range []struct {
		name, body string
		status     int
		says       string
	}{
		{"not JSON", `{"project":`, 400, "request body"},
		{"duplicate key", `{"project":"a","project":"b"}`, 400, "project"},
		{"unknown field", `{"agentId":"a"}`, 422, "agentId"},
		{"wrong type", `{"capabilities":"tools"}`, 422, "capabilities"},
		{"unknown capability", `{"capabilities":["tools","telepathy"]}`, 422, `"capabilities" holds "telepathy"`},
		{"padded project", `{"project":" p"}`, 422, `field "project"`},
		{"wait too long", `{"wait":"31s"}`, 422, `field "wait"`},
		{"wait not a duration", `{"wait":"soon"}`, 422, `field "wait"`},
		{"lease too short", `{"leaseTtl":"10ms"}`, 422, `field "leaseTtl"`},
	} {
		resp := b.do(t, "POST", "/v1/runs/claim", "", tc.body)
		if resp.status != tc.status || !strings.Contains(resp.body, strings.ReplaceAll(tc.says, `"`, `\"`)) {
			t.Errorf("%s: %d %s, want %d naming %s", tc.name, resp.status, resp.body, tc.status, tc.says)
		}
	}
	if c := b.claim(t, `{}`, 200); c.Run.RunID != "r1" {
		t.Errorf("the refused claims took the run: %+v", c)
	}
}

// TestClaimLeaseAndFencing walks a worker through a claim, fenced appends, a renewal and a
// release over HTTP, and a stale worker through the refusals.
func TestClaimLeaseAndFencing(t *testing.T) {
	b := setup(t, server.Options{})
	b.claim(t, ``, http.StatusNoContent) // nothing queued: answered at once
	b.queueRun(t, "S-1")
	c := b.claim(t, `{"agent_id":"agent-1","role":"implementer","capabilities":["approval"],"leaseTtl":"1m"}`, 200)
	if c.Run.RunID != "r1" || c.Run.SessionID != "S-1" || c.Lease.Token != 1 || c.Attempt != 1 || c.Lease.Header != c.Lease.LeaseID+":1" {
		t.Fatalf("claim = %+v", c)
	}
	var run api.RunResource
	if err := json.Unmarshal([]byte(b.do(t, "GET", "/v1/sessions/S-1/runs/r1", "", "").body), &run); err != nil {
		t.Fatal(err)
	}
	if run.Lease == nil || run.Lease.LeaseID != c.Lease.LeaseID || run.FencingToken != 1 || run.Attempt != 1 || run.Lease.ExpiresAt != c.Lease.ExpiresAt {
		t.Errorf("run resource = %+v, want the lease of the claim", run)
	}
	path := "/v1/sessions/S-1/events"
	for _, tc := range []struct {
		name, lease string
		code        contract.ErrorCode
	}{
		{"no lease", "", api.CodeLeaseRequired},
		{"malformed", "garbage", api.CodeLeaseLost},
		{"no token", c.Lease.LeaseID + ":", api.CodeLeaseLost},
		{"forged id", "L-forged:1", api.CodeLeaseLost},
		{"stale token", c.Lease.LeaseID + ":0", api.CodeLeaseLost},
		{"future token", c.Lease.LeaseID + ":2", api.CodeLeaseLost},
	} {
		resp := b.doLease(t, "POST", path, tc.lease, runEvent("S-1", "x-"+tc.name))
		if resp.status != http.StatusConflict || !strings.Contains(resp.body, string(tc.code)) {
			t.Errorf("append with %s: %d %s, want 409 %s", tc.name, resp.status, resp.body, tc.code)
		}
	}
	if got := b.lastSequence(t, "S-1"); got != 1 {
		t.Errorf("refused appends moved the log to %d", got)
	}
	if resp := b.doLease(t, "POST", path, c.Lease.Header, runEvent("S-1", "ok")); resp.status != 201 {
		t.Fatalf("append under the lease: %d %s", resp.status, resp.body)
	}
	// Renew, then release; the old lease is then lost, and the run is claimable again.
	resp := b.do(t, "POST", "/v1/sessions/S-1/runs/r1/lease", "", fmt.Sprintf(`{"leaseId":%q,"token":1,"leaseTtl":"2m"}`, c.Lease.LeaseID))
	var renewed wire.Lease
	if resp.status != 200 || json.Unmarshal([]byte(resp.body), &renewed) != nil || renewed.ExpiresAt <= c.Lease.ExpiresAt {
		t.Fatalf("renew: %d %s", resp.status, resp.body)
	}
	for _, tc := range []struct{ name, path, body, says string }{
		{"renew, stale token", "/v1/sessions/S-1/runs/r1/lease", fmt.Sprintf(`{"leaseId":%q,"token":0}`, c.Lease.LeaseID), "LEASE_LOST"},
		{"renew, unknown run", "/v1/sessions/S-1/runs/r9/lease", fmt.Sprintf(`{"leaseId":%q,"token":1}`, c.Lease.LeaseID), "RUN_NOT_FOUND"},
		{"renew, no leaseId", "/v1/sessions/S-1/runs/r1/lease", `{"token":1}`, `field \"leaseId\" is missing`},
		{"release with a ttl", "/v1/sessions/S-1/runs/r1/lease/release", fmt.Sprintf(`{"leaseId":%q,"token":1,"leaseTtl":"1m"}`, c.Lease.LeaseID), "leaseTtl"},
	} {
		if resp := b.do(t, "POST", tc.path, "", tc.body); resp.status < 400 || !strings.Contains(resp.body, tc.says) {
			t.Errorf("%s: %d %s, want a refusal naming %s", tc.name, resp.status, resp.body, tc.says)
		}
	}
	if resp := b.do(t, "POST", "/v1/sessions/S-1/runs/r1/lease/release", "", fmt.Sprintf(`{"leaseId":%q,"token":1}`, c.Lease.LeaseID)); resp.status != 204 {
		t.Fatalf("release: %d %s", resp.status, resp.body)
	}
	if resp := b.doLease(t, "POST", path, c.Lease.Header, runEvent("S-1", "late")); resp.status != 409 || !strings.Contains(resp.body, "LEASE_LOST") {
		t.Errorf("append under a released lease: %d %s, want 409 LEASE_LOST", resp.status, resp.body)
	}
	if c2 := b.claim(t, `{}`, 200); c2.Run.RunID != "r1" || c2.Lease.Token != 2 || c2.Lease.LeaseID == c.Lease.LeaseID {
		t.Errorf("claim after the release = %+v, want r1 with token 2 and a new leaseId", c2)
	}
}

// TestClaimWaitsForAQueuedRun: a claim with a wait is answered when a run is queued, well
// before its wait ends, and 204 when none comes.
func TestClaimWaitsForAQueuedRun(t *testing.T) {
	b := setup(t, server.Options{})
	start := time.Now()
	b.claim(t, `{"wait":"100ms"}`, http.StatusNoContent)
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("an empty claim with wait 100ms answered after %s", d)
	}
	got := make(chan wire.Claim, 1)
	go func() { got <- b.claim(t, `{"wait":"20s","project":""}`, 200) }()
	time.Sleep(100 * time.Millisecond)
	queued := time.Now()
	b.queueRun(t, "S-1")
	select {
	case c := <-got:
		if c.Run.RunID != "r1" {
			t.Errorf("claim = %+v", c)
		}
		if d := time.Since(queued); d > 5*time.Second {
			t.Errorf("the waiting claim took %s after the run was queued", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the waiting claim did not wake")
	}
}

// statusEvent is a run status event of run runID of session sid (running: with startedAt).
func statusEvent(sid, k, runID, status string) string {
	extra := ""
	if status == "running" {
		extra = `,"startedAt":"2026-03-01T12:00:00Z"`
	}
	return fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":%q,"sessionId":%q,"sequence":0,"idempotencyKey":%q,"occurredAt":"2026-03-01T12:00:00Z","runId":%q,"sourceMessageId":"m1","eventType":"status","payload":{"status":%q%s}}`, k, sid, k, runID, status, extra)
}

// runs returns the session's run resources.
func (b *bundle) runs(t testing.TB, sid string) []api.RunResource {
	t.Helper()
	var out api.RunList
	if err := json.Unmarshal([]byte(b.do(t, "GET", "/v1/sessions/"+sid+"/runs", "", "").body), &out); err != nil {
		t.Fatal(err)
	}
	return out.Runs
}

// waitRuns waits until the session has n runs, the last one with status.
func (b *bundle) waitRuns(t testing.TB, sid string, n int, status string) []api.RunResource {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runs := b.runs(t, sid)
		if len(runs) == n && runs[n-1].Status == status {
			return runs
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs = %+v, want %d, the last %s", runs, n, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLeaseExpiry: a lease that is not renewed expires; the run is failed with a retryable
// LEASE_EXPIRED error naming the lease and, below the attempts limit, queued again as a new
// run with the next attempt; at the limit it stays failed.
func TestLeaseExpiry(t *testing.T) {
	b := setup(t, server.Options{}, session.Options{MaxAttempts: 2, LeaseExpiryInterval: 20 * time.Millisecond})
	b.queueRun(t, "S-1")
	c := b.claim(t, `{"leaseTtl":"1s"}`, 200)
	if resp := b.doLease(t, "POST", "/v1/sessions/S-1/events", c.Lease.Header, statusEvent("S-1", "run1", "r1", "running")); resp.status != 201 {
		t.Fatalf("running: %d %s", resp.status, resp.body)
	}
	start := time.Now()
	runs := b.waitRuns(t, "S-1", 2, contract.RunStatusQueued)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the expiry was handled %s after the claim; want within the TTL + 1s", d)
	}
	if runs[0].Status != contract.RunStatusFailed || runs[0].Lease != nil || runs[1].Attempt != 2 {
		t.Errorf("runs after the expiry = %+v, want r1 failed without a lease, then attempt 2 queued", runs)
	}
	page, err := b.cl.ReadEvents(context.Background(), "S-1", -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var errEv contract.Event
	for _, raw := range page.Events {
		var e contract.Event
		if json.Unmarshal(raw, &e) == nil && e.EventType == "error" {
			errEv = e
		}
	}
	p, ok := errEv.Payload.(*contract.ErrorPayload)
	if !ok || p.Code != session.LeaseExpired || !p.Retryable || !strings.Contains(p.Message, c.Lease.LeaseID) || !strings.Contains(p.Message, runs[1].RunID) {
		t.Errorf("error event = %+v, want a retryable LEASE_EXPIRED naming %s and the new run", errEv.Payload, c.Lease.LeaseID)
	}
	// The old holder is fenced off; the new attempt is claimed and expires for good.
	if resp := b.doLease(t, "POST", "/v1/sessions/S-1/events", c.Lease.Header, runEvent("S-1", "late")); resp.status != 409 || !strings.Contains(resp.body, "LEASE_LOST") {
		t.Errorf("the expired holder's append: %d %s, want 409 LEASE_LOST", resp.status, resp.body)
	}
	c2 := b.claim(t, `{"leaseTtl":"1s"}`, 200)
	if c2.Run.RunID != runs[1].RunID || c2.Attempt != 2 {
		t.Fatalf("second claim = %+v, want attempt 2 of %s", c2, runs[1].RunID)
	}
	runs = b.waitRuns(t, "S-1", 2, contract.RunStatusFailed)
	if runs[1].Lease != nil {
		t.Errorf("the failed attempt still shows a lease: %+v", runs[1])
	}
	// Both expiries are counted: two leases expired, two runs failed, one attempt queued.
	m := b.srv.Metrics()
	for deadline := time.Now().Add(5 * time.Second); metricValue(t, m, "sessiond_lease_expiries_total", "action", "failed") < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("sessiond_lease_expiries_total{action=failed} did not reach 2")
		}
	}
	if e, r := metricValue(t, m, "sessiond_lease_expiries_total", "action", "expired"), metricValue(t, m, "sessiond_lease_expiries_total", "action", "requeued"); e != 2 || r != 1 {
		t.Errorf("sessiond_lease_expiries_total: expired %v, requeued %v; want 2 and 1", e, r)
	}
}

// TestSweeperSparesALeasedRun: a run waiting for a person, whose worker renews its lease, is
// not failed by the stale sweeper however long the session is silent; without the lease it is.
func TestSweeperSparesALeasedRun(t *testing.T) {
	b := setup(t, server.Options{}, session.Options{StaleAfter: 50 * time.Millisecond, LeaseExpiryInterval: -1})
	b.queueRun(t, "S-1")
	c := b.claim(t, `{"leaseTtl":"1m"}`, 200)
	for i, st := range []string{"running", "waiting_approval"} {
		if resp := b.doLease(t, "POST", "/v1/sessions/S-1/events", c.Lease.Header, statusEvent("S-1", fmt.Sprint("s", i), "r1", st)); resp.status != 201 {
			t.Fatalf("%s: %d %s", st, resp.status, resp.body)
		}
	}
	time.Sleep(100 * time.Millisecond)
	b.do(t, "POST", "/v1/sweep", "", "")
	if runs := b.runs(t, "S-1"); runs[0].Status != contract.RunStatusWaitingApproval {
		t.Fatalf("after the sweep the leased run is %s, want waiting_approval", runs[0].Status)
	}
	if resp := b.do(t, "POST", "/v1/sessions/S-1/runs/r1/lease/release", "", fmt.Sprintf(`{"leaseId":%q,"token":1}`, c.Lease.LeaseID)); resp.status != 204 {
		t.Fatalf("release: %d %s", resp.status, resp.body)
	}
	time.Sleep(100 * time.Millisecond)
	b.do(t, "POST", "/v1/sweep", "", "")
	if runs := b.runs(t, "S-1"); runs[0].Status != contract.RunStatusFailed {
		t.Errorf("after the release and a sweep the run is %s, want failed (heartbeat lost)", runs[0].Status)
	}
}

// The hints of the workers' refusals and of the lease expirer's error event, followed.
func init() {
	hintCases = append(hintCases,
		hintCase{
			name: "lease required", hint: "header with the lease the claim answered (lease.header)", code: api.CodeLeaseRequired,
			provoke: func(t *testing.T, e *hintEnv) failure {
				e.queueRun(t, "S-h")
				e.claim(t, `{}`, 200)
				return e.call(t, "POST", "/v1/sessions/S-h/events", "", runEvent("S-h", "k1"))
			},
			follow: func(t *testing.T, e *hintEnv, _ failure) {
				lease := e.runs(t, "S-h")[0].Lease
				if resp := e.doLease(t, "POST", "/v1/sessions/S-h/events", lease.Header, runEvent("S-h", "k1")); resp.status != 201 {
					t.Fatalf("following the hint: %d %s", resp.status, resp.body)
				}
			},
		},
		hintCase{
			name: "lease lost", hint: "stop working on the run and claim again (POST /v1/runs/claim)", code: api.CodeLeaseLost,
			provoke: func(t *testing.T, e *hintEnv) failure {
				e.queueRun(t, "S-h")
				c := e.claim(t, `{}`, 200)
				e.ok(t, "POST", "/v1/sessions/S-h/runs/r1/lease/release", "", fmt.Sprintf(`{"leaseId":%q,"token":1}`, c.Lease.LeaseID))
				e.queueRun(t, "S-h2")
				resp := e.doLease(t, "POST", "/v1/sessions/S-h/events", c.Lease.Header, runEvent("S-h", "k1"))
				var body api.ErrorBody
				if err := json.Unmarshal([]byte(resp.body), &body); err != nil {
					t.Fatal(err)
				}
				return failure{resp.status, body.Error.Code, body.Error.Message}
			},
			follow: func(t *testing.T, e *hintEnv, _ failure) {
				if c := e.claim(t, `{}`, 200); c.Run.SessionID != "S-h" || c.Run.RunID != "r1" || c.Lease.Token != 2 {
					t.Fatalf("claim again = %+v", c)
				}
			},
		},
		hintCase{
			name: "lease expired", hint: "retry it with a retry command", code: session.LeaseExpired, sopt: session.Options{LeaseExpiryInterval: 20 * time.Millisecond},
			provoke: func(t *testing.T, e *hintEnv) failure {
				e.queueRun(t, "S-h")
				e.claim(t, `{"leaseTtl":"1s"}`, 200)
				e.waitRuns(t, "S-h", 1, contract.RunStatusFailed)
				page, err := e.cl.ReadEvents(context.Background(), "S-h", -1, 0)
				if err != nil {
					t.Fatal(err)
				}
				var last contract.Event
				json.Unmarshal(page.Events[len(page.Events)-1], &last)
				p, ok := last.Payload.(*contract.ErrorPayload)
				if !ok {
					t.Fatalf("the expirer appended no error event: %s", page.Events[len(page.Events)-1])
				}
				return failure{0, contract.ErrorCode(p.Code), p.Message + " " + last.EventID}
			},
			follow: func(t *testing.T, e *hintEnv, f failure) {
				id := f.message[strings.LastIndex(f.message, " ")+1:]
				e.wantAccepted(t, "S-h", "retry", "r1", "k1", e.lastSequence(t, "S-h"), `{"sourceEventId":"`+id+`"}`, "")
			},
		},
	)
}

// staleRunStore is a store whose Run reads the run, reports that it did, and answers only
// once release is closed: an instance that looked at a run just before another expired it.
type staleRunStore struct {
	store.Store
	read    chan struct{}
	release chan struct{}
}

func (s *staleRunStore) Run(ctx context.Context, sessionID, runID string) (contract.Run, error) {
	r, err := s.Store.Run(ctx, sessionID, runID)
	close(s.read)
	<-s.release
	return r, err
}

// TestRacingExpirersAgree: two instances (two services over one store, with clocks a minute
// apart) expire the same lease; the second read the run before the first expired it. Both
// append the same events, so the second's is a duplicate: neither fails, the run is failed
// once and one new attempt is queued.
func TestRacingExpirersAgree(t *testing.T) {
	b := setup(t, server.Options{}, session.Options{LeaseExpiryInterval: -1})
	b.queueRun(t, "S-1")
	c := b.claim(t, `{"leaseTtl":"1s"}`, 200)
	if resp := b.doLease(t, "POST", "/v1/sessions/S-1/events", c.Lease.Header, statusEvent("S-1", "run1", "r1", "running")); resp.status != 201 {
		t.Fatalf("running: %d %s", resp.status, resp.body)
	}
	opt := session.LeaseExpiryOptions{MaxAttempts: 2}
	slow := &staleRunStore{Store: b.st, read: make(chan struct{}), release: make(chan struct{})}
	second := session.New(slow, session.Options{Clock: session.ClockFunc(func() time.Time { return time.Now().Add(2 * time.Minute) })})
	var secondErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, secondErr = second.ExpireLeases(context.Background(), opt)
	}()
	<-slow.read
	first := session.New(b.st, session.Options{Clock: session.ClockFunc(func() time.Time { return time.Now().Add(time.Minute) })})
	if _, err := first.ExpireLeases(context.Background(), opt); err != nil {
		t.Errorf("first expirer: %v", err)
	}
	close(slow.release)
	<-done
	if secondErr != nil {
		t.Errorf("second expirer: %v", secondErr)
	}
	runs := b.waitRuns(t, "S-1", 2, contract.RunStatusQueued)
	if runs[0].Status != contract.RunStatusFailed || runs[1].Attempt != 2 {
		t.Errorf("runs = %+v, want r1 failed and one attempt 2 queued", runs)
	}
	page, err := b.cl.ReadEvents(context.Background(), "S-1", -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	errors := 0
	for _, raw := range page.Events {
		var e contract.Event
		if json.Unmarshal(raw, &e) == nil && e.EventType == "error" {
			errors++
		}
	}
	if errors != 1 {
		t.Errorf("%d LEASE_EXPIRED error events, want 1", errors)
	}
}
