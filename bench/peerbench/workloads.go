package peerbench

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessiond/sessiond/internal/benchkit"
)

// Sizes are how much each workload does in one run. Defaults gives the figures'
// sizes; Scaled shrinks them for a quick run.
type Sizes struct {
	W1Batches     int           // batches of 64 spread over the 8 clients
	W2Events      int           // single events, spread evenly over the 64 writers
	W4Events      int           // events the W4 writer appends, one at a time
	W4Rate        int           // W4 appends per second
	W4Subscribers int           // live subscribers of the W4 session
	W5Events      int           // events of the session W5 reads
	SyncEvents    int           // single events of the sync count (verification mode)
	Settle        time.Duration // pause after W4's subscribers are ready
}

// Defaults returns the sizes of the figures in docs/benchmarks.md.
func Defaults() Sizes {
	return Sizes{W1Batches: 800, W2Events: 6400, W4Events: 400, W4Rate: 100, W4Subscribers: 200,
		W5Events: 100_000, SyncEvents: 200, Settle: 500 * time.Millisecond}
}

// Scaled returns the sizes times f (at least one batch or event per writer; W4's subscribers
// and rate stay).
func (s Sizes) Scaled(f float64) Sizes {
	sc := func(n, least int) int { return max(least, int(math.Round(float64(n)*f))) }
	s.W1Batches = sc(s.W1Batches, 8)
	s.W2Events = sc(s.W2Events, 64)
	s.W4Events = sc(s.W4Events, 10)
	s.W5Events = sc(s.W5Events, 1000)
	s.SyncEvents = sc(s.SyncEvents, 20)
	return s
}

// SizesFromEnv returns Defaults scaled by $PEERBENCH_SCALE (e.g. 0.05 for a smoke run).
func SizesFromEnv() (Sizes, error) {
	s := Defaults()
	if v := os.Getenv("PEERBENCH_SCALE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 100 {
			return s, fmt.Errorf("PEERBENCH_SCALE=%q: want a number in (0, 100]", v)
		}
		s = s.Scaled(f)
	}
	return s, nil
}

// Metric is one measured figure of one run.
type Metric struct {
	Row   string  // the table's row, e.g. "W1 events/s"
	Value float64 // in the row's unit
}

// runID makes session ids unique across the runs of one process (a system lives through
// several workloads and -count rounds).
var runID atomic.Int64

// W1 is 8 clients appending batches of 64 events to 8 sessions (client i to session i). The
// events are made before the clock starts. Figures: events/s; the bytes the server wrote to
// storage and its CPU time, per event.
func W1(ctx context.Context, sys System, ids benchkit.IDs, sz Sizes) ([]Metric, error) {
	const sessions, clients, batch = 8, 8, 64
	run := runID.Add(1)
	sids := make([]string, sessions)
	for i := range sids {
		sids[i] = benchkit.SessionID("w1", run, i)
		if err := sys.CreateSession(ctx, sids[i]); err != nil {
			return nil, err
		}
	}
	// Batch b goes to session b%8 and is sent by client b%8.
	batches := make([][]benchkit.Event, sz.W1Batches)
	gens := make([]*benchkit.Generator, sessions)
	for i := range gens {
		gens[i] = benchkit.NewGenerator(ids, i)
	}
	for b := range batches {
		batches[b] = gens[b%sessions].Batch(sids[b%sessions], batch)
	}
	if err := warmUp(ctx, sys, ids, sids, clients); err != nil {
		return nil, err
	}
	u0 := benchkit.UsageOf(sys.Servers())
	start := time.Now()
	err := parallel(clients, func(c int) error {
		for b := c; b < len(batches); b += clients {
			dups, err := sys.Append(ctx, sids[b%sessions], batches[b])
			if err != nil {
				return err
			}
			if dups != 0 {
				return fmt.Errorf("W1: %d of a batch of new events answered as duplicates", dups)
			}
		}
		return nil
	})
	elapsed := time.Since(start)
	u1 := benchkit.UsageOf(sys.Servers())
	if err != nil {
		return nil, err
	}
	events := float64(len(batches) * batch)
	prefix := "W1 "
	if ids != benchkit.RandomIDs {
		prefix = "W1 " + ids.String() + " "
	}
	ms := []Metric{{prefix + "events/s", events / elapsed.Seconds()}}
	if u0.OK && u1.OK {
		ms = append(ms,
			Metric{prefix + "bytes written/event", float64(u1.WriteBytes-u0.WriteBytes) / events},
			Metric{prefix + "server CPU µs/event", float64((u1.CPU - u0.CPU).Microseconds()) / events})
	}
	return ms, nil
}

