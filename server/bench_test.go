package server_test

// Benchmarks of the HTTP API and the SSE fan-out, for the figures of issue 4 ("Performance").
// Everything runs through a real TCP loopback server (httptest) over the real SQLite store
// (WAL, synchronous=FULL: every commit is fsynced). Client and server share the process and
// the machine's cores, so the figures are for the whole loop, not for the server alone.
//
//	go test -run '^$' -bench 'HTTPAppend|Fanout|IdleSubscribers' -benchtime 1x -count 5 ./server/
//
// -benchtime 1x: one op of each is already a run of seconds (see each benchmark).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/internal/testenv"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/sqlite"
)

// benchEventSize is the target size of one benchmark event as sent (the stored form, with the
// server's sequence, is within a few bytes of it).
const benchEventSize = 400

// benchEvent appends a valid ~400-byte message event of session sid, unique by n, to buf. The
// text part carries note (e.g. a timestamp) and is padded to reach benchEventSize.
func benchEvent(buf []byte, sid string, n int64, note string) []byte {
	start := len(buf)
	buf = append(buf, `{"contract":"AgentSessionEvent","eventId":"ev-`...)
	buf = strconv.AppendInt(buf, n, 10)
	buf = append(buf, `","sessionId":"`...)
	buf = append(buf, sid...)
	buf = append(buf, `","sequence":0,"idempotencyKey":"key-`...)
	buf = strconv.AppendInt(buf, n, 10)
	buf = append(buf, `","occurredAt":"2026-03-01T12:00:00Z","eventType":"message","payload":{"messageId":"m-`...)
	buf = strconv.AppendInt(buf, n, 10)
	buf = append(buf, `","role":"assistant","operation":"append","parts":[{"type":"text","text":"`...)
	buf = append(buf, note...)
	buf = append(buf, ' ')
	const tail = `"}]}}`
	for pad := benchEventSize - (len(buf) - start) - len(tail); pad > 0; pad-- {
		buf = append(buf, 'a'+byte(pad%26))
	}
	return append(buf, tail...)
}

// raiseOpenFiles lifts the soft open-files limit to the hard one: the fan-out benchmarks hold
// two descriptors per subscriber (client and server end) in this process.
func raiseOpenFiles(b *testing.B, need uint64) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		b.Logf("getrlimit: %v", err)
		return
	}
	if rl.Cur >= need {
		return
	}
	rl.Cur = min(rl.Max, need)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur < need {
		b.Skipf("need %d open files, the limit is %d (%v)", need, rl.Cur, err)
	}
}

// benchTransport keeps one idle connection per concurrent client, so that every client reuses
// its own keep-alive connection (the default keeps only 2 per host and would redial).
func benchTransport(conns int) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = conns * 2
	tr.MaxIdleConnsPerHost = conns * 2
	return tr
}

// keySeq makes idempotency keys and event ids unique across sub-benchmarks and b.N rounds
// (every round also gets fresh sessions, but unique keys keep every event a real insert).
var keySeq atomic.Int64

// appendRound is one op of BenchmarkHTTPAppend: this many batches of 100 events (40,000
// events) spread over the clients, so that -benchtime 1x (which the fan-out benchmarks use)
// still measures a couple of seconds of load.
const appendRound = 400

// BenchmarkHTTPAppend: concurrent clients POST NDJSON batches of 100 ~400-byte message events
// (unique keys) to 8 sessions through a real loopback HTTP server into SQLite with fsync.
// One op is a round of appendRound batches; events/s is the end-to-end throughput (request
// built, sent, parsed and validated, committed by the store's group commit with fsync,
// response read and checked).
func BenchmarkHTTPAppend(b *testing.B) {
	for _, clients := range []int{8, 32} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			benchHTTPAppend(b, setup(b, server.Options{}), clients)
		})
	}
}

