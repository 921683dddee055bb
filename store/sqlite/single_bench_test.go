package sqlite

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/internal/testenv"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// BenchmarkAppendSingle64Sessions is W2 of docs/benchmarks.md at the store, without HTTP: 64
// writers, each appending single events of about 700 bytes (UUIDv4 eventId and idempotency
// key) to its own session, each waiting for its answer before the next. Besides events/s it
// reports what the process wrote per event (WAL frames and checkpoints: wchar), its CPU per
// event, and how the writer and the syncer grouped the appends: group commits per sync and
// events per group commit. fenced=false appends events without a runId and no options;
// fenced=true appends events with a runId, fenced without a lease, as every append of the
// HTTP API is (session.AppendWith) and as the peer benchmark's events are: the run's lease is
// then checked for each append.
func BenchmarkAppendSingle64Sessions(b *testing.B) {
	for _, fenced := range []bool{false, true} {
		b.Run(fmt.Sprintf("fenced=%t", fenced), func(b *testing.B) { benchSingle64(b, fenced) })
	}
}

func benchSingle64(b *testing.B, fenced bool) {
	const writers = 64
	ids := make([]string, writers)
	for i := range ids {
		ids[i] = fmt.Sprintf("S-%d", i)
	}
	var groups, syncs, events atomic.Int64
	st := benchOpenWith(b, b.TempDir(), Options{Observer: store.Observer{
		GroupCommitted: func(_, n int) { groups.Add(1); events.Add(int64(n)) },
		Synced:         func(time.Duration, int) { syncs.Add(1) },
	}}, ids...)
	defer st.Close()
	per := max((b.N+writers-1)/writers, 200)
	evs := make([][]*contract.EncodedEvent, writers)
	for w, id := range ids {
		evs[w] = make([]*contract.EncodedEvent, per)
		for i := range evs[w] {
			if fenced {
				evs[w][i] = storetest.RunEvent(b, id, uuid.NewString(), "run-1", benchChunk+benchChunk)
			} else {
				evs[w][i] = storetest.EventWithID(b, id, uuid.NewString(), uuid.NewString(), benchChunk+benchChunk)
			}
		}
	}
	groups.Store(0)
	syncs.Store(0)
	events.Store(0)
	written, cpu := bytesWritten(), testenv.ProcessCPU()
	b.ResetTimer()
	var opts store.AppendOptions
	if fenced {
		opts.Fence = &store.Fence{}
	}
	d := appendPerSession(b, st, ids, evs, 1, opts)
	b.StopTimer()
	n := per * writers
	report(b, n, d)
	b.ReportMetric(float64(bytesWritten()-written)/float64(n), "written-B/event")
	b.ReportMetric(float64((testenv.ProcessCPU()-cpu).Microseconds())/float64(n), "cpu-µs/event")
	b.ReportMetric(float64(groups.Load())/float64(max(syncs.Load(), 1)), "commits/sync")
	b.ReportMetric(float64(events.Load())/float64(max(groups.Load(), 1)), "events/commit")
}
