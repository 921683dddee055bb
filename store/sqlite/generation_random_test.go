package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// assertUniqueRows fails the test for every idempotency key or event id that a session's log
// holds twice.
func assertUniqueRows(t *testing.T, dir string) {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(filepath.Join(dir, DBFile), roleReader))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, col := range []string{"idem_key", "event_id"} {
		rows, err := db.Query(`SELECT sk, ` + col + `, count(*) FROM (SELECT sk, ` + col + ` FROM events UNION ALL SELECT sk, ` + col + ` FROM event_tail_live) GROUP BY sk, ` + col + ` HAVING count(*) > 1`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var sk, n int64
			var v string
			rows.Scan(&sk, &v, &n)
			t.Errorf("DB holds %s %q %d times in sk %d", col, v, n, sk)
		}
		rows.Close()
	}
}

// randomizedSeeds is how many random histories TestGenerationsRandomized plays.
const randomizedSeeds = 4

// TestGenerationsRandomized plays random histories against a store with generations of 4
// events (and a tail moved into events at 1, 2, 5 or 1024 events): two writers per session append batches that cross generations, with repeats of
// stored events, batches refused by a conflict, conditional repeats, eventIds reused under new
// keys, compactions and restarts, under filter budgets from 1 byte to 64 MiB. Every repeat must
// be answered as a duplicate of its sequence, every reuse as a conflict, and at the end no log
// holds a key or an id twice.
func TestGenerationsRandomized(t *testing.T) {
	for seed := int64(1); seed <= randomizedSeeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			old := maxFilterBytes
			maxFilterBytes = []int{1, 700, 3000, 64 << 20}[seed%4]
			t.Cleanup(func() { maxFilterBytes = old })
			ctx := context.Background()
			dir := t.TempDir()
			setGenerationBits(t, dir, 2)
			setTailRows(t, dir, []int{1, 5, 1024, 2}[seed%4])
			st, err := Open(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			const nsess = 4
			var mu sync.Mutex
			hist := map[string][]*contract.EncodedEvent{}
			var ids []string
			for i := range nsess {
				id := fmt.Sprintf("S%d", i)
				ids = append(ids, id)
				if err := st.CreateSession(ctx, storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
					t.Fatal(err)
				}
			}
			var ctr atomic.Int64
			var bad atomic.Int64
			for phase := range 8 {
				var wg sync.WaitGroup
				for w := range nsess * 2 {
					id := ids[w%nsess]
					wr := rand.New(rand.NewSource(rng.Int63()))
					wg.Add(1)
					go func() {
						defer wg.Done()
						pick := func() (*contract.EncodedEvent, int64, bool) {
							mu.Lock()
							defer mu.Unlock()
							h := hist[id]
							if len(h) == 0 {
								return nil, 0, false
							}
							i := wr.Intn(len(h))
							if h[i] == nil {
								return nil, 0, false
							}
							return h[i], int64(i), true
						}
						for range 40 {
							switch k := wr.Intn(10); {
							case k < 5: // batch of new events with repeats, maybe refused
								n := 1 + wr.Intn(6)
								var batch []*contract.EncodedEvent
								var repeats = map[int]int64{}
								for range n {
									if old, seq, ok := pick(); ok && wr.Intn(4) == 0 {
										repeats[len(batch)] = seq
										batch = append(batch, old)
										continue
									}
									c := ctr.Add(1)
									batch = append(batch, storetest.EventWithID(t, id, fmt.Sprintf("id-%d", c), fmt.Sprintf("key-%d", c), "x"))
								}
								refuse := wr.Intn(5) == 0
								if refuse {
									if old, _, ok := pick(); ok {
										batch = append(batch, storetest.EventWithID(t, id, old.EventID, old.IdempotencyKey, "changed"))
									} else {
										refuse = false
									}
								}
								res, err := st.Append(ctx, id, batch, store.AppendOptions{})
								if refuse {
									var ce *store.ConflictError
									if !errors.As(err, &ce) {
										t.Errorf("refused batch: %v", err)
										bad.Add(1)
									}
									continue
								}
								if err != nil {
									t.Errorf("append: %v", err)
									bad.Add(1)
									continue
								}
								mu.Lock()
								for i, r := range res {
									if seq, ok := repeats[i]; ok {
										if !r.Duplicate || r.Sequence != seq {
											t.Errorf("%s repeat of seq %d answered %+v", id, seq, r)
											bad.Add(1)
										}
										continue
									}
									if r.Duplicate {
										continue
									}
									for int64(len(hist[id])) <= r.Sequence {
										hist[id] = append(hist[id], nil)
									}
									hist[id][r.Sequence] = batch[i]
								}
								mu.Unlock()
							case k < 7:
								old, seq, ok := pick()
								if !ok || old == nil {
									continue
								}
								exp := int64(-1)
								var opts store.AppendOptions
								if wr.Intn(2) == 0 {
									opts.ExpectedSequence = &exp
								}
								res, err := st.Append(ctx, id, []*contract.EncodedEvent{old}, opts)
								if err != nil || !res[0].Duplicate || res[0].Sequence != seq {
									t.Errorf("%s repeat (exp=%v) of seq %d: %+v %v", id, opts.ExpectedSequence != nil, seq, res, err)
									bad.Add(1)
								}
							default:
								old, seq, ok := pick()
								if !ok || old == nil {
									continue
								}
								c := ctr.Add(1)
								_, err := st.Append(ctx, id, []*contract.EncodedEvent{storetest.EventWithID(t, id, old.EventID, fmt.Sprintf("fresh-%d", c), "x")}, store.AppendOptions{})
								var ce *store.ConflictError
								if !errors.As(err, &ce) || ce.Reason != store.ConflictEventID || ce.Existing != seq {
									t.Errorf("%s reused id of seq %d: %v", id, seq, err)
									bad.Add(1)
								}
							}
						}
					}()
				}
				wg.Wait()
				if bad.Load() > 0 {
					break
				}
				if rng.Intn(3) == 0 {
					id := ids[rng.Intn(nsess)]
					mu.Lock()
					h := hist[id]
					through := int64(rng.Intn(len(h)/2 + 1))
					if through < int64(len(h)) {
						for i := int64(0); i <= through; i++ {
							h[i] = nil
						}
					} else {
						through = -1
					}
					mu.Unlock()
					if through >= 0 {
						if _, err := st.CompactEvents(ctx, id, through); err != nil {
							t.Fatal(err)
						}
					}
				}
				if rng.Intn(2) == 0 || phase == 3 {
					if err := st.Close(); err != nil {
						t.Fatal(err)
					}
					if st, err = Open(ctx, dir); err != nil {
						t.Fatal(err)
					}
				}
			}
			st.Close()
			assertUniqueRows(t, dir)
		})
	}
}