// BenchmarkHTTPAppendMetrics is BenchmarkHTTPAppend with 8 clients, metrics off (no metrics
// recorded) and on (the server's metrics and the store's group-commit and sync hooks, as
// sessiond serve runs): side by side, what metrics cost (docs/operations.md).
func BenchmarkHTTPAppendMetrics(b *testing.B) {
	b.Run("metrics=off", func(b *testing.B) {
		benchHTTPAppend(b, setup(b, server.Options{DisableMetrics: true}), 8)
	})
	b.Run("metrics=on", func(b *testing.B) {
		benchHTTPAppend(b, setupObserved(b), 8)
	})
}

// benchHTTPAppend runs the rounds of BenchmarkHTTPAppend against bd with the given clients.
func benchHTTPAppend(b *testing.B, bd *bundle, clients int) {
	const batch = 100
	const sessions = 8
	sids := make([]string, sessions)
	for i := range sids {
		sids[i] = fmt.Sprintf("S-bench-%d", i)
		bd.createSession(b, sids[i])
	}
	hc := &http.Client{Transport: benchTransport(clients)}
	defer hc.CloseIdleConnections()
	total := int64(b.N) * appendRound
	var next atomic.Int64 // batches claimed
	var failed atomic.Value
	b.ResetTimer()
	cpu0 := testenv.ProcessCPU()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := sids[c%sessions]
			url := bd.ts.URL + "/v1/sessions/" + sid + "/events"
			body := make([]byte, 0, batch*(benchEventSize+1))
			for next.Add(1) <= total {
				body = body[:0]
				base := keySeq.Add(batch) - batch
				for i := int64(0); i < batch; i++ {
					body = benchEvent(body, sid, base+i, "bench")
					body = append(body, '\n')
				}
				req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/x-ndjson")
				if bd.authz != "" {
					req.Header.Set("Authorization", bd.authz)
				}
				resp, err := hc.Do(req)
				if err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
				data, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					failed.CompareAndSwap(nil, fmt.Errorf("append: %d %s", resp.StatusCode, data))
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := testenv.ProcessCPU() - cpu0
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(total*batch)/elapsed.Seconds(), "events/s")
	b.ReportMetric(cpu.Seconds()/elapsed.Seconds(), "cores-used")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(total*batch), "cpu-ns/event")
}

// fanoutBundle is setup's bundle with a commit recorder registered on the store before the
// server's hub, so the recorder sees every commit first: its clock reading is the commit time
// (the COMMIT, with its fsync, has returned; no subscriber can have been woken yet).
type fanoutBundle struct {
	*bundle
	commitNanos []atomic.Int64 // by sequence
}

