package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/sessiond/sessiond/wire"
	"math/rand"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
)

// naiveFold is the reference for the parts of the fold that grow per event: it concatenates
// with += and searches slices linearly, the obvious (quadratic) way. The fold must give the
// same result.
type naiveFold struct {
	terminals []wire.Terminal
	reasoning []wire.Reasoning
	approvals []contract.ApprovalPayload
}

func (n *naiveFold) terminal(id, stream, chunk string, exit *int64) {
	i := 0
	for i < len(n.terminals) && n.terminals[i].TerminalID != id {
		i++
	}
	if i == len(n.terminals) {
		n.terminals = append(n.terminals, wire.Terminal{TerminalID: id})
	}
	if stream != "status" {
		n.terminals[i].Output += chunk
	}
	if exit != nil {
		n.terminals[i].ExitCode = exit
	}
}

func (n *naiveFold) reason(id, text, status string) {
	i := 0
	for i < len(n.reasoning) && n.reasoning[i].ReasoningID != id {
		i++
	}
	if i == len(n.reasoning) {
		n.reasoning = append(n.reasoning, wire.Reasoning{ReasoningID: id})
	}
	n.reasoning[i].Text += text
	n.reasoning[i].Status = status
}

func (n *naiveFold) approve(id, status string) {
	i := 0
	for i < len(n.approvals) && n.approvals[i].ApprovalID != id {
		i++
	}
	a := contract.ApprovalPayload{ApprovalID: id, Status: status, Title: "t " + id}
	if i == len(n.approvals) {
		n.approvals = append(n.approvals, a)
	} else {
		n.approvals[i] = a
	}
}

// want returns the naive transcript's parts, approvals ordered pending first by a sort.
func (n *naiveFold) want() ([]wire.Terminal, []wire.Reasoning, []contract.ApprovalPayload) {
	var pending, done []contract.ApprovalPayload
	for _, a := range n.approvals {
		if a.Status == "requested" {
			pending = append(pending, a)
		} else {
			done = append(done, a)
		}
	}
	return n.terminals, n.reasoning, append(pending, done...)
}

// chunks are terminal and reasoning texts with the characters JSON escapes and multi-byte
// UTF-8, so that concatenation is checked on more than ASCII.
var chunks = []string{"", "a", "line\n", "tab\there", `quote " and \ backslash`, "é", "日本語\n", "emoji 😀", "\u0001ctl", "<html>&amp;</html>"}

