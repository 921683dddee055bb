package failover

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/internal/benchkit"
	"github.com/sessiond/sessiond/internal/testenv"
)

var (
	flagSwitches    = flag.Int("failover.switches", 2, "database switches to run (kill and freeze alternate, a kill first); make failover sets it")
	flagMaxRecovery = flag.Duration("failover.max-recovery", 5*time.Second, "the longest allowed time from a promotion to the first accepted write")
)

// TestFailover runs two sessiond instances on a PostgreSQL primary with a synchronous standby
// (docs/deploy.md's recipe, PostgreSQL's own programs, loopback ports, temporary directories)
// while writers append events with idempotency keys through both instances, SSE streams
// follow every written session through the Go client, a `sessiond tail` process follows one,
// and a change-feed follower reads /v1/events/stream; sessions are created meanwhile. Each
// switch stops the primary (SIGKILL, or SIGSTOP: a hung host), promotes the standby, rebuilds
// the old primary as the new standby (pg_basebackup -R) and makes it synchronous again; the
// next switch goes back. At the end: no acknowledged event lost, no gap, no duplicate, every
// stream, the tail and the feed exact, no answer INTERNAL, and each time from the promotion to
// the first accepted write within -failover.max-recovery.
func TestFailover(t *testing.T) {
	env := needPostgres(t)
	bin := buildSessiond(t)
	c := newCluster(t, env)
	a, b := c.nodes[0], c.nodes[1]
	c.initPrimary(a)
	c.start(a)
	if err := c.exec(a, "CREATE DATABASE failover"); err != nil {
		t.Fatal(err)
	}
	c.recipeRun(recipeRole, primaryVars(a)...)
	c.addStandby(a, b)

	storeURL := fmt.Sprintf("postgres://postgres@%s,%s/failover?sslmode=disable&target_session_attrs=read-write", a.host(), b.host())
	var urls []string
	var logs []*testenv.SyncBuffer
	for i := range 2 {
		u, log := testenv.Serve(t, bin, "--store", storeURL, "--data", filepath.Join(t.TempDir(), "data"+strconv.Itoa(i)))
		urls, logs = append(urls, u), append(logs, log)
	}
	defer func() {
		if t.Failed() {
			for i, l := range logs {
				s := l.String()
				if len(s) > 6000 {
					s = s[len(s)-6000:]
				}
				t.Logf("instance %d's log (end):\n%s", i, s)
			}
		}
	}()

	// With a synchronous standby, an acknowledgement survives the primary's loss: no warning.
	for i, l := range logs {
		if strings.Contains(l.String(), "acknowledged event") && strings.Contains(l.String(), "level=WARN") {
			t.Errorf("instance %d warns about its acknowledgements with a synchronous standby:\n%s", i, l.String())
		}
	}

	w := newWorkload(t, bin, urls)
	w.start()
	primary, standby := a, b
	var recs []switchRecord
	for i := 0; i < *flagSwitches; i++ {
		time.Sleep(time.Second) // writes on a healthy pair
		rec := c.switchOver(w, primary, standby, i%2 == 1)
		t.Logf("switch %d: %s", i+1, rec)
		recs = append(recs, rec)
		primary, standby = standby, primary
	}
	time.Sleep(time.Second)
	w.stop()
	w.check()
	report(t, recs)
}

// buildSessiond builds cmd/sessiond from this checkout.
func buildSessiond(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sessiond")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/sessiond/sessiond/cmd/sessiond").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/sessiond: %v\n%s", err, out)
	}
	return bin
}

func primaryVars(p *node) []string {
	return []string{"PRIMARY_HOST=127.0.0.1", "PRIMARY_PORT=" + strconv.Itoa(p.port)}
}

