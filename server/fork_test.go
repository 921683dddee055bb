package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/sessiond/sessiond/wire"
	"strings"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
)

const inheritAll = `{"messages":"through-source-message","attachments":"inherit","summaries":"inherit","toolResults":"inherit","codeChanges":"inherit"}`
const excludeAll = `{"messages":"exclude","attachments":"exclude","summaries":"exclude","toolResults":"exclude","codeChanges":"exclude"}`

// forkSource builds a source thread with two runs and every kind of inheritable resource.
func forkSource(t *testing.T, b *bundle, sid string) *runtimeSim {
	r := b.runtime(t, sid, allCaps)
	r.message("u1", "user", "fix the build")
	r.status("r1", "u1", "running")
	r.emit("message", `"runId":"r1"`, `{"messageId":"a1","role":"assistant","operation":"append","parts":["Fix"],"status":"streaming"}`)
	r.emit("tool", `"runId":"r1"`, `{"toolCallId":"tc1","toolName":"shell","status":"completed","output":"ok"}`)
	r.emit("diff", `"runId":"r1"`, `{"path":"Makefile","status":"modified","patch":"+x"}`)
	r.emit("artifact", `"runId":"r1"`, `{"artifactId":"art1","name":"log","kind":"file","status":"ready","url":"https://example.com/log"}`)
	r.emit("artifact", `"runId":"r1"`, `{"artifactId":"art2","name":"img","kind":"image","status":"pending"}`)
	r.emit("summary", `"runId":"r1"`, `{"summaryId":"s1","runId":"r1","text":"fixed the Makefile","highlights":[],"pendingItems":[],"status":"completed"}`)
	r.emit("message", `"runId":"r1"`, `{"messageId":"a1","role":"assistant","operation":"append","parts":["ed."],"status":"completed"}`)
	r.status("r1", "u1", "completed")
	r.message("u2", "user", "now the tests")
	r.status("r2", "u2", "running")
	r.emit("message", `"runId":"r2"`, `{"messageId":"a2","role":"assistant","operation":"append","parts":["On it"]}`)
	r.emit("tool", `"runId":"r2"`, `{"toolCallId":"tc2","toolName":"go","status":"running"}`)
	return r
}

func forkPayload(thread, msg, run, inheritance string) string {
	return fmt.Sprintf(`{"sourceThreadId":%q,"sourceMessageId":%q,"sourceRunId":%q,"inheritance":%s}`, thread, msg, run, inheritance)
}