func setupFanout(b *testing.B, opt server.Options, maxEvents int) *fanoutBundle {
	st, err := sqlite.Open(context.Background(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	fb := &fanoutBundle{commitNanos: make([]atomic.Int64, maxEvents)}
	stop := st.Subscribe(func(c store.Commit) {
		now := time.Now().UnixNano()
		for _, e := range c.Events {
			if e.Sequence >= 0 && e.Sequence < int64(len(fb.commitNanos)) {
				fb.commitNanos[e.Sequence].Store(now)
			}
		}
	})
	srv := newServer(b, st, opt)
	ts := httptest.NewServer(srv)
	b.Cleanup(func() {
		srv.Close()
		ts.Close()
		stop()
		st.Close()
	})
	fb.bundle = &bundle{st: st, srv: srv, ts: ts, cl: client.New(ts.URL, ts.Client())}
	return fb
}

// fanoutWriter appends total events to sid at rate and returns how many appends it took:
// every millisecond it sends, in one NDJSON append, the events that are due by then (one
// event per tick when appends keep up, more when an append took longer than a tick). The
// send time of each event goes to sendNanos (by sequence) and into its text as "t=...".
func fanoutWriter(b *testing.B, fb *fanoutBundle, sid string, rate int, total int64, sendNanos []atomic.Int64) int64 {
	hc := &http.Client{Transport: benchTransport(1)}
	defer hc.CloseIdleConnections()
	url := fb.ts.URL + "/v1/sessions/" + sid + "/events"
	tick := time.NewTicker(time.Millisecond)
	body := make([]byte, 0, 64<<10)
	start := time.Now()
	var sentEvents, appends, prevSent int64
	const slowAppend = 50 * time.Millisecond
	slowAppends := 0
	for sentEvents < total {
		<-tick.C
		due := min(int64(time.Since(start).Seconds()*float64(rate))+1, total)
		if due <= sentEvents {
			continue
		}
		body = body[:0]
		sendTime := time.Now().UnixNano()
		note := "t=" + strconv.FormatInt(sendTime, 10)
		due = min(due, sentEvents+store.MaxBatchEvents)
		for ; sentEvents < due; sentEvents++ {
			sendNanos[sentEvents].Store(sendTime)
			body = benchEvent(body, sid, keySeq.Add(1), note)
			body = append(body, '\n')
		}
		t0 := time.Now()
		resp, err := hc.Post(url, "application/x-ndjson", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		if d := time.Since(t0); d > slowAppend {
			slowAppends++
			if slowAppends <= 5 {
				b.Logf("slow append at %v: %v for %d events", t0.Sub(start).Round(time.Millisecond), d.Round(time.Millisecond), due-prevSent)
			}
		}
		prevSent = due
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			b.Fatalf("append: %d %s", resp.StatusCode, data)
		}
		appends++
	}
	tick.Stop()
	return appends
}

// rawSubscriber is one SSE reader on its own TCP connection and goroutine, without
// net/http's client (no transport goroutines, no extra copy of the body): it writes the
// request, reads the response header, and decodes the chunked body and the SSE lines in
// place, so that the benchmark's client side takes as little of the shared CPU as it can.
type rawSubscriber struct {
	conn net.Conn
	br   *bufio.Reader

	// chunked decoding
	state int   // 0: reading a size line, 1: chunk data, 2: the CRLF after it
	left  int64 // bytes left in the current state 1 or 2
	hdr   []byte
	// chunks counts the chunks received: one per write (flush) of the server's.
	chunks int

	// SSE decoding
	part                []byte // a line split by a read or chunk boundary
	id                  int64
	hasID, hasData, err bool
}

// dialSubscriber opens GET path as an SSE stream and reads the opening block (after which the
// server has registered the subscriber with the hub).
func dialSubscriber(addr, path string, bufSize int) (*rawSubscriber, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &rawSubscriber{conn: conn, br: bufio.NewReaderSize(conn, bufSize), id: -1}
	fail := func(err error) (*rawSubscriber, error) {
		conn.Close()
		return nil, err
	}
	req := "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nAccept: text/event-stream\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		return fail(err)
	}
	chunked := false
	for i := 0; ; i++ {
		line, err := s.br.ReadSlice('\n')
		if err != nil {
			return fail(fmt.Errorf("stream: response header: %w", err))
		}
		l := strings.ToLower(strings.TrimRight(string(line), "\r\n"))
		if i == 0 && !strings.HasPrefix(l, "http/1.1 200 ") {
			return fail(fmt.Errorf("stream: %s", l))
		}
		if l == "transfer-encoding: chunked" {
			chunked = true
		}
		if l == "" {
			break
		}
	}
	if !chunked {
		return fail(errors.New("stream: response is not chunked"))
	}
	opened := false
	buf := make([]byte, 512)
	for !opened {
		if err := s.pump(buf, func(_, _ int64, data, _ bool) { opened = opened || !data }); err != nil {
			return fail(fmt.Errorf("stream: opening: %w", err))
		}
	}
	return s, nil
}

// pump reads once from the connection into buf and calls fn for every SSE block the bytes
// complete, with the time the read returned, the block's id (-1 without one), whether it
// carried data, and whether it was the stream's final "stream.error" block. The chunked
// body's end is io.EOF.
func (s *rawSubscriber) pump(buf []byte, fn func(now, id int64, data, isErr bool)) error {
	n, err := s.br.Read(buf)
	now := time.Now().UnixNano()
	b := buf[:n]
	for len(b) > 0 {
		switch s.state {
		case 0:
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				s.hdr = append(s.hdr, b...)
				b = nil
				continue
			}
			s.hdr = append(s.hdr, b[:i]...)
			b = b[i+1:]
			h := bytes.TrimRight(s.hdr, "\r")
			if j := bytes.IndexByte(h, ';'); j >= 0 {
				h = h[:j]
			}
			size, perr := strconv.ParseInt(string(h), 16, 64)
			s.hdr = s.hdr[:0]
			if perr != nil {
				return fmt.Errorf("bad chunk size line %q", h)
			}
			if size == 0 {
				return io.EOF
			}
			s.state, s.left = 1, size
			s.chunks++
		case 1:
			m := min(int64(len(b)), s.left)
			s.scan(b[:m], now, fn)
			b, s.left = b[m:], s.left-m
			if s.left == 0 {
				s.state, s.left = 2, 2
			}
		case 2:
			m := min(int64(len(b)), s.left)
			b, s.left = b[m:], s.left-m
			if s.left == 0 {
				s.state = 0
			}
		}
	}
	return err
}

