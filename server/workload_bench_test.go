package server_test

// The workloads of issue 20 against sessiond alone (SQLite, fsync before every ack), through a
// real loopback HTTP server, with ~470-byte message events:
//
//	W1  8 sessions, 8 clients, batches of 64 events (one client per session)
//	W2  64 sessions, 64 writers, one event per request (ack latency p99)
//	W3  W2, then 20% of its events sent again with the same keys and bytes (duplicates/s;
//	    dup-cpu-µs/event: the process's CPU per duplicate, server and client)
//	W5  one 100,000-event session read from the start (GET .../events, pages of 10,000)
//
// ids=uuid: eventId and idempotencyKey are random UUIDv4 (what many runtimes send, the
// headline); ids=counting: "ev-<n>" and "key-<n>" (the best case: every key lands at the end
// of every index).
//
// written-B/event is what the process wrote to storage during the timed part, divided by the
// events appended: the delta of write_bytes in /proc/self/io (pages the process dirtied in
// the page cache: the WAL's frames and the checkpointer's copies into the database file; the
// HTTP client in the same process writes nothing to storage). 0 where /proc is missing.
//
//	go test -run '^$' -bench 'Workload' -benchtime 1x -count 3 ./server/

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sessiond/sessiond/internal/testenv"
	"github.com/sessiond/sessiond/server"
)

// workloadEventSize is the size of one workload event as sent.
const workloadEventSize = 470

// idStyle makes the eventId and idempotency key of event n of a run.
type idStyle struct {
	name string
	ids  func(n int64) (id, key string)
}

var idStyles = []idStyle{
	{"uuid", func(int64) (string, string) { return uuid.NewString(), uuid.NewString() }},
	{"counting", func(n int64) (string, string) {
		s := strconv.FormatInt(n, 10)
		return "ev-" + s, "key-" + s
	}},
}

// workloadEvent appends a valid ~470-byte message event of session sid with the id and key.
func workloadEvent(buf []byte, sid, id, key string) []byte {
	start := len(buf)
	buf = append(buf, `{"contract":"AgentSessionEvent","eventId":"`...)
	buf = append(buf, id...)
	buf = append(buf, `","sessionId":"`...)
	buf = append(buf, sid...)
	buf = append(buf, `","sequence":0,"idempotencyKey":"`...)
	buf = append(buf, key...)
	buf = append(buf, `","occurredAt":"2026-03-01T12:00:00Z","eventType":"message","payload":{"messageId":"m-`...)
	buf = append(buf, id...)
	buf = append(buf, `","role":"assistant","operation":"append","parts":[{"type":"text","text":"`...)
	const tail = `"}]}}`
	for pad := workloadEventSize - (len(buf) - start) - len(tail); pad > 0; pad-- {
		buf = append(buf, 'a'+byte(pad%26))
	}
	return append(buf, tail...)
}

// storageWritten is the process's write_bytes from /proc/self/io; 0 where unavailable.
func storageWritten() int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// workloadRun times a run of appends; workloadTotals adds the runs of every round up.
type workloadRun struct {
	start time.Time
	w0    int64
	cpu0  time.Duration
}

func startRun() workloadRun {
	return workloadRun{start: time.Now(), w0: storageWritten(), cpu0: testenv.ProcessCPU()}
}

// workloadTotals sums the runs of all of a benchmark's rounds, so that its figures cover every
// round (reported once after the b.N loop), not the last one alone.
type workloadTotals struct {
	events  int64
	took    time.Duration
	written int64
	cpu     time.Duration
}

// add ends run r, which appended events, and adds it to the totals.
func (t *workloadTotals) add(r workloadRun, events int64) {
	t.took += time.Since(r.start)
	t.written += storageWritten() - r.w0
	t.cpu += testenv.ProcessCPU() - r.cpu0
	t.events += events
}

// report reports events/s (named unit), written-B/event and cpu-µs/event over all the runs.
func (t workloadTotals) report(b *testing.B, unit string) {
	b.ReportMetric(float64(t.events)/t.took.Seconds(), unit)
	b.ReportMetric(float64(t.written)/float64(t.events), "written-B/event")
	b.ReportMetric(float64(t.cpu.Microseconds())/float64(t.events), "cpu-µs/event")
}

// post sends body and checks the status.
func post(hc *http.Client, url, ctype string, body []byte, want int) error {
	resp, err := hc.Post(url, ctype, bytes.NewReader(body))
	if err != nil {
		return err
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, data)
	}
	return nil
}

// BenchmarkWorkload runs W1, W2 with W3, and W5 for each id style.
func BenchmarkWorkload(b *testing.B) {
	for _, ids := range idStyles {
		b.Run("W1/ids="+ids.name, func(b *testing.B) { benchW1(b, ids) })
		b.Run("W2W3/ids="+ids.name, func(b *testing.B) { benchW2W3(b, ids) })
		b.Run("W5/ids="+ids.name, func(b *testing.B) { benchW5(b, ids) })
	}
}

// parallel runs fn(c) for c in [0, n) at once and returns the first error.
func parallel(n int, fn func(c int) error) error {
	var wg sync.WaitGroup
	var first atomic.Value
	for c := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(c); err != nil {
				first.CompareAndSwap(nil, err)
			}
		}()
	}
	wg.Wait()
	err, _ := first.Load().(error)
	return err
}

