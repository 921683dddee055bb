package sqlite

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/internal/testenv"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// BenchmarkAppendRunBatches appends the shape of an imported transcript: 4 writers, each to a
// session of its own, append batches of 490 events made of 70 runs of 7 events (the run's
// running status, five terminal chunks in it, its completed status), fenced without a lease
// and with a heartbeat, as the server appends a batch. Each batch creates and ends 70 runs, so
// run writes and their change rows weigh as they do in an import. ns/op is per event; it also
// reports the process's CPU time per event.
func BenchmarkAppendRunBatches(b *testing.B) {
	const sessions, runsPerBatch, perRun = 4, 70, 7
	const batch = runsPerBatch * perRun
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("S-%d", i)
	}
	st := benchOpen(b, b.TempDir(), ids...)
	defer st.Close()
	batches := max((b.N+sessions*batch-1)/(sessions*batch), 1)
	evs := make([][][]*contract.EncodedEvent, sessions)
	for i, id := range ids {
		prefix := uuid.NewString()
		for k := range batches {
			list := make([]*contract.EncodedEvent, 0, batch)
			for r := range runsPerBatch {
				run := fmt.Sprintf("run-%s-%d-%d", prefix, k, r)
				key := func(j int) string { return fmt.Sprintf("%s-%d", run, j) }
				list = append(list, storetest.RunStatusEvent(b, id, key(0), run, "msg-"+run, "running"))
				for j := 1; j < perRun-1; j++ {
					list = append(list, storetest.RunEvent(b, id, key(j), run, benchChunk))
				}
				list = append(list, storetest.RunStatusEvent(b, id, key(perRun-1), run, "msg-"+run, "completed"))
			}
			evs[i] = append(evs[i], list)
		}
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	b.ResetTimer()
	start, cpu := time.Now(), testenv.ProcessCPU()
	for i, id := range ids {
		wg.Go(func() {
			for _, list := range evs[i] {
				opts := store.AppendOptions{Heartbeat: time.Now(), Fence: &store.Fence{}}
				if _, err := st.Append(ctx, id, list, opts); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	d, used := time.Since(start), testenv.ProcessCPU()-cpu
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	n := sessions * batches * batch
	report(b, n, d)
	b.ReportMetric(float64(used.Microseconds())/float64(n), "cpu-µs/event")
}