func (s *rawSubscriber) scan(seg []byte, now int64, fn func(now, id int64, data, isErr bool)) {
	for len(seg) > 0 {
		i := bytes.IndexByte(seg, '\n')
		if i < 0 {
			s.part = append(s.part, seg...)
			return
		}
		line := seg[:i]
		seg = seg[i+1:]
		if len(s.part) > 0 {
			s.part = append(s.part, line...)
			line = s.part
		}
		switch {
		case len(line) == 0:
			if s.hasID || s.hasData {
				fn(now, s.id, s.hasData, s.err)
			}
			s.id, s.hasID, s.hasData, s.err = -1, false, false, false
		case bytes.HasPrefix(line, []byte("id: ")):
			s.id, _ = strconv.ParseInt(string(line[4:]), 10, 64)
			s.hasID = true
		case bytes.HasPrefix(line, []byte("data: ")):
			s.hasData = true
		case bytes.Equal(line, []byte("event: stream.error")):
			s.err = true
		}
		s.part = s.part[:0]
	}
}

// openSubscribers opens n subscribers concurrently (a few dials at a time).
func openSubscribers(b *testing.B, addr, path string, n, bufSize int) []*rawSubscriber {
	subs := make([]*rawSubscriber, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := range subs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s, err := dialSubscriber(addr, path, bufSize)
			if err != nil {
				errs <- err
				return
			}
			subs[i] = s
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		for _, s := range subs {
			if s != nil {
				s.conn.Close()
			}
		}
		b.Fatal(err)
	}
	return subs
}

// BenchmarkFanout: one writer appends 1,000 events/s to one session for fanoutSeconds, while
// 1,000 SSE subscribers (raw HTTP readers, one connection and goroutine each) follow it live
// from ?tail=true. Every delivery is timed at the subscriber: the chunk holding an event's end
// is stamped when Read returns it, and the latency is that stamp minus the event's commit
// time, taken by a store commit callback registered before the server's (see fanoutBundle).
// Reported: p50/p99/max of commit-to-delivery over all deliveries (1,000 subscribers x
// 1,000 events/s x fanoutSeconds), and p99 measured from the writer's send time (just before
// its POST; carried in the event's text) as an upper bound that adds request parsing and the
// fsync of the commit.
func BenchmarkFanout(b *testing.B) {
	const (
		subscribers   = 1000
		rate          = 1000 // events per second
		fanoutSeconds = 4
	)
	raiseOpenFiles(b, 2*subscribers+256)
	for _, mode := range []string{"in-process", "child-process"} {
		b.Run("subscribers="+mode, func(b *testing.B) {
			var p50s, p99s, maxs, sendP99s, batchSizes, shares, perDel, srvPerDel []float64
			for i := 0; i < b.N; i++ {
				var res fanoutResult
				if mode == "in-process" {
					res = runFanout(b, subscribers, rate, fanoutSeconds*time.Second)
				} else {
					res = runFanoutSplit(b, subscribers, rate, fanoutSeconds*time.Second)
				}
				p50s = append(p50s, res.p50)
				p99s = append(p99s, res.p99)
				maxs = append(maxs, res.max)
				sendP99s = append(sendP99s, res.sendP99)
				batchSizes = append(batchSizes, res.meanBatch)
				shares = append(shares, res.cpuShare)
				perDel = append(perDel, res.cpuPerDel)
				srvPerDel = append(srvPerDel, res.serverPerDel)
			}
			med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
			b.ReportMetric(med(p50s), "p50-ms")
			b.ReportMetric(med(p99s), "p99-ms")
			b.ReportMetric(med(maxs), "max-ms")
			b.ReportMetric(med(sendP99s), "send-p99-ms")
			b.ReportMetric(med(batchSizes), "events/append")
			b.ReportMetric(med(shares), "cores-used")
			b.ReportMetric(med(perDel), "cpu-ns/delivery")
			if mode != "in-process" {
				b.ReportMetric(med(srvPerDel), "server-cpu-ns/delivery")
			}
		})
	}
}

