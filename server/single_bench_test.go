package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/benchkit"
	"github.com/sessiond/sessiond/internal/testenv"
)

// BenchmarkHTTPAppendSingle64Sessions is W2 of the peer benchmark (docs/benchmarks.md) in
// process: 64 writers, each POSTing one event at a time (NDJSON, the peer benchmark's ~470-byte
// agent events with UUIDv4 ids and keys) to its own session and waiting for the 201 before the
// next, through a real loopback server with metrics on (as sessiond serve runs) into SQLite
// with fsync. The writers are raw keep-alive connections that send prebuilt requests and read
// the answer with a minimal parser, so that nearly all of the process's CPU is the server's:
// cpu-µs/event is the process's CPU per event (the writers' share is their two syscalls), the
// figure the per-request work of the append path moves, with the allocations per event.
//
//	go test ./server/ -run '^$' -bench HTTPAppendSingle64Sessions -benchtime 12800x -count 5
func BenchmarkHTTPAppendSingle64Sessions(b *testing.B) {
	const writers = 64
	bd := setupObserved(b)
	per := max((b.N+writers-1)/writers, 50)
	sids := make([]string, writers)
	reqs := make([][][]byte, writers)
	for w := range sids {
		sids[w] = fmt.Sprintf("S-single-%d", w)
		bd.createSession(b, sids[w])
		g := benchkit.NewGenerator(benchkit.RandomIDs, w)
		reqs[w] = make([][]byte, per)
		for i := range reqs[w] {
			reqs[w][i] = singleAppendRequest(sids[w], g.Next(sids[w]).Data)
		}
	}
	conns := make([]net.Conn, writers)
	for w := range conns {
		c, err := net.Dial("tcp", bd.ts.Listener.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		conns[w] = c
	}
	errs := make([]error, writers)
	var wg sync.WaitGroup
	b.ReportAllocs() // per event (an op), the writers' included: their reads allocate the body
	b.ResetTimer()
	cpu0 := testenv.ProcessCPU()
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			br := bufio.NewReaderSize(conns[w], 4096)
			for _, req := range reqs[w] {
				if _, err := conns[w].Write(req); err != nil {
					errs[w] = err
					return
				}
				if err := readCreated(br); err != nil {
					errs[w] = fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := testenv.ProcessCPU() - cpu0
	b.StopTimer()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	n := float64(writers * per)
	b.ReportMetric(n/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/event")
}

// singleAppendRequest is the HTTP/1.1 request a Go client sends to append one NDJSON event.
func singleAppendRequest(sid string, event []byte) []byte {
	var req []byte
	req = append(req, "POST /v1/sessions/"+sid+"/events HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: "...)
	req = strconv.AppendInt(req, int64(len(event)+1), 10)
	req = append(req, "\r\nContent-Type: application/x-ndjson\r\nAccept-Encoding: gzip\r\n\r\n"...)
	req = append(req, event...)
	return append(req, '\n')
}

// readCreated reads one response off br and fails unless it is a 201 with a body of
// Content-Length bytes.
func readCreated(br *bufio.Reader) error {
	status, err := br.ReadSlice('\n')
	if err != nil {
		return err
	}
	ok := bytes.HasPrefix(status, []byte("HTTP/1.1 201 "))
	length := -1
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if v, found := bytes.CutPrefix(line, []byte("Content-Length: ")); found {
			if length, err = strconv.Atoi(string(bytes.TrimSpace(v))); err != nil {
				return err
			}
		}
	}
	if length < 0 {
		return fmt.Errorf("a response without Content-Length: %q", status)
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(br, body); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("append: %s%s", status, body)
	}
	return nil
}