// addStandby makes s a synchronous standby of p: its data directory a copy of p's
// (pg_basebackup -R), started, and named in p's synchronous_standby_names, until p reports it
// streaming and sync.
func (c *cluster) addStandby(p, s *node) {
	c.t.Helper()
	if err := os.RemoveAll(s.data); err != nil {
		c.t.Fatal(err)
	}
	c.recipeRun(recipeBackup, append(primaryVars(p), "STANDBY_DATA="+s.data)...)
	c.start(s)
	c.recipeRun(recipeSyncOn, primaryVars(p)...)
	deadline := time.Now().Add(time.Minute)
	for {
		out := c.recipeRun(recipeCheck, primaryVars(p)...)
		if strings.Contains(out, recipeCheckWant) {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the standby %s is not synchronous a minute after it started: %q\n%s", s.name, out, c.logTail(s))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// switchRecord is what one switch measured.
type switchRecord struct {
	freeze   bool
	promote  time.Duration // pg_ctl promote -w
	recovery time.Duration // from the promotion (pg_ctl promote returned) to the first accepted write
	outage   time.Duration // from the fault to the first accepted write
}

func (r switchRecord) kind() string {
	if r.freeze {
		return "SIGSTOP"
	}
	return "SIGKILL"
}

func (r switchRecord) String() string {
	return fmt.Sprintf("%s: promoted in %v, first accepted write %v after the promotion (%v after the fault)",
		r.kind(), r.promote.Round(time.Millisecond), r.recovery.Round(time.Millisecond), r.outage.Round(time.Millisecond))
}

// switchOver stops the primary p (SIGSTOP with freeze, else SIGKILL), promotes the standby s,
// waits for the first accepted write, and rebuilds p as s's synchronous standby.
func (c *cluster) switchOver(w *workload, p, s *node, freeze bool) switchRecord {
	c.t.Helper()
	rec := switchRecord{freeze: freeze}
	fault := time.Now()
	if freeze {
		c.kill(p, syscall.SIGSTOP)
	} else {
		c.kill(p, syscall.SIGKILL)
	}
	start := time.Now()
	c.recipeRun(recipePromote, "STANDBY_DATA="+s.data)
	promoted := time.Now()
	rec.promote = promoted.Sub(start)
	// Until a new standby follows, the new primary does not wait for one (docs/deploy.md).
	c.recipeRun(recipeSyncOff, primaryVars(s)...)
	first, ok := w.firstAckAfter(promoted, time.Minute)
	if !ok {
		c.t.Fatalf("%s: no write accepted within a minute of the promotion", rec.kind())
	}
	rec.recovery, rec.outage = first.Sub(promoted), first.Sub(fault)
	if freeze {
		c.kill(p, syscall.SIGKILL) // the fencing a failover manager does before rebuilding it
	}
	c.addStandby(s, p)
	return rec
}

// report logs the figures of the switches and checks the recovery time of each.
func report(t *testing.T, recs []switchRecord) {
	var all, kill, freeze []time.Duration
	for _, r := range recs {
		all = append(all, r.recovery)
		if r.freeze {
			freeze = append(freeze, r.recovery)
		} else {
			kill = append(kill, r.recovery)
		}
		if r.recovery > *flagMaxRecovery {
			t.Errorf("%s: the first write was accepted %v after the promotion; the target is %v", r.kind(), r.recovery.Round(time.Millisecond), *flagMaxRecovery)
		}
	}
	t.Logf("%d switches (%d SIGKILL, %d SIGSTOP); from promotion to first accepted write: all %s; SIGKILL %s; SIGSTOP %s",
		len(recs), len(kill), len(freeze), stats(all), stats(kill), stats(freeze))
}

// stats says the median and the max of ds.
func stats(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return fmt.Sprintf("median %v, max %v", med.Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}

// The workload's shape.
const (
	writers           = 4
	sessionsPerWriter = 2
	appendPause       = 20 * time.Millisecond  // between a writer's accepted appends
	createEvery       = 200 * time.Millisecond // a new session
	retryPause        = 100 * time.Millisecond // before sending a refused request again
)

// workload is the clients of the test and what they saw.
type workload struct {
	t      *testing.T
	bin    string
	urls   []string
	hc     *http.Client
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // writers and the creator
	follow sync.WaitGroup // streams and the feed

	mu       sync.Mutex
	acks     map[string]map[string]int64 // session -> idempotency key -> acknowledged sequence
	ackTimes []time.Time
	created  []string              // every session created
	streams  map[string][]streamed // session -> events its stream delivered
	feed     []change              // the change feed's changes, in order
	internal []string              // every INTERNAL answer, anywhere
	failures []string              // anything else unexpected
	codes    map[string]int        // answers refused and retried, by code

	tailStop   atomic.Bool // the test interrupted it
	tail       *exec.Cmd
	tailSID    string
	tailOut    *testenv.SyncBuffer
	tailErr    *testenv.SyncBuffer
	tailDone   chan struct{}
	stopWrites chan struct{}
}

type streamed struct {
	seq     int64
	eventID string
}

type change struct {
	seq       int64
	kind      string
	sessionID string
}

func newWorkload(t *testing.T, bin string, urls []string) *workload {
	ctx, cancel := context.WithCancel(context.Background())
	w := &workload{t: t, bin: bin, urls: urls, ctx: ctx, cancel: cancel,
		hc:   &http.Client{Timeout: time.Minute},
		acks: map[string]map[string]int64{}, streams: map[string][]streamed{}, codes: map[string]int{},
		stopWrites: make(chan struct{})}
	t.Cleanup(cancel)
	return w
}

func (w *workload) failf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failures = append(w.failures, fmt.Sprintf(format, args...))
}

func writerSession(i int) string { return fmt.Sprintf("S-w%d", i) }

// start creates the writers' sessions and starts every client.
func (w *workload) start() {
	for i := range writers * sessionsPerWriter {
		if !w.create(writerSession(i), i%2) {
			w.t.Fatalf("create session %s: %v", writerSession(i), w.failures)
		}
		w.streams[writerSession(i)] = nil
	}
	for i := range writers * sessionsPerWriter {
		w.follow.Add(1)
		go w.stream(writerSession(i), w.urls[(i+1)%2])
	}
	w.follow.Add(1)
	go w.followFeed(w.urls[1])
	w.startTail(writerSession(0), w.urls[1])
	for i := range writers {
		w.wg.Add(1)
		go w.write(i)
	}
	w.wg.Add(1)
	go w.creator()
}

// request sends one request and returns the status and the error envelope's code (or "").
// A transport failure returns status 0.
func (w *workload) request(method, u string, body []byte) (int, string, []byte) {
	req, err := http.NewRequestWithContext(w.ctx, method, u, bytes.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.hc.Do(req)
	if err != nil {
		return 0, "", []byte(err.Error())
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode < 300 {
		return resp.StatusCode, "", data
	}
	var env struct {
		Error api.Error `json:"error"`
	}
	_ = json.Unmarshal(data, &env)
	code := string(env.Error.Code)
	if resp.StatusCode == http.StatusInternalServerError || code == string(api.CodeInternal) {
		w.mu.Lock()
		w.internal = append(w.internal, fmt.Sprintf("%s %s: %d %s", method, u, resp.StatusCode, data))
		w.mu.Unlock()
	}
	return resp.StatusCode, code, data
}

// retryable says whether a refused request is sent again: a retryable code (the database's
// switch: STORE_UNAVAILABLE, COMMIT_OUTCOME_UNKNOWN), no answer, or an INTERNAL answer (which
// the check counts as a failure; sending again lets the run go on to find more).
func (w *workload) retryable(status int, code string) bool {
	w.mu.Lock()
	w.codes[strconv.Itoa(status)+" "+code]++
	w.mu.Unlock()
	return status == 0 || contract.Retryable(contract.ErrorCode(code)) || code == string(api.CodeInternal) || status == http.StatusInternalServerError
}

// create creates session sid through instance inst until it exists; SESSION_EXISTS after a
// refused try means that try had committed.
func (w *workload) create(sid string, inst int) bool {
	body, _ := json.Marshal(api.CreateSessionRequest{SessionID: sid, AgentID: "agent-1", Role: "implementer",
		Snapshot: contract.Snapshot{Mode: "work", ModelID: "m", Capabilities: contract.Capabilities{}}})
	retried := false
	for w.ctx.Err() == nil {
		status, code, data := w.request("POST", w.urls[inst]+"/v1/sessions", body)
		switch {
		case status == http.StatusCreated || (retried && code == string(api.CodeSessionExists)):
			w.mu.Lock()
			w.created = append(w.created, sid)
			w.mu.Unlock()
			return true
		case w.retryable(status, code):
			retried = true
			time.Sleep(retryPause)
		default:
			w.failf("create %s: %d %s", sid, status, data)
			return false
		}
	}
	return false
}

// write appends events one at a time to the writer's sessions, alternating instances, each
// sent again (same event, same key) until it is acknowledged.
func (w *workload) write(i int) {
	defer w.wg.Done()
	gen := benchkit.NewGenerator(benchkit.RandomIDs, i)
	for n := 0; ; n++ {
		select {
		case <-w.stopWrites:
			return
		default:
		}
		sid := writerSession(i*sessionsPerWriter + n%sessionsPerWriter)
		ev := gen.Next(sid)
		u := "/v1/sessions/" + url.PathEscape(sid) + "/events"
		for try := 0; ; try++ {
			if w.ctx.Err() != nil {
				return
			}
			status, code, data := w.request("POST", w.urls[(n+try)%2]+u, ev.Data)
			if status == http.StatusCreated || status == http.StatusOK { // 200: all duplicates (a try that had committed)
				var ar api.AppendResponse
				if err := json.Unmarshal(data, &ar); err != nil || len(ar.Results) != 1 {
					w.failf("append to %s: an answer without one result: %s", sid, data)
					return
				}
				w.mu.Lock()
				if w.acks[sid] == nil {
					w.acks[sid] = map[string]int64{}
				}
				w.acks[sid][ev.Key] = ar.Results[0].Sequence
				w.ackTimes = append(w.ackTimes, time.Now())
				w.mu.Unlock()
				break
			}
			if !w.retryable(status, code) {
				w.failf("append to %s: %d %s", sid, status, data)
				return
			}
			time.Sleep(retryPause)
		}
		time.Sleep(appendPause)
	}
}

// creator creates a session every createEvery, alternating instances: the change feed's
// session.created changes.
func (w *workload) creator() {
	defer w.wg.Done()
	for n := 0; ; n++ {
		select {
		case <-w.stopWrites:
			return
		case <-time.After(createEvery):
		}
		w.create(fmt.Sprintf("S-f%d", n), n%2)
	}
}

// firstAckAfter waits until an append is acknowledged after t, and returns when it was.
func (w *workload) firstAckAfter(t time.Time, within time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		i := sort.Search(len(w.ackTimes), func(i int) bool { return w.ackTimes[i].After(t) })
		var at time.Time
		if i < len(w.ackTimes) {
			at = w.ackTimes[i]
		}
		w.mu.Unlock()
		if !at.IsZero() {
			return at, true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Time{}, false
}

// stream follows session sid through the Go client (which reconnects with Last-Event-ID) and
// records what it delivers.
func (w *workload) stream(sid, base string) {
	defer w.follow.Done()
	last := int64(-1)
	err := client.New(base, nil).Stream(w.ctx, sid, client.StreamOptions{After: -1, MaxBackoff: time.Second,
		OnReconnect: func(_ int64, cause error) {
			if strings.Contains(fmt.Sprint(cause), string(api.CodeInternal)) {
				w.mu.Lock()
				w.internal = append(w.internal, fmt.Sprintf("stream %s: %v", sid, cause))
				w.mu.Unlock()
			}
		}}, func(e client.StreamEvent) error {
		if e.Sequence != last+1 {
			w.failf("stream %s: sequence %d after %d", sid, e.Sequence, last)
		}
		last = e.Sequence
		var ev struct {
			EventID string `json:"eventId"`
		}
		_ = json.Unmarshal(e.Data, &ev)
		w.mu.Lock()
		w.streams[sid] = append(w.streams[sid], streamed{e.Sequence, ev.EventID})
		w.mu.Unlock()
		return nil
	})
	if w.ctx.Err() == nil {
		w.failf("stream %s ended: %v", sid, err)
	}
}

// followFeed follows the change feed from its start, reconnecting with Last-Event-ID after any
// failure, and records each change.
func (w *workload) followFeed(base string) {
	defer w.follow.Done()
	cursor := int64(0)
	for w.ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(w.ctx, "GET", base+"/v1/events/stream", nil)
		req.Header.Set("Last-Event-ID", strconv.FormatInt(cursor, 10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			time.Sleep(retryPause)
			continue
		}
		if resp.StatusCode != http.StatusOK {
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusInternalServerError || bytes.Contains(data, []byte(string(api.CodeInternal))) {
				w.mu.Lock()
				w.internal = append(w.internal, fmt.Sprintf("change feed: %d %s", resp.StatusCode, data))
				w.mu.Unlock()
			}
			time.Sleep(retryPause)
			continue
		}
		var event, data string
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			switch {
			case strings.HasPrefix(l, "event: "):
				event = strings.TrimPrefix(l, "event: ")
			case strings.HasPrefix(l, "data: "):
				data = strings.TrimPrefix(l, "data: ")
			case l == "":
				if event == "stream.error" && strings.Contains(data, string(api.CodeInternal)) {
					w.mu.Lock()
					w.internal = append(w.internal, "change feed: "+data)
					w.mu.Unlock()
				}
				if strings.HasPrefix(event, "change.") {
					var ch struct {
						Seq       int64  `json:"seq"`
						Kind      string `json:"kind"`
						SessionID string `json:"sessionId"`
					}
					if err := json.Unmarshal([]byte(data), &ch); err != nil {
						w.failf("change feed: a block that is not a change: %s", data)
					} else {
						if ch.Seq != cursor+1 {
							w.failf("change feed: change %d after %d", ch.Seq, cursor)
						}
						cursor = ch.Seq
						w.mu.Lock()
						w.feed = append(w.feed, change{ch.Seq, ch.Kind, ch.SessionID})
						w.mu.Unlock()
					}
				}
				event, data = "", ""
			}
		}
		resp.Body.Close()
		time.Sleep(retryPause)
	}
}

// startTail runs `sessiond tail --json SESSION` against base.
func (w *workload) startTail(sid, base string) {
	w.tailSID = sid
	w.tailOut, w.tailErr = &testenv.SyncBuffer{}, &testenv.SyncBuffer{}
	w.tail = exec.Command(w.bin, "tail", "--server", base, "--json", sid)
	w.tail.Stdout, w.tail.Stderr = w.tailOut, w.tailErr
	if err := w.tail.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.tailDone = make(chan struct{})
	go func() {
		err := w.tail.Wait()
		if !w.tailStop.Load() {
			w.failf("sessiond tail ended before the test did: %v\n%s", err, w.tailErr.String())
		}
		close(w.tailDone)
	}()
	w.t.Cleanup(func() {
		w.tail.Process.Kill()
		<-w.tailDone
	})
}

// stop stops the writers and the creator, waits until every follower has caught up with the
// stored logs (at most a minute), then stops the followers.
func (w *workload) stop() {
	close(w.stopWrites)
	w.wg.Wait()
	deadline := time.Now().Add(time.Minute)
	for !w.caughtUp() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	w.tailStop.Store(true)
	w.tail.Process.Signal(os.Interrupt)
	select {
	case <-w.tailDone:
	case <-time.After(10 * time.Second):
		w.failf("sessiond tail did not end within 10 s of SIGINT")
	}
	w.cancel()
	w.follow.Wait()
}

// caughtUp reports whether every stream has delivered its session's acknowledged events, the
// tail its session's, and the feed a session.created change for every created session.
func (w *workload) caughtUp() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for sid, acks := range w.acks {
		if len(w.streams[sid]) < len(acks) {
			return false
		}
	}
	if strings.Count(w.tailOut.String(), "\n") < len(w.acks[w.tailSID]) {
		return false
	}
	seen := map[string]bool{}
	for _, ch := range w.feed {
		if ch.kind == "session.created" {
			seen[ch.sessionID] = true
		}
	}
	for _, sid := range w.created {
		if !seen[sid] {
			return false
		}
	}
	return true
}

// storedEvent is what the check reads of a stored event.
type storedEvent struct {
	Sequence       int64  `json:"sequence"`
	EventID        string `json:"eventId"`
	IdempotencyKey string `json:"idempotencyKey"`
}

// readLog reads session sid's whole log.
func (w *workload) readLog(sid string) []storedEvent {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := client.New(w.urls[0], nil)
	var out []storedEvent
	for after := int64(-1); ; {
		page, err := c.ReadEvents(ctx, sid, after, 1000)
		if err != nil {
			w.t.Fatalf("read %s: %v", sid, err)
		}
		for _, raw := range page.Events {
			var e storedEvent
			if err := json.Unmarshal(raw, &e); err != nil {
				w.t.Fatalf("read %s: %v", sid, err)
			}
			out = append(out, e)
		}
		if len(page.Events) == 0 || out[len(out)-1].Sequence >= page.LastSequence {
			return out
		}
		after = out[len(out)-1].Sequence
	}
}

// check compares what every client saw with the stored logs.
func (w *workload) check() {
	t := w.t
	acked, stored := 0, 0
	for sid, acks := range w.acks {
		log := w.readLog(sid)
		stored += len(log)
		acked += len(acks)
		keys, ids := map[string]int64{}, map[string]bool{}
		for i, e := range log {
			if e.Sequence != int64(i) {
				t.Errorf("%s: a gap: the event at position %d has sequence %d", sid, i, e.Sequence)
			}
			if _, dup := keys[e.IdempotencyKey]; dup || ids[e.EventID] {
				t.Errorf("%s: a duplicate: key %s / eventId %s stored twice", sid, e.IdempotencyKey, e.EventID)
			}
			keys[e.IdempotencyKey], ids[e.EventID] = e.Sequence, true
		}
		for key, seq := range acks {
			if got, ok := keys[key]; !ok {
				t.Errorf("%s: the acknowledged event with key %s (sequence %d) was lost", sid, key, seq)
			} else if got != seq {
				t.Errorf("%s: the event with key %s was acknowledged at %d and is stored at %d", sid, key, seq, got)
			}
		}
		if len(log) != len(acks) {
			t.Errorf("%s: %d events stored, %d acknowledged (every writer sends each event until it is acknowledged)", sid, len(log), len(acks))
		}
		got := w.streams[sid]
		if len(got) != len(log) {
			t.Errorf("stream %s: %d events delivered, %d stored", sid, len(got), len(log))
		}
		for i := range min(len(got), len(log)) {
			if got[i].seq != log[i].Sequence || got[i].eventID != log[i].EventID {
				t.Errorf("stream %s: delivered %d %s at position %d, stored %d %s", sid, got[i].seq, got[i].eventID, i, log[i].Sequence, log[i].EventID)
				break
			}
		}
		if sid == w.tailSID {
			w.checkTail(log)
		}
	}
	created := map[string]int{}
	for _, ch := range w.feed {
		if ch.kind == "session.created" {
			created[ch.sessionID]++
		}
	}
	for _, sid := range w.created {
		if created[sid] != 1 {
			t.Errorf("change feed: %d session.created changes for %s, want 1", created[sid], sid)
		}
	}
	for _, f := range w.failures {
		t.Error(f)
	}
	for _, s := range w.internal {
		t.Errorf("an INTERNAL answer: %s", s)
	}
	t.Logf("%d events acknowledged and %d stored in %d sessions; %d sessions created; %d changes followed; %d tail lines; answers refused and retried: %v",
		acked, stored, len(w.acks), len(w.created), len(w.feed), strings.Count(w.tailOut.String(), "\n"), w.codes)
}

// checkTail compares `sessiond tail --json`'s lines with the stored log.
func (w *workload) checkTail(log []storedEvent) {
	lines := strings.Split(strings.TrimSpace(w.tailOut.String()), "\n")
	if len(lines) != len(log) {
		w.t.Errorf("sessiond tail %s: %d lines, %d events stored; its stderr:\n%s", w.tailSID, len(lines), len(log), w.tailErr.String())
	}
	for i := range min(len(lines), len(log)) {
		var e storedEvent
		if err := json.Unmarshal([]byte(lines[i]), &e); err != nil || e.Sequence != log[i].Sequence || e.EventID != log[i].EventID {
			w.t.Errorf("sessiond tail %s: line %d is %q, stored %d %s (%v)", w.tailSID, i+1, lines[i], log[i].Sequence, log[i].EventID, err)
			return
		}
	}
}