// runFanoutSplit is runFanout with the subscribers in a child process (this test binary
// re-run as TestFanoutClients), so that the server's process, CPU time and Go scheduler hold
// only the server and the writer. The child stamps every delivery; the parent then sends it
// the commit and send times by sequence, and the child answers with the percentiles.
func runFanoutSplit(b *testing.B, subscribers, rate int, dur time.Duration) fanoutResult {
	total := int64(rate) * int64(dur/time.Second)
	fb := setupFanout(b, server.Options{}, int(total)+2*rate)
	const sid = "S-fanout"
	fb.createSession(b, sid)
	sendNanos := make([]atomic.Int64, total)
	cl := startFanoutClients(b, fb.ts.Listener.Addr().String(), "/v1/sessions/"+sid+"/events/stream?tail=true", subscribers, total, 0)
	defer cl.close()
	cpu0 := testenv.ProcessCPU()
	start := time.Now()
	appends := fanoutWriter(b, fb, sid, rate, total, sendNanos)
	v := cl.result(b, total, func(i int64) (commit, send int64) { return fb.commitNanos[i].Load(), sendNanos[i].Load() })
	cpu := testenv.ProcessCPU() - cpu0
	wall := time.Duration(int64(v[5]) - start.UnixNano())
	deliveries := float64(total) * float64(subscribers)
	return fanoutResult{
		p50: v[0], p99: v[1], max: v[2], sendP99: v[3],
		meanBatch:    float64(total) / float64(appends),
		cpuShare:     (cpu.Seconds() + v[4]/1e9) / wall.Seconds(),
		cpuPerDel:    (float64(cpu.Nanoseconds()) + v[4]) / deliveries,
		serverPerDel: float64(cpu.Nanoseconds()) / deliveries,
	}
}

// fanoutClients is a running client process of TestFanoutClients.
type fanoutClients struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// startFanoutClients starts n subscribers on path in a child process (the test binary re-run
// as TestFanoutClients) and waits until they are connected. They expect the blocks of
// sequences first to total-1.
func startFanoutClients(b *testing.B, addr, path string, n int, total, first int64) *fanoutClients {
	cmd := exec.Command(os.Args[0], "-test.run=^TestFanoutClients$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		"SESSIOND_FANOUT_ADDR="+addr,
		"SESSIOND_FANOUT_PATH="+path,
		"SESSIOND_FANOUT_N="+strconv.Itoa(n),
		"SESSIOND_FANOUT_TOTAL="+strconv.FormatInt(total, 10),
		"SESSIOND_FANOUT_FIRST="+strconv.FormatInt(first, 10))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &fanoutClients{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	if line, err := c.out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		c.close()
		b.Fatalf("client process: %q %v", line, err)
	}
	return c
}

