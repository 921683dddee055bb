//go:build unix

package sqlite

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// BenchmarkAppendUsageRollup measures what the usage rollup costs an append: W1's shape (8
// writers, batches of 64 events, a session each) with an agent's events (storetest.UsageLog:
// about a third of them usage, tool and run status events, which the rollup counts), with the
// rollup written in the append's commit ("rollup") and with its writes skipped ("none"), one
// after the other in the same run. Compare the two events/s and CPU µs per event of each
// -count round.
//
//	go test ./store/sqlite -run '^$' -bench AppendUsageRollup -benchtime 51200x -count 5
func BenchmarkAppendUsageRollup(b *testing.B) {
	for _, mode := range []string{"rollup", "none"} {
		b.Run(mode, func(b *testing.B) {
			const sessions, batch = 8, 64
			ids := make([]string, sessions)
			for i := range ids {
				ids[i] = fmt.Sprintf("S-%d", i)
			}
			st := benchOpen(b, b.TempDir(), ids...)
			defer st.Close()
			st.noUsage = mode == "none"
			per := (b.N + sessions - 1) / sessions
			evs := make([][]*contract.EncodedEvent, sessions)
			counted := 0
			for i, id := range ids {
				evs[i] = storetest.UsageLog(rand.New(rand.NewPCG(uint64(i), 1)), id, per, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), 24*time.Hour)
				for _, e := range evs[i] {
					if store.UsageCounts(e.EventType) {
						counted++
					}
				}
			}
			b.ResetTimer()
			cpu0 := cpuTime()
			d := appendPerSession(b, st, ids, evs, batch, store.AppendOptions{})
			cpu := cpuTime() - cpu0
			b.StopTimer()
			report(b, per*sessions, d)
			b.ReportMetric(float64(cpu.Microseconds())/float64(per*sessions), "cpu-µs/event")
			b.ReportMetric(float64(counted)/float64(per*sessions), "counted/event")
		})
	}
}

// cpuTime is the process's CPU time so far (user and system): under load, what an append
// costs shows better in it than in events/s.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
