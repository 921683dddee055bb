package session_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/sqlite"
	"github.com/sessiond/sessiond/store/storetest"
)

// BenchmarkClaimWake: a claim waiting for a run (Service.Claim with a wait) is answered once a
// run is queued in a new session; the figure is the time from the queuing append's return to
// the claim's answer (which includes the claim's own commit). Target: at most 10 ms.
func BenchmarkClaimWake(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	svc := session.New(st, session.Options{})
	defer svc.Close()
	storetest.BenchWake(b, func(ctx context.Context) error {
		c, err := svc.Claim(ctx, store.ClaimFilter{}, 10*time.Second, time.Minute)
		if err == nil && c == nil {
			err = errors.New("the claim waited 10s in vain")
		}
		return err
	}, func(i int) {
		id := fmt.Sprintf("S-w%d", i)
		if err := st.CreateSession(ctx, storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
			b.Fatal(err)
		}
		ev := storetest.RunStatusEvent(b, id, "q", "R-1", "M-1", contract.RunStatusQueued)
		if _, err := st.Append(ctx, id, []*contract.EncodedEvent{ev}, store.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	})
}
