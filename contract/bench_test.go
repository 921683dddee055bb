package contract

import (
	"bytes"
	"os"
	"testing"
)

// benchEvents returns the typical events of testdata/bench_events.jsonl: a mix of kinds, about
// 370 to 530 bytes each, all valid.
func benchEvents(tb testing.TB) [][]byte {
	tb.Helper()
	data, err := os.ReadFile("testdata/bench_events.jsonl")
	if err != nil {
		tb.Fatal(err)
	}
	var out [][]byte
	for _, l := range bytes.Split(data, []byte("\n")) {
		if len(l) > 0 {
			out = append(out, l)
		}
	}
	return out
}

// TestBenchEventsValid makes sure the benchmark measures the valid path on both sides.
func TestBenchEventsValid(t *testing.T) {
	ev, _ := oracles(t)
	for i, e := range benchEvents(t) {
		if err := Validate(KindEvent, e, Limits{}); err != nil {
			t.Errorf("event %d: %v", i, err)
		}
		if ok, err := oracleValid(ev, e); !ok {
			t.Errorf("event %d: oracle: %v", i, err)
		}
	}
}

func reportEventsPerSec(b *testing.B, n int) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(n)/s, "events/s")
	}
}

// BenchmarkValidateEvent measures event validation with decoding included, ours against the
// oracle library with the compiled seed schema, on the same events.
func BenchmarkValidateEvent(b *testing.B) {
	events := benchEvents(b)
	ev, _ := oracles(b)
	var size int64
	for _, e := range events {
		size += int64(len(e))
	}
	b.Run("sessiond", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(size / int64(len(events)))
		n := 0
		for b.Loop() {
			if err := Validate(KindEvent, events[n%len(events)], Limits{}); err != nil {
				b.Fatal(err)
			}
			n++
		}
		reportEventsPerSec(b, n)
	})
	b.Run("oracle", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(size / int64(len(events)))
		n := 0
		for b.Loop() {
			if ok, err := oracleValid(ev, events[n%len(events)]); !ok {
				b.Fatal(err)
			}
			n++
		}
		reportEventsPerSec(b, n)
	})
}

// BenchmarkCheckEvent measures validation plus canonical encoding (what the server does on
// append).
func BenchmarkCheckEvent(b *testing.B) {
	events := benchEvents(b)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if _, err := CheckEvent(events[n%len(events)], Limits{}); err != nil {
			b.Fatal(err)
		}
		n++
	}
	reportEventsPerSec(b, n)
}

// BenchmarkDecodeEvent measures validation plus decoding into the Go types.
func BenchmarkDecodeEvent(b *testing.B) {
	events := benchEvents(b)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if _, err := DecodeEvent(events[n%len(events)], Limits{}); err != nil {
			b.Fatal(err)
		}
		n++
	}
	reportEventsPerSec(b, n)
}