// benchW1: 8 clients, each POSTing NDJSON batches of 64 to its own session; one op is 80
// batches per client (40,960 events). The bodies are built before the timer starts.
func benchW1(b *testing.B, ids idStyle) {
	const clients, batch, batches = 8, 64, 80
	bd := setup(b, server.Options{})
	hc := &http.Client{Transport: benchTransport(clients)}
	defer hc.CloseIdleConnections()
	var n int64
	var total workloadTotals
	for round := 0; round < b.N; round++ {
		b.StopTimer()
		bodies := make([][][]byte, clients)
		urls := make([]string, clients)
		for c := range clients {
			sid := fmt.Sprintf("S-w1-%d-%d", round, c)
			bd.createSession(b, sid)
			urls[c] = bd.ts.URL + "/v1/sessions/" + sid + "/events"
			for range batches {
				var body []byte
				for range batch {
					id, key := ids.ids(n)
					n++
					body = append(workloadEvent(body, sid, id, key), '\n')
				}
				bodies[c] = append(bodies[c], body)
			}
		}
		b.StartTimer()
		run := startRun()
		err := parallel(clients, func(c int) error {
			for _, body := range bodies[c] {
				if err := post(hc, urls[c], "application/x-ndjson", body, http.StatusCreated); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		total.add(run, clients*batch*batches)
	}
	total.report(b, "events/s")
}

// benchW2W3: 64 writers, each POSTing single events to its own session (W2, 200 each per op),
// then each sending 20% of its events again, same bytes (W3: every answer a duplicate).
func benchW2W3(b *testing.B, ids idStyle) {
	const writers, per = 64, 200
	bd := setup(b, server.Options{})
	hc := &http.Client{Transport: benchTransport(writers)}
	defer hc.CloseIdleConnections()
	var n int64
	var (
		total, dups workloadTotals
		all         []time.Duration
	)
	for round := 0; round < b.N; round++ {
		b.StopTimer()
		bodies := make([][][]byte, writers)
		urls := make([]string, writers)
		for c := range writers {
			sid := fmt.Sprintf("S-w2-%d-%d", round, c)
			bd.createSession(b, sid)
			urls[c] = bd.ts.URL + "/v1/sessions/" + sid + "/events"
			for range per {
				id, key := ids.ids(n)
				n++
				bodies[c] = append(bodies[c], workloadEvent(nil, sid, id, key))
			}
		}
		lat := make([][]time.Duration, writers)
		b.StartTimer()
		run := startRun()
		err := parallel(writers, func(c int) error {
			for _, body := range bodies[c] {
				t0 := time.Now()
				if err := post(hc, urls[c], "application/json", body, http.StatusCreated); err != nil {
					return err
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		total.add(run, writers*per)
		all = append(all, slices.Concat(lat...)...)

		run = startRun()
		err = parallel(writers, func(c int) error {
			for i := 0; i < per; i += 5 { // 20%
				if err := post(hc, urls[c], "application/json", bodies[c][i], http.StatusOK); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		dups.add(run, writers*per/5)
	}
	total.report(b, "events/s")
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(dups.events)/dups.took.Seconds(), "dups/s")
	b.ReportMetric(float64(dups.cpu.Microseconds())/float64(dups.events), "dup-cpu-µs/event")
}

// benchW5: one session of 100,000 events (loaded once, untimed), read from the start over HTTP
// in pages of 10,000 by one client; one op is one full read.
func benchW5(b *testing.B, ids idStyle) {
	const total, batch = 100_000, 1000
	bd := setup(b, server.Options{})
	sid := "S-w5"
	bd.createSession(b, sid)
	url := bd.ts.URL + "/v1/sessions/" + sid + "/events"
	hc := &http.Client{Transport: benchTransport(1)}
	defer hc.CloseIdleConnections()
	var body []byte
	for k := int64(0); k < total; k += batch {
		body = body[:0]
		for i := k; i < k+batch; i++ {
			id, key := ids.ids(i)
			body = append(workloadEvent(body, sid, id, key), '\n')
		}
		if err := post(hc, url, "application/x-ndjson", body, http.StatusCreated); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	start := time.Now()
	cpu0 := testenv.ProcessCPU()
	var read int64
	for range b.N {
		after := int64(-1)
		for after < total-1 {
			resp, err := hc.Get(url + "?limit=10000&after=" + strconv.FormatInt(after, 10))
			if err != nil {
				b.Fatal(err)
			}
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Fatalf("read: %d %v %.200s", resp.StatusCode, err, data)
			}
			n := int64(bytes.Count(data, []byte(`"contract":"AgentSessionEvent"`)))
			if n == 0 {
				b.Fatalf("read after %d: no events: %.200s", after, data)
			}
			after += n
			read += n
		}
	}
	d := time.Since(start)
	b.ReportMetric(float64(read)/d.Seconds(), "events/s")
	b.ReportMetric(float64((testenv.ProcessCPU()-cpu0).Microseconds())/float64(read), "cpu-µs/event")
}