// result sends the child the commit and send times of sequences 0 to total-1 (times(i)) and
// returns its answer: p50, p99, max, send p99 (ms), the child's CPU ns, and the unix nanos when
// its last delivery ended.
func (c *fanoutClients) result(b *testing.B, total int64, times func(i int64) (commit, send int64)) [6]float64 {
	buf := make([]byte, 0, 16*total)
	for i := range total {
		commit, send := times(i)
		buf = binary.LittleEndian.AppendUint64(buf, uint64(commit))
		buf = binary.LittleEndian.AppendUint64(buf, uint64(send))
	}
	if _, err := c.stdin.Write(buf); err != nil {
		b.Fatal(err)
	}
	line, err := c.out.ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) != 7 || f[0] != "result" {
		b.Fatalf("client process: %q %v", line, err)
	}
	var v [6]float64
	for i := range v {
		v[i], _ = strconv.ParseFloat(f[i+1], 64)
	}
	return v
}

// close ends the child's input and waits for it.
func (c *fanoutClients) close() {
	c.stdin.Close()
	c.cmd.Wait()
}

// TestFanoutClients is the client process of BenchmarkFanout/subscribers=child-process; it
// does nothing unless started by it.
func TestFanoutClients(t *testing.T) {
	addr := os.Getenv("SESSIOND_FANOUT_ADDR")
	if addr == "" {
		t.Skip("the client process of BenchmarkFanout")
	}
	n, _ := strconv.Atoi(os.Getenv("SESSIOND_FANOUT_N"))
	total, _ := strconv.ParseInt(os.Getenv("SESSIOND_FANOUT_TOTAL"), 10, 64)
	first, _ := strconv.ParseInt(os.Getenv("SESSIOND_FANOUT_FIRST"), 10, 64) // sequences before it are not sent
	path := os.Getenv("SESSIOND_FANOUT_PATH")
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Cur < uint64(n)+256 {
		rl.Cur = min(rl.Max, uint64(n)+256)
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	subs := make([]*rawSubscriber, n)
	for i := range subs {
		s, err := dialSubscriber(addr, path, 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		subs[i] = s
	}
	recv := make([][]int64, n) // receipt time by subscriber and sequence
	errs := make([]error, n)
	var wg sync.WaitGroup
	fmt.Println("ready")
	cpu0 := testenv.ProcessCPU()
	for i, s := range subs {
		recv[i] = make([]int64, total)
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64<<10)
			done := false
			onBlock := func(now, seq int64, data, isErr bool) {
				switch {
				case done:
				case isErr:
					errs[i] = errors.New("stream cut off")
					done = true
				case data && seq >= 0 && seq < total:
					recv[i][seq] = now
					done = seq == total-1
				}
			}
			for !done {
				if err := s.pump(buf, onBlock); err != nil && !done {
					errs[i] = fmt.Errorf("stream ended early: %v", err)
					return
				}
			}
		}()
	}
	// A subscriber still waiting long after the writer must be done ends with an error.
	stuck := time.AfterFunc(time.Duration(total)*time.Millisecond+time.Minute, func() {
		for _, s := range subs {
			s.conn.Close()
		}
	})
	wg.Wait()
	stuck.Stop()
	doneAt := time.Now().UnixNano()
	cpu := testenv.ProcessCPU() - cpu0
	for _, s := range subs {
		s.conn.Close()
	}
	times := make([]byte, 16*total)
	if _, err := io.ReadFull(os.Stdin, times); err != nil {
		t.Fatal(err)
	}
	var commit, send []int32
	for i := range recv {
		if errs[i] != nil {
			t.Fatalf("subscriber %d: %v", i, errs[i])
		}
		for seq, at := range recv[i] {
			if int64(seq) < first {
				continue
			}
			if at == 0 {
				t.Fatalf("subscriber %d: sequence %d not delivered", i, seq)
			}
			c := int64(binary.LittleEndian.Uint64(times[16*seq:]))
			sn := int64(binary.LittleEndian.Uint64(times[16*seq+8:]))
			commit = append(commit, int32((at-c)/1000))
			send = append(send, int32((at-sn)/1000))
		}
	}
	slices.Sort(commit)
	slices.Sort(send)
	pct := func(v []int32, p float64) float64 {
		return float64(v[min(len(v)-1, int(float64(len(v))*p))]) / 1000
	}
	fmt.Printf("result %g %g %g %g %d %d\n", pct(commit, 0.5), pct(commit, 0.99), float64(commit[len(commit)-1])/1000,
		pct(send, 0.99), cpu.Nanoseconds(), doneAt)
}