// W2 is 64 writers, each appending single events to its own session, one after the other.
// Figures: events/s, p99 of the time from sending an append to its acknowledgement, the
// server's CPU per event (its processes' user and system time, as W1's). It returns the
// events it appended, for W3.
func W2(ctx context.Context, sys System, ids benchkit.IDs, sz Sizes) ([]Metric, [][]benchkit.Event, error) {
	const writers = 64
	run := runID.Add(1)
	per := max(1, sz.W2Events/writers)
	sids := make([]string, writers)
	evs := make([][]benchkit.Event, writers)
	for w := range sids {
		sids[w] = benchkit.SessionID("w2", run, w)
		if err := sys.CreateSession(ctx, sids[w]); err != nil {
			return nil, nil, err
		}
		evs[w] = benchkit.NewGenerator(ids, w).Batch(sids[w], per)
	}
	if err := warmUp(ctx, sys, ids, sids, writers); err != nil {
		return nil, nil, err
	}
	lat := make([][]time.Duration, writers)
	u0 := benchkit.UsageOf(sys.Servers())
	start := time.Now()
	err := parallel(writers, func(w int) error {
		lat[w] = make([]time.Duration, 0, per)
		for i := range evs[w] {
			t := time.Now()
			dups, err := sys.Append(ctx, sids[w], evs[w][i:i+1])
			if err != nil {
				return err
			}
			if dups != 0 {
				return fmt.Errorf("W2: a new event answered as a duplicate")
			}
			lat[w] = append(lat[w], time.Since(t))
		}
		return nil
	})
	elapsed := time.Since(start)
	u1 := benchkit.UsageOf(sys.Servers())
	if err != nil {
		return nil, nil, err
	}
	out := []Metric{
		{"W2 events/s", float64(writers*per) / elapsed.Seconds()},
		{"W2 ack p99 ms", ms(percentile(slices.Concat(lat...), 0.99))},
	}
	if u0.OK && u1.OK {
		out = append(out, Metric{"W2 server CPU µs/event", float64((u1.CPU - u0.CPU).Microseconds()) / float64(writers*per)})
	}
	return out, evs, nil
}

// W3 has W2's 64 writers resend every fifth event they appended (20%), same key and content,
// one at a time. Every one must be answered as a duplicate. Figures: duplicates/s, the
// server's CPU per duplicate (as W2's).
func W3(ctx context.Context, sys System, sent [][]benchkit.Event) ([]Metric, error) {
	var total atomic.Int64
	u0 := benchkit.UsageOf(sys.Servers())
	start := time.Now()
	err := parallel(len(sent), func(w int) error {
		for i := 0; i < len(sent[w]); i += 5 {
			e := sent[w][i]
			sid := sessionOf(e)
			dups, err := sys.Append(ctx, sid, []benchkit.Event{e})
			if err != nil {
				return err
			}
			if dups != 1 {
				return fmt.Errorf("W3: a resent event was not answered as a duplicate")
			}
			total.Add(1)
		}
		return nil
	})
	elapsed := time.Since(start)
	u1 := benchkit.UsageOf(sys.Servers())
	if err != nil {
		return nil, err
	}
	out := []Metric{{"W3 duplicates/s", float64(total.Load()) / elapsed.Seconds()}}
	if u0.OK && u1.OK && total.Load() > 0 {
		out = append(out, Metric{"W3 server CPU µs/duplicate", float64((u1.CPU - u0.CPU).Microseconds()) / float64(total.Load())})
	}
	return out, nil
}

// sessionOf returns the sessionId in an event's JSON.
func sessionOf(e benchkit.Event) string {
	return benchkit.FieldOf(e.Data, "sessionId")
}

