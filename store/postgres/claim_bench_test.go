package postgres

import (
	"context"
	"fmt"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
	"github.com/sessiond/sessiond/store/sqlite"
	"github.com/sessiond/sessiond/store/storetest"
)

// BenchmarkClaim16Workers: 16 workers claim 10,000 queued runs (one per session), on SQLite and
// on PostgreSQL in the same run; one op is the whole drain. Targets (docs/benchmarks.md): at
// least 2,000 claims/s on SQLite and 1,000/s on PostgreSQL, p99 of one claim at most 20 ms.
func BenchmarkClaim16Workers(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		st, err := sqlite.Open(context.Background(), b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		storetest.BenchClaim(b, st, 10000, 16)
	})
	b.Run("postgres", func(b *testing.B) {
		storetest.BenchClaim(b, openURL(b, pgtest.Schema(b)), 10000, 16)
	})
}

// BenchmarkClaimWakeAcrossInstances: a claim waiting on one instance (Service.Claim with a
// wait) is answered once another instance queues a run; the wake travels through PostgreSQL's
// LISTEN/NOTIFY. The figure is the time from the queuing append's return to the claim's answer
// (which includes the claim's own commit). Target: at most 10 ms.
func BenchmarkClaimWakeAcrossInstances(b *testing.B) {
	ctx := context.Background()
	url := pgtest.Schema(b)
	waiter, queuer := openURL(b, url), openURL(b, url)
	svc := session.New(waiter, session.Options{})
	defer svc.Close()
	storetest.BenchWake(b, waitingClaim(svc), func(i int) {
		id := fmt.Sprintf("S-w%d", i)
		if err := queuer.CreateSession(ctx, storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
			b.Fatal(err)
		}
		ev := storetest.RunStatusEvent(b, id, "q", "R-1", "M-1", contract.RunStatusQueued)
		if _, err := queuer.Append(ctx, id, []*contract.EncodedEvent{ev}, store.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	})
}