type fanoutResult struct {
	p50, p99, max, sendP99 float64 // milliseconds
	meanBatch              float64
	cpuShare               float64 // cores this process used while writing and delivering
	cpuPerDel              float64 // ns of CPU (client and server) per delivered event
	serverPerDel           float64 // the same for the server's process alone (child-process mode)
}

func runFanout(b *testing.B, subscribers, rate int, dur time.Duration) fanoutResult {
	maxEvents := rate*int(dur/time.Second) + 2*rate
	fb := setupFanout(b, server.Options{}, maxEvents)
	const sid = "S-fanout"
	fb.createSession(b, sid)
	addr := fb.ts.Listener.Addr().String()
	subs := openSubscribers(b, addr, "/v1/sessions/"+sid+"/events/stream?tail=true", subscribers, 64<<10)

	// Each subscriber reads until it has seen the last sequence, recording latencies in
	// microseconds (commit-to-delivery and send-to-delivery).
	type samples struct {
		commit, send []int32
		err          error
	}
	all := make([]samples, subscribers)
	total := int64(rate) * int64(dur/time.Second)
	lastSeq := total - 1 // the session starts empty
	// The writer's send time by sequence (also written into each event's text as "t=...",
	// for a reader of the stream; the table spares the subscribers parsing it).
	sendNanos := make([]atomic.Int64, total)
	var rg sync.WaitGroup
	for i, s := range subs {
		rg.Add(1)
		go func() {
			defer rg.Done()
			sm := &all[i]
			sm.commit = make([]int32, 0, rate*int(dur/time.Second)+rate)
			sm.send = make([]int32, 0, cap(sm.commit))
			buf := make([]byte, 64<<10)
			done := false
			onBlock := func(now, seq int64, data, isErr bool) {
				switch {
				case done:
				case isErr:
					sm.err = fmt.Errorf("stream cut off after %d events", len(sm.commit))
					done = true
				case data && seq >= 0 && seq <= lastSeq:
					sm.commit = append(sm.commit, int32((now-fb.commitNanos[seq].Load())/1000))
					sm.send = append(sm.send, int32((now-sendNanos[seq].Load())/1000))
					done = seq == lastSeq
				}
			}
			for !done {
				if err := s.pump(buf, onBlock); err != nil && !done {
					sm.err = fmt.Errorf("stream ended early: %v", err)
					return
				}
			}
		}()
	}

	cpu0 := testenv.ProcessCPU()
	start := time.Now()
	appends := fanoutWriter(b, fb, sid, rate, total, sendNanos)
	writeTime := time.Since(start)
	// Readers end on the last event; close the connections of any still waiting after a
	// grace period (they then report what is missing).
	done := make(chan struct{})
	go func() { rg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
	cpu := testenv.ProcessCPU() - cpu0
	wall := time.Since(start)
	for _, s := range subs {
		s.conn.Close()
	}
	<-done
	if got := float64(total) / writeTime.Seconds(); got < 0.95*float64(rate) {
		b.Logf("writer fell behind: %.0f events/s", got)
	}

	var commit, send []int32
	missing := 0
	for i := range all {
		if all[i].err != nil {
			b.Fatalf("subscriber %d: %v", i, all[i].err)
		}
		missing += int(total) - len(all[i].commit)
		commit = append(commit, all[i].commit...)
		send = append(send, all[i].send...)
	}
	if missing != 0 {
		b.Fatalf("%d deliveries missing", missing)
	}
	slices.Sort(commit)
	slices.Sort(send)
	pct := func(v []int32, p float64) float64 {
		return float64(v[min(len(v)-1, int(float64(len(v))*p))]) / 1000
	}
	return fanoutResult{
		p50: pct(commit, 0.50), p99: pct(commit, 0.99), max: float64(commit[len(commit)-1]) / 1000,
		sendP99:   pct(send, 0.99),
		meanBatch: float64(total) / float64(appends),
		cpuShare:  cpu.Seconds() / wall.Seconds(),
		cpuPerDel: float64(cpu.Nanoseconds()) / float64(len(commit)),
	}
}

// BenchmarkIdleSubscribers: the server-side memory of N idle SSE subscribers (connected with
// ?tail=true, opening block received, nothing to send). The subscribers run in a child process
// (this test binary re-run as TestIdleSubscriberClients), so this process's heap and stacks
// hold only the server: the connections it accepted, their handler goroutines, buffers and
// hub entries. Measured as HeapInuse+StackInuse after GC with the subscribers connected,
// minus the same before they connected, divided by N.
func BenchmarkIdleSubscribers(b *testing.B) {
	const n = 1000
	raiseOpenFiles(b, n+256)
	var perSub []float64
	for i := 0; i < b.N; i++ {
		perSub = append(perSub, idleSubscriberBytes(b, n))
	}
	slices.Sort(perSub)
	b.ReportMetric(perSub[len(perSub)/2]/1024, "KiB/subscriber")
}

func inUse() uint64 {
	for range 3 {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

func idleSubscriberBytes(b *testing.B, n int) float64 {
	bd := setup(b, server.Options{})
	const sid = "S-idle"
	bd.createSession(b, sid)
	bd.appendN(b, sid, 0, 10)
	// Warm up the server's pools and the hub with one subscriber that stays.
	warm := openSubscribers(b, bd.ts.Listener.Addr().String(), "/v1/sessions/"+sid+"/events/stream?tail=true", 1, 4096)
	defer warm[0].conn.Close()

	before := inUse()
	cmd := exec.Command(os.Args[0], "-test.run=^TestIdleSubscriberClients$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		"SESSIOND_IDLE_CLIENTS_ADDR="+bd.ts.Listener.Addr().String(),
		"SESSIOND_IDLE_CLIENTS_PATH=/v1/sessions/"+sid+"/events/stream?tail=true",
		"SESSIOND_IDLE_CLIENTS_N="+strconv.Itoa(n))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		stdin.Close()
		cmd.Wait()
		b.Fatalf("client process: %q %v", line, err)
	}
	// Let the handlers settle into their wait (background reads started, buffers released).
	time.Sleep(200 * time.Millisecond)
	after := inUse()
	stdin.Close() // the child closes its connections and exits
	if err := cmd.Wait(); err != nil {
		b.Fatalf("client process: %v", err)
	}
	return (float64(after) - float64(before)) / float64(n)
}

// TestIdleSubscriberClients is the client process of BenchmarkIdleSubscribers; it does nothing
// unless started by it. It opens the subscribers, says "ready", and holds them until stdin
// closes.
func TestIdleSubscriberClients(t *testing.T) {
	addr := os.Getenv("SESSIOND_IDLE_CLIENTS_ADDR")
	if addr == "" {
		t.Skip("the client process of BenchmarkIdleSubscribers")
	}
	n, _ := strconv.Atoi(os.Getenv("SESSIOND_IDLE_CLIENTS_N"))
	path := os.Getenv("SESSIOND_IDLE_CLIENTS_PATH")
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Cur < uint64(n)+256 {
		rl.Cur = min(rl.Max, uint64(n)+256)
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	subs := make([]*rawSubscriber, n)
	for i := range subs {
		s, err := dialSubscriber(addr, path, 4096)
		if err != nil {
			t.Fatal(err)
		}
		subs[i] = s
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	for _, s := range subs {
		s.conn.Close()
	}
}