// W4 has W4Subscribers live subscribers follow one session while one writer appends single
// events at W4Rate per second. Every subscriber must receive every event. Figures: p99 over
// all deliveries of the time from the writer's acknowledgement to the delivery (0 when the
// delivery came first: the event was visible before its writer heard back), and from the
// writer's send (which includes the append itself).
func W4(ctx context.Context, sys System, ids benchkit.IDs, sz Sizes) ([]Metric, error) {
	run := runID.Add(1)
	sid := benchkit.SessionID("w4", run, 0)
	if err := sys.CreateSession(ctx, sid); err != nil {
		return nil, err
	}
	evs := benchkit.NewGenerator(ids, 0).Batch(sid, sz.W4Events)
	index := make(map[string]int, len(evs))
	for i, e := range evs {
		index[e.Key] = i
	}
	subs := sz.W4Subscribers
	recv := make([][]int64, subs) // unix nanos, by subscriber and event
	var got, unknown atomic.Int64
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for s := range subs {
		recv[s] = make([]int64, len(evs))
		ready, err := sys.Subscribe(sctx, sid, func(data []byte) {
			now := time.Now().UnixNano()
			i, ok := index[benchkit.KeyOf(data)]
			if !ok {
				unknown.Add(1)
				return
			}
			if recv[s][i] == 0 {
				recv[s][i] = now
				got.Add(1)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("W4: subscriber %d: %w", s, err)
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	time.Sleep(sz.Settle)
	sent := make([]int64, len(evs))
	acked := make([]int64, len(evs))
	tick := time.NewTicker(time.Second / time.Duration(sz.W4Rate))
	defer tick.Stop()
	for i := range evs {
		<-tick.C
		sent[i] = time.Now().UnixNano()
		if _, err := sys.Append(ctx, sid, evs[i:i+1]); err != nil {
			return nil, err
		}
		acked[i] = time.Now().UnixNano()
	}
	want := int64(subs * len(evs))
	deadline := time.Now().Add(30 * time.Second)
	for got.Load() < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if n := got.Load(); n < want {
		return nil, fmt.Errorf("W4: %d of %d deliveries after 30 s (%d events not of this run)", n, want, unknown.Load())
	}
	fromAck := make([]time.Duration, 0, want)
	fromSend := make([]time.Duration, 0, want)
	for s := range recv {
		for i, t := range recv[s] {
			fromAck = append(fromAck, time.Duration(max(0, t-acked[i])))
			fromSend = append(fromSend, time.Duration(t-sent[i]))
		}
	}
	return []Metric{
		{"W4 ack→delivery p99 ms", ms(percentile(fromAck, 0.99))},
		{"W4 send→delivery p99 ms", ms(percentile(fromSend, 0.99))},
	}, nil
}

// LoadW5 appends W5Events events to a new session in batches of 500 and returns its id.
func LoadW5(ctx context.Context, sys System, sz Sizes) (string, error) {
	sid := benchkit.SessionID("w5", runID.Add(1), 0)
	if err := sys.CreateSession(ctx, sid); err != nil {
		return "", err
	}
	g := benchkit.NewGenerator(benchkit.RandomIDs, 0)
	for left := sz.W5Events; left > 0; {
		n := min(500, left)
		if _, err := sys.Append(ctx, sid, g.Batch(sid, n)); err != nil {
			return "", fmt.Errorf("W5: load: %w", err)
		}
		left -= n
	}
	return sid, nil
}

// W5 reads session sid (loaded by LoadW5) from its start, the reader decoding every event
// (DecodeEvent, the same rule for every system). Figures: events/s, the server's CPU per event
// read (as W2's); and "W5 whole read events/s": a system's read of the whole session, which
// for a WholeReader is its streamed read (measured after Read, figures as Read's), for the
// others Read itself (the read they have), so that the row compares sessiond's streamed read
// with each peer's side by side.
func W5(ctx context.Context, sys System, sid string, sz Sizes) ([]Metric, error) {
	read := func(prefix string, f func(context.Context, string, int) (int, error)) ([]Metric, error) {
		u0 := benchkit.UsageOf(sys.Servers())
		start := time.Now()
		n, err := f(ctx, sid, sz.W5Events)
		elapsed := time.Since(start)
		u1 := benchkit.UsageOf(sys.Servers())
		if err != nil {
			return nil, err
		}
		out := []Metric{{prefix + " events/s", float64(n) / elapsed.Seconds()}}
		if u0.OK && u1.OK && n > 0 {
			out = append(out, Metric{prefix + " server CPU µs/event", float64((u1.CPU - u0.CPU).Microseconds()) / float64(n)})
		}
		return out, nil
	}
	out, err := read("W5", sys.Read)
	if err != nil {
		return nil, err
	}
	wr, ok := sys.(WholeReader)
	if !ok {
		return append(out, Metric{"W5 whole read events/s", out[0].Value}), nil
	}
	whole, err := read("W5 whole read", wr.ReadWhole)
	if err != nil {
		return nil, err
	}
	return append(out, whole...), nil
}

// warmUp has n writers append one event each to the sessions (writer i to session i%len),
// untimed: every writer's connection is open before the clock starts.
func warmUp(ctx context.Context, sys System, ids benchkit.IDs, sids []string, n int) error {
	return parallel(n, func(i int) error {
		sid := sids[i%len(sids)]
		_, err := sys.Append(ctx, sid, benchkit.NewGenerator(ids, i).Batch(sid, 1))
		return err
	})
}

// parallel runs f(0) … f(n-1) in their own goroutines and returns the first error.
func parallel(n int, f func(i int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// percentile returns the p-quantile of ds (nearest rank); it sorts ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(math.Ceil(p*float64(len(ds)))) - 1
	return ds[max(0, min(i, len(ds)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