func (b *bundle) readAll(t *testing.T, sid string) []contract.Event {
	t.Helper()
	page, err := b.cl.ReadEvents(context.Background(), sid, -1, 10000)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]contract.Event, len(page.Events))
	for i, raw := range page.Events {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestForkInheritsThroughTheSourceMessage(t *testing.T) {
	b := setup(t, server.Options{})
	r := forkSource(t, b, "S-src")
	before := r.last()
	status, res := b.command(t, "S-src", "fork", "", "fork-1", before, forkPayload("S-src", "a1", "r1", inheritAll), "")
	if status != 200 || res.Outcome != "accepted" || res.Operation == nil || res.RunID != "r1" {
		t.Fatalf("fork: %d %+v", status, res)
	}
	op := res.Operation
	want := contract.Lineage{ForkedFromThreadID: "S-src", ForkedFromMessageID: "a1", SourceRunID: "r1"}
	if op.Lineage != want || op.ActiveBranch.SourceMessageID != "a1" || op.ActiveBranch.ThreadID == "S-src" {
		t.Fatalf("operation %+v", op)
	}
	if r.last() != before {
		t.Errorf("the source thread changed: last sequence %d, was %d", r.last(), before)
	}
	thread := op.ActiveBranch.ThreadID
	s, err := b.cl.GetSession(context.Background(), thread)
	if err != nil || s.Lineage == nil || *s.Lineage != want || s.ActiveBranch == nil || s.ActiveBranch.BranchID != op.ActiveBranch.BranchID {
		t.Fatalf("new thread %+v %v", s, err)
	}
	evs := b.readAll(t, thread)
	var got []string
	for _, e := range evs {
		switch p := e.Payload.(type) {
		case *contract.MessagePayload:
			parts, _ := json.Marshal(p.Parts)
			got = append(got, fmt.Sprintf("message %s %s", p.MessageID, parts))
		case *contract.ToolPayload:
			got = append(got, "tool "+p.ToolCallID)
		case *contract.DiffPayload:
			got = append(got, "diff "+p.Path)
		case *contract.ArtifactPayload:
			got = append(got, "artifact "+p.ArtifactID)
		default:
			got = append(got, e.EventType)
		}
	}
	// Messages through a1 (its parts as of the fork point, both chunks), the finished tool
	// call, the diff and the ready artifact; not u2, a2 or the running tc2.
	wantEvents := `[message u1 ["fix the build"] message a1 ["Fix","ed."] tool tc1 diff Makefile artifact art1]`
	if fmt.Sprint(got) != wantEvents {
		t.Errorf("new thread's events:\n got %v\nwant %s", got, wantEvents)
	}
	if len(res.ResultEventIDs) != len(evs) || *res.AcceptedSequence != int64(len(evs)-1) {
		t.Errorf("result lists %v at %d, thread has %d events", res.ResultEventIDs, *res.AcceptedSequence, len(evs))
	}

	// The same command again: the same thread, as a duplicate.
	_, dup := b.command(t, "S-src", "fork", "", "fork-1", before, forkPayload("S-src", "a1", "r1", inheritAll), "")
	if dup.Outcome != "duplicate" || dup.Operation.ActiveBranch.ThreadID != thread {
		t.Errorf("repeated fork: %+v", dup)
	}

	// Branches share nothing mutable.
	b.appendN(t, thread, 100, 2)
	if r.last() != before {
		t.Error("appending to the fork changed its source")
	}
	n := len(b.readAll(t, thread))
	r.message("u3", "user", "more")
	if len(b.readAll(t, thread)) != n {
		t.Error("appending to the source changed the fork")
	}
}

func TestForkWithEverythingExcluded(t *testing.T) {
	b := setup(t, server.Options{})
	r := forkSource(t, b, "S-src")
	// a2 is in the middle of the running run r2: forking from there is allowed.
	status, res := b.command(t, "S-src", "fork", "", "fork-x", r.last(), forkPayload("S-src", "a2", "r2", excludeAll), "")
	if status != 200 || res.Outcome != "accepted" {
		t.Fatalf("fork: %d %+v", status, res)
	}
	thread := res.Operation.ActiveBranch.ThreadID
	if evs := b.readAll(t, thread); len(evs) != 0 {
		t.Errorf("excluding everything still inherited %d events", len(evs))
	}
	// A continuation reports what was left behind.
	resp := b.do(t, "POST", "/v1/sessions/S-src/continuations", "", `{"idempotencyKey":"cont-x","sourceMessageId":"a2","sourceRunId":"r2","inheritance":`+excludeAll+`}`)
	var cr contract.ContinuationResult
	json.Unmarshal([]byte(resp.body), &cr)
	var kinds []string
	for _, u := range cr.UnavailableResources {
		kinds = append(kinds, u.Kind+"/"+u.Reason+"/"+u.MessageID)
	}
	// tc2 came after a2, past the fork point: it is not part of the source as of the fork.
	want := "[tool-result/excluded/u1 code-change/excluded/u1 attachment/excluded/u1 attachment/excluded/u1]"
	if resp.status != 201 || fmt.Sprint(kinds) != want {
		t.Errorf("continuation: %d %s\n got %v\nwant %s", resp.status, resp.body, kinds, want)
	}
	if err := contract.Validate(contract.KindContinuationResult, []byte(resp.body), contract.Limits{}); err != nil {
		t.Errorf("continuation result breaks the contract: %v", err)
	}
	// Idempotent by key.
	resp2 := b.do(t, "POST", "/v1/sessions/S-src/continuations", "", `{"idempotencyKey":"cont-x","sourceMessageId":"a2","sourceRunId":"r2","inheritance":`+excludeAll+`}`)
	var cr2 contract.ContinuationResult
	json.Unmarshal([]byte(resp2.body), &cr2)
	if resp2.status != 200 || !cr2.Duplicate || cr2.ThreadID != cr.ThreadID {
		t.Errorf("repeated continuation: %d %s", resp2.status, resp2.body)
	}
}

func TestForkSourceErrors(t *testing.T) {
	b := setup(t, server.Options{})
	r := forkSource(t, b, "S-src")
	for _, tc := range []struct {
		payload string
		code    contract.ErrorCode
		status  int
	}{
		{forkPayload("S-nope", "a1", "r1", inheritAll), "SOURCE_THREAD_NOT_FOUND", 404},
		{forkPayload("S-src", "nope", "r1", inheritAll), "SOURCE_MESSAGE_NOT_FOUND", 404},
		{forkPayload("S-src", "a1", "nope", inheritAll), "SOURCE_RUN_NOT_FOUND", 404},
		{forkPayload("S-src", "u2", "r1", inheritAll), "SOURCE_LINEAGE_INVALID", 422},
	} {
		t.Run(string(tc.code), func(t *testing.T) {
			status, res := b.command(t, "S-src", "fork", "", "k-"+string(tc.code), r.last(), tc.payload, "")
			wantRejected(t, status, res, tc.code, tc.status)
		})
	}
	status, res := b.command(t, "S-src", "fork", "", "k-seq", r.last()-1, forkPayload("S-src", "a1", "r1", inheritAll), "")
	wantRejected(t, status, res, "SEQUENCE_CONFLICT", 409)
	r2 := b.runtime(t, "S-nofork", `{}`)
	status, res = b.command(t, "S-nofork", "fork", "", "k", r2.last(), forkPayload("S-src", "a1", "r1", inheritAll), "")
	wantRejected(t, status, res, "CAPABILITY_UNAVAILABLE", 422)
	for _, code := range []contract.ErrorCode{"SOURCE_MESSAGE_NOT_FOUND", "SOURCE_RUN_NOT_FOUND"} {
		msg, run := "nope", "r1"
		if code == "SOURCE_RUN_NOT_FOUND" {
			msg, run = "a1", "nope"
		}
		resp := b.do(t, "POST", "/v1/sessions/S-src/continuations", "", fmt.Sprintf(`{"idempotencyKey":"c","sourceMessageId":%q,"sourceRunId":%q,"inheritance":%s}`, msg, run, inheritAll))
		if resp.status != 404 || errorBody(t, resp.body).Code != code {
			t.Errorf("continuation %s: %d %s", code, resp.status, resp.body)
		}
	}
}

func TestForkKeepsTheNewest24Messages(t *testing.T) {
	b := setup(t, server.Options{})
	r := b.runtime(t, "S-long", allCaps)
	for i := 0; i < 30; i++ {
		r.message(fmt.Sprintf("m%02d", i), "user", fmt.Sprint("message ", i))
	}
	r.status("r1", "m29", "running")
	_, res := b.command(t, "S-long", "fork", "", "k", r.last(), forkPayload("S-long", "m29", "r1", inheritAll), "")
	evs := b.readAll(t, res.Operation.ActiveBranch.ThreadID)
	if len(evs) != 24 {
		t.Fatalf("inherited %d messages, want 24", len(evs))
	}
	first := evs[0].Payload.(*contract.MessagePayload).MessageID
	last := evs[23].Payload.(*contract.MessagePayload).MessageID
	if first != "m06" || last != "m29" {
		t.Errorf("inherited %s..%s, want m06..m29 (the newest 24)", first, last)
	}
}

func TestEditAndRerun(t *testing.T) {
	b := setup(t, server.Options{})
	r := forkSource(t, b, "S-src")
	status, res := b.command(t, "S-src", "edit-and-rerun", "", "k", r.last(),
		`{"sourceThreadId":"S-src","sourceMessageId":"u1","sourceRunId":"r1","replacementParts":["fix the build, carefully"],"inheritance":`+inheritAll+`}`, "")
	// The session's current run (r2) is still running: edit-and-rerun needs a finished one.
	wantRejected(t, status, res, "INVALID_SESSION_STATE", 409)
	r.status("r2", "u2", "completed")
	status, res = b.command(t, "S-src", "edit-and-rerun", "", "k", r.last(),
		`{"sourceThreadId":"S-src","sourceMessageId":"u1","sourceRunId":"r1","replacementParts":["fix the build, carefully"],"inheritance":`+inheritAll+`}`, "")
	if status != 200 || res.Outcome != "accepted" || res.RunID == "r1" || res.RunID != res.Operation.ActiveBranch.RunID {
		t.Fatalf("edit-and-rerun: %d %+v", status, res)
	}
	thread := res.Operation.ActiveBranch.ThreadID
	evs := b.readAll(t, thread)
	if len(evs) != 2 {
		t.Fatalf("new thread has %d events, want the edited message and the queued run", len(evs))
	}
	if parts, _ := json.Marshal(evs[0].Payload.(*contract.MessagePayload).Parts); string(parts) != `["fix the build, carefully"]` {
		t.Errorf("edited message parts %s", parts)
	}
	runs, _ := b.cl.Runs(context.Background(), thread)
	if len(runs) != 1 || runs[0].RunID != res.RunID || runs[0].Status != "queued" || runs[0].SourceMessageID != "u1" {
		t.Errorf("new thread's runs: %+v", runs)
	}
}

func TestLineageOfForksOfForks(t *testing.T) {
	b := setup(t, server.Options{})
	r := forkSource(t, b, "S-root")
	chain := []string{"S-root"}
	src, msg, run := r, "a1", "r1"
	for i := 0; i < 3; i++ {
		_, res := b.command(t, chain[len(chain)-1], "fork", "", fmt.Sprint("k", i), src.last(), forkPayload(chain[len(chain)-1], msg, run, inheritAll), "")
		if res.Outcome != "accepted" {
			t.Fatalf("fork %d: %+v %+v", i, res, res.Error)
		}
		thread := res.Operation.ActiveBranch.ThreadID
		chain = append(chain, thread)
		// Work happens in the fork, so it can be forked in turn.
		src = &runtimeSim{t: t, b: b, sid: thread, n: 100}
		src.message(fmt.Sprint("q", i), "user", "again")
		src.status(fmt.Sprint("run", i), fmt.Sprint("q", i), "running")
		msg, run = fmt.Sprint("q", i), fmt.Sprint("run", i)
	}
	resp := b.do(t, "GET", "/v1/sessions/"+chain[3]+"/lineage", "", "")
	var l wire.Lineage
	if err := json.Unmarshal([]byte(resp.body), &l); err != nil || resp.status != 200 {
		t.Fatalf("lineage: %d %s", resp.status, resp.body)
	}
	var ancestors []string
	for _, a := range l.Ancestors {
		ancestors = append(ancestors, a.SessionID)
	}
	if fmt.Sprint(ancestors) != fmt.Sprint([]string{chain[2], chain[1], chain[0]}) || l.Lineage.ForkedFromMessageID != "q1" {
		t.Errorf("ancestors %v, lineage %+v", ancestors, l.Lineage)
	}
	resp = b.do(t, "GET", "/v1/sessions/S-root/lineage", "", "")
	json.Unmarshal([]byte(resp.body), &l)
	depth, node := 0, l.Descendants
	for len(node) == 1 {
		depth++
		if node[0].SessionID != chain[depth] {
			t.Errorf("descendant at depth %d is %s, want %s", depth, node[0].SessionID, chain[depth])
		}
		node = node[0].Children
	}
	if depth != 3 || len(l.Ancestors) != 0 {
		t.Errorf("root's tree depth %d, ancestors %v: %s", depth, l.Ancestors, resp.body)
	}
	if resp := b.do(t, "GET", "/v1/sessions/S-none/lineage", "", ""); resp.status != 404 {
		t.Errorf("lineage of unknown session: %d", resp.status)
	}
	var s api.Session
	json.Unmarshal([]byte(b.do(t, "GET", "/v1/sessions/"+chain[1], "", "").body), &s)
	if s.Lineage == nil || s.ActiveBranch == nil || !strings.HasPrefix(s.ActiveBranch.BranchID, "B-") {
		t.Errorf("session resource lacks lineage or branch: %+v", s)
	}
}

// TestConcurrentContinuationsOneThread: the same continuation sent 8 times at once creates one
// thread; every answer names it, one as new and the others as duplicates.
func TestConcurrentContinuationsOneThread(t *testing.T) {
	b := setup(t, server.Options{})
	forkSource(t, b, "S-src")
	body := `{"idempotencyKey":"cont-race","sourceMessageId":"a1","sourceRunId":"r1","inheritance":` + inheritAll + `}`
	var wg sync.WaitGroup
	results := make([]response, 8)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i] = b.do(t, "POST", "/v1/sessions/S-src/continuations", "", body)
		}(i)
	}
	wg.Wait()
	created, threads := 0, map[string]bool{}
	for _, r := range results {
		var cr contract.ContinuationResult
		if err := json.Unmarshal([]byte(r.body), &cr); err != nil || r.status >= 300 {
			t.Fatalf("continuation: %d %s", r.status, r.body)
		}
		threads[cr.ThreadID] = true
		if !cr.Duplicate {
			created++
		}
	}
	if created != 1 || len(threads) != 1 {
		t.Errorf("%d created, %d threads; want one thread created once", created, len(threads))
	}
}