// storedEvent encodes one event of session S at seq as the store would return it.
func storedEvent(t *testing.T, seq int64, eventType, payload string) store.StoredEvent {
	t.Helper()
	raw := fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"e%d","sessionId":"S","sequence":%d,"idempotencyKey":"k%d","occurredAt":"2026-03-01T12:00:00Z","eventType":%q,"runId":"r1","payload":%s}`,
		seq, seq, seq, eventType, payload)
	if _, err := contract.CheckEvent([]byte(raw), contract.Limits{}); err != nil {
		t.Fatalf("test event %s: %v", raw, err)
	}
	return store.StoredEvent{Sequence: seq, EventID: fmt.Sprint("e", seq), IdempotencyKey: fmt.Sprint("k", seq), EventType: eventType, RunID: "r1", Data: []byte(raw)}
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestFoldOfManyChunksEqualsNaive folds thousands of random terminal chunks, reasoning texts
// and approvals and checks the transcript equals the naive fold's, at every checkpoint; a
// transcript taken earlier must not change when the fold goes on.
func TestFoldOfManyChunksEqualsNaive(t *testing.T) {
	cases := []struct {
		name      string
		seed      int64
		events    int
		terminals int
	}{
		{"one terminal", 1, 3000, 1},
		{"three terminals", 2, 3000, 3},
		{"many terminals", 3, 2000, 40},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(c.seed))
			f := session.NewFold("S")
			var ref naiveFold
			type checkpoint struct {
				got       wire.Transcript
				terms     []wire.Terminal
				reasons   []wire.Reasoning
				approvals []contract.ApprovalPayload
			}
			var saved []checkpoint
			for seq := int64(0); seq < int64(c.events); seq++ {
				var se store.StoredEvent
				switch k := rng.Intn(10); {
				case k < 7:
					id := fmt.Sprint("term", rng.Intn(c.terminals))
					stream := []string{"stdout", "stderr", "status"}[rng.Intn(3)]
					chunk := chunks[rng.Intn(len(chunks))]
					if stream == "status" {
						chunk = ""
					}
					var exit *int64
					exitJSON := ""
					if stream == "status" && rng.Intn(2) == 0 {
						code := int64(rng.Intn(3))
						exit, exitJSON = &code, fmt.Sprintf(`,"exitCode":%d`, code)
					}
					se = storedEvent(t, seq, "terminal", fmt.Sprintf(`{"terminalId":%q,"stream":%q,"chunk":%s%s}`, id, stream, jsonString(chunk), exitJSON))
					ref.terminal(id, stream, chunk, exit)
				case k < 9:
					id := fmt.Sprint("th", rng.Intn(3))
					text := chunks[rng.Intn(len(chunks))]
					status := []string{"streaming", "completed"}[rng.Intn(2)]
					se = storedEvent(t, seq, "reasoning", fmt.Sprintf(`{"reasoningId":%q,"text":%s,"status":%q}`, id, jsonString(text), status))
					ref.reason(id, text, status)
				default:
					id := fmt.Sprint("ap", rng.Intn(20))
					status := []string{"requested", "approved", "rejected"}[rng.Intn(3)]
					se = storedEvent(t, seq, "approval", fmt.Sprintf(`{"approvalId":%q,"status":%q,"title":"t %s"}`, id, status, id))
					ref.approve(id, status)
				}
				if err := f.Apply(se); err != nil {
					t.Fatal(err)
				}
				if seq%500 == 499 || seq == int64(c.events)-1 {
					terms, reasons, approvals := ref.want()
					cp := checkpoint{got: f.Transcript(), terms: clone(terms), reasons: clone(reasons), approvals: clone(approvals)}
					saved = append(saved, cp)
				}
			}
			for i, cp := range saved {
				if diff := cmp.Diff(cp.terms, cp.got.Terminals); diff != "" {
					t.Errorf("checkpoint %d: terminals differ from the naive fold (-naive +fold):\n%s", i, diff)
				}
				if diff := cmp.Diff(cp.reasons, cp.got.Reasoning); diff != "" {
					t.Errorf("checkpoint %d: reasoning differs from the naive fold (-naive +fold):\n%s", i, diff)
				}
				if diff := cmp.Diff(cp.approvals, cp.got.Approvals); diff != "" {
					t.Errorf("checkpoint %d: approvals differ from the naive fold (-naive +fold):\n%s", i, diff)
				}
			}
		})
	}
}

// clone copies a slice (the naive fold's later events must not change a checkpoint).
func clone[T any](s []T) []T { return append([]T(nil), s...) }

// TestTranscriptBytesOfTheStory pins the JSON of the story's transcript, so a change to how
// the fold keeps its state cannot change what clients receive.
func TestTranscriptBytesOfTheStory(t *testing.T) {
	b := setup(t)
	b.append(t, b.story(t)...)
	tr, err := b.svc.Rebuild(t.Context(), b.sid)
	if err != nil {
		t.Fatal(err)
	}
	got, err := contract.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(storyTranscript)
	if string(got) != want {
		t.Errorf("transcript of the story:\n got %s\nwant %s", got, want)
	}
}

// storyTranscript is the transcript of the story as the fold gave it before it kept growing
// text in builders (the bytes clients received then).
const storyTranscript = `{"sessionId":"S-t","lastSequence":29,"messages":[{"messageId":"u1","role":"user","parts":["fix the build"],"sequence":0},{"messageId":"a1","role":"assistant","parts":["Fixed."],"status":"completed","runId":"r1","sequence":25}],"reasoning":[{"reasoningId":"th1","text":"The build fails.","status":"completed"}],"plan":{"planId":"p1","status":"running","steps":[{"id":"s1","title":"read","status":"completed"},{"id":"s2","title":"fix","status":"running"}]},"tasks":[{"taskId":"t1","title":"read logs","status":"running"}],"tools":[{"toolCallId":"tc1","toolName":"shell","status":"failed","input":{"cmd":"make"},"error":"exit 2","startedAt":"2026-03-01T12:00:02Z"}],"artifacts":[{"artifactId":"art1","name":"log.txt","kind":"file","status":"ready","url":"https://example.com/log.txt"}],"testResults":[{"testId":"tt1","name":"TestX","status":"passed","durationMs":12.5}],"summaries":[{"summaryId":"sum1","runId":"r1","text":"fixed","highlights":["Makefile"],"pendingItems":[],"status":"completed"}],"approvals":[{"approvalId":"ap0","status":"requested","title":"old"},{"approvalId":"ap1","toolCallId":"tc2","status":"approved","title":"edit Makefile?"}],"diffs":[{"path":"Makefile","status":"modified","patch":"-a\n+c"}],"workspaceFiles":null,"terminals":[{"terminalId":"term1","output":"building...\nerror: x\n","exitCode":2}],"usage":{"latest":{"totalTokens":7},"total":{"inputTokens":150,"outputTokens":25,"totalTokens":182},"byRun":{"r1":{"inputTokens":150,"outputTokens":25,"totalTokens":175}}},"errors":[{"code":"WARN","message":"flaky","retryable":true}],"steers":null,"resumable":true}`

// TestRebuildAcrossPages folds a log of several read pages (the catch-up reads 10,000 events
// at a time, the next page while the fold applies the current one) and checks the terminal's
// output is every chunk, in order, once.
func TestRebuildAcrossPages(t *testing.T) {
	const n = 25_000
	b := setup(t)
	var want strings.Builder
	for done := 0; done < n; {
		batch := make([]*contract.EncodedEvent, 0, 1000)
		for ; len(batch) < 1000 && done < n; done++ {
			chunk := fmt.Sprintf("chunk %d\n", done)
			want.WriteString(chunk)
			batch = append(batch, b.event(t, "terminal", "", fmt.Sprintf(`{"terminalId":"t","stream":"stdout","chunk":%q}`, chunk)))
		}
		b.append(t, batch...)
	}
	rebuilt, err := b.svc.Rebuild(t.Context(), b.sid)
	if err != nil {
		t.Fatal(err)
	}
	if rebuilt.LastSequence != n-1 || len(rebuilt.Terminals) != 1 || rebuilt.Terminals[0].Output != want.String() {
		t.Fatalf("rebuilt through %d, %d terminals, output of %d bytes (want %d)", rebuilt.LastSequence, len(rebuilt.Terminals), len(rebuilt.Terminals[0].Output), want.Len())
	}
	live, err := b.svc.Transcript(t.Context(), b.sid)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rebuilt, live); diff != "" {
		t.Errorf("live projection differs from rebuild (-rebuilt +live):\n%s", diff)
	}
}

// TestTranscriptWorkspaceFiles: workspace files are kept by path, each in its latest state
// (a delete replaces the upsert), in order of first appearance.
func TestTranscriptWorkspaceFiles(t *testing.T) {
	b := setup(t)
	b.append(t,
		b.event(t, "workspace-file", "", `{"path":"parser.go","operation":"upsert","mimeType":"text/x-go","size":120}`),
		b.event(t, "workspace-file", "", `{"path":"out.png","operation":"upsert","mimeType":"image/png","size":2048}`),
		b.event(t, "workspace-file", "", `{"path":"parser.go","operation":"delete"}`),
	)
	tr, err := b.svc.Transcript(context.Background(), b.sid)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(tr.WorkspaceFiles)
	want := `[{"path":"parser.go","operation":"delete"},{"path":"out.png","operation":"upsert","mimeType":"image/png","size":2048}]`
	if string(got) != want {
		t.Errorf("workspace files:\n got %s\nwant %s", got, want)
	}
}
