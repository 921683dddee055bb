package searchtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/search"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// Corpus is the generated store of the search benchmarks: Sessions sessions of
// Events/Sessions events each, written deterministically (seed 1), with a stated vocabulary so
// that the frequency of every query's terms is known:
//
//   - every event carries 8 filler words drawn uniformly from 2,000 ("lex0000" … "lex1999"):
//     each in about 0.4% of the events;
//   - the common word "deploy" is in exactly 20% of the events;
//   - the phrase "flaky integration test" is in exactly 1%; its words also occur apart, in
//     another order ("test integration flaky"), in another 1%;
//   - 1% of the events hold a rare word of their own, "rare" and six digits: RareWord(n), for
//     n below Events/100, is in exactly one event;
//   - the kinds are message (40%), tool (20%: shell, read_file, grep or write_file, with a
//     command "cd src/pkgNNN && go test ./..." as input), terminal (20%), diff (10%: path
//     src/pkgNNN/fileNNN.go, 500 packages of 1,000 files) and error (10%: codes TOOL_TIMEOUT,
//     RATE_LIMITED, CONTEXT_OVERFLOW, PROVIDER_ERROR, SANDBOX_DENIED);
//   - which event holds what is spread by a bijection of the events (scramble), so that the
//     terms are independent of session, project and time;
//   - sessions belong to 10 projects (p0 … p9, session i in p(i mod 10)), 20 agents and two
//     roles; event k of session s occurred at Base + (k*Sessions + s) seconds, so every
//     session has events across the whole time range.
type Corpus struct {
	Sessions, Events int
}

// Base is the occurredAt of the corpus's first event.
var Base = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// ErrorCodes are the codes of the corpus's error events, in rotation.
var ErrorCodes = []string{"TOOL_TIMEOUT", "RATE_LIMITED", "CONTEXT_OVERFLOW", "PROVIDER_ERROR", "SANDBOX_DENIED"}

// RareWord returns the n-th rare word.
func RareWord(n int) string { return fmt.Sprintf("rare%06d", n) }

// Rare returns how many rare words the corpus has.
func (c Corpus) Rare() int { return c.Events / 100 }

// SessionID returns the id of session s.
func SessionID(s int) string { return fmt.Sprintf("S-corpus-%05d", s) }

// Write writes the corpus into st, session by session, calling progress (when not nil) with
// the events written so far.
func (c Corpus) Write(ctx context.Context, tb testing.TB, st store.Store, progress func(done int)) {
	per := c.Events / c.Sessions
	done := 0
	for s := range c.Sessions {
		sess := storetest.NewSession(SessionID(s), storetest.SessionSpec{Project: fmt.Sprintf("p%d", s%10),
			AgentID: fmt.Sprintf("agent-%02d", s%20), Role: []string{"implementer", "reviewer"}[s%2]})
		if err := st.CreateSession(ctx, sess); err != nil {
			tb.Fatal(err)
		}
		evs := make([]*contract.EncodedEvent, 0, per)
		for k := range per {
			evs = append(evs, c.event(tb, s, k))
		}
		for len(evs) > 0 {
			n := min(len(evs), store.MaxBatchEvents)
			if _, err := st.Append(ctx, SessionID(s), evs[:n], store.AppendOptions{}); err != nil {
				tb.Fatalf("write the corpus: session %d: %v", s, err)
			}
			evs = evs[n:]
		}
		done += per
		if progress != nil {
			progress(done)
		}
	}
}

// event returns event k of session s.
func (c Corpus) event(tb testing.TB, s, k int) *contract.EncodedEvent {
	g := k*c.Sessions + s // the event's place in time
	h := c.scramble(g)    // what it holds: spread evenly over sessions, projects and time
	r := rand.New(rand.NewPCG(uint64(g), 1))
	words := make([]string, 0, 12)
	for range 8 {
		words = append(words, fmt.Sprintf("lex%04d", r.IntN(2000)))
	}
	if h%5 == 0 {
		words = append(words, "deploy")
	}
	text := ""
	switch h % 100 {
	case 7:
		text = "the flaky integration test failed again"
	case 57:
		text = "test integration flaky order"
	case 31:
		text = "found " + RareWord(h/100)
	}
	sentence := fmt.Sprint(words)
	sentence = sentence[1:len(sentence)-1] + " " + text
	pkg := fmt.Sprintf("src/pkg%03d", r.IntN(500))
	raw := func(v any) contract.RawJSON { b, _ := json.Marshal(v); return b }
	var p contract.Payload
	switch h % 10 {
	case 0, 1, 2, 3:
		p = &contract.MessagePayload{MessageID: fmt.Sprintf("m-%d", k), Role: []string{"user", "assistant"}[k%2], Operation: "append",
			Parts: []contract.RawJSON{raw(map[string]string{"type": "text", "text": sentence})}}
	case 4, 5:
		p = &contract.ToolPayload{ToolCallID: fmt.Sprintf("tc-%d", k), ToolName: []string{"shell", "read_file", "grep", "write_file"}[r.IntN(4)], Status: "completed",
			Input: raw(map[string]string{"command": "cd " + pkg + " && go test ./..."}), Output: raw(map[string]string{"stdout": sentence})}
	case 6, 7:
		p = &contract.TerminalPayload{TerminalID: "term-1", Stream: "stdout", Chunk: sentence}
	case 8:
		msg := sentence
		p = &contract.DiffPayload{Path: fmt.Sprintf("%s/file%03d.go", pkg, r.IntN(1000)), Status: "modified", Patch: &msg}
	default:
		p = &contract.ErrorPayload{Code: ErrorCodes[r.IntN(len(ErrorCodes))], Message: sentence, Retryable: true}
	}
	key := fmt.Sprintf("%s-%d", SessionID(s), k)
	e := &contract.Event{Contract: "AgentSessionEvent", EventID: "ev-" + key, SessionID: SessionID(s), IdempotencyKey: key,
		OccurredAt: Base.Add(time.Duration(g) * time.Second).Format(time.RFC3339), EventType: p.EventType(), Payload: p}
	data, err := contract.Marshal(e)
	if err != nil {
		tb.Fatal(err)
	}
	ev, err := contract.CheckEvent(data, contract.Limits{})
	if err != nil {
		tb.Fatalf("the corpus event %s: %v", data, err)
	}
	return ev
}

// perms caches the permutation of each corpus size (scramble): size → *[2][]int32.
var perms sync.Map

// perm returns the corpus's permutation of [0, Events) and its inverse: a fixed random
// permutation (seed 1).
func (c Corpus) perm() *[2][]int32 {
	if p, ok := perms.Load(c.Events); ok {
		return p.(*[2][]int32)
	}
	r := rand.New(rand.NewPCG(1, 2))
	fwd, inv := make([]int32, c.Events), make([]int32, c.Events)
	for i, v := range r.Perm(c.Events) {
		fwd[i], inv[v] = int32(v), int32(i)
	}
	p, _ := perms.LoadOrStore(c.Events, &[2][]int32{fwd, inv})
	return p.(*[2][]int32)
}

// scramble maps an event's place in time g to what it holds: a bijection of [0, Events), so
// that the vocabulary's frequencies are exact and the terms are independent of session,
// project and time.
func (c Corpus) scramble(g int) int { return int(c.perm()[0][g]) }

// unscramble is the inverse of scramble: the place in time of the event that holds h.
func (c Corpus) unscramble(h int) int { return int(c.perm()[1][h]) }

// BenchQuery is one kind of query of the benchmarks: Make returns the i-th query of the kind.
type BenchQuery struct {
	Name string
	Make func(i int) search.Query
}

// Queries returns the benchmark's queries over the corpus: rare words, a phrase, filtered
// queries, the common word in both orders, a substring.
func (c Corpus) Queries(tb testing.TB) []BenchQuery {
	t := func(q string) []search.Term {
		ts, err := search.ParseTerms(q)
		if err != nil {
			tb.Fatal(err)
		}
		return ts
	}
	end := Base.Add(time.Duration(c.Events) * time.Second)
	return []BenchQuery{
		{"rare", func(i int) search.Query { return search.Query{Terms: t(RareWord(i * 7919 % c.Rare()))} }},
		{"phrase", func(int) search.Query { return search.Query{Terms: t(`"flaky integration test"`)} }},
		{"prefix", func(i int) search.Query { return search.Query{Terms: t(fmt.Sprintf("lex%03d*", i%200))} }},
		{"filtered/project+kind", func(i int) search.Query {
			return search.Query{Terms: t("deploy"), Project: fmt.Sprintf("p%d", i%10), Kind: "tool"}
		}},
		{"filtered/code+time", func(i int) search.Query {
			from := Base.Add(time.Duration(i%7) * end.Sub(Base) / 8)
			return search.Query{Code: ErrorCodes[i%len(ErrorCodes)], From: from, To: from.Add(end.Sub(Base) / 8)}
		}},
		{"filtered/rare+project", func(i int) search.Query {
			n := i * 7919 % c.Rare()
			return search.Query{Terms: t(RareWord(n)), Project: fmt.Sprintf("p%d", c.unscramble(n*100+31)%c.Sessions%10)}
		}},
		{"common/recent", func(int) search.Query { return search.Query{Terms: t("deploy")} }},
		{"common/relevance", func(int) search.Query { return search.Query{Terms: t("deploy"), Order: search.OrderRelevance} }},
		{"contains", func(i int) search.Query { return search.Query{Contains: fmt.Sprintf("pkg%03d/file", i%500)} }},
	}
}

// BenchSearch measures the first page (20 results) of each of the corpus's queries on b over
// st, one sub-benchmark per query kind, and reports the median and the 99th percentile in ms.
func BenchSearch(b *testing.B, c Corpus, st store.Store, be search.Backend) {
	ctx := context.Background()
	for _, bq := range c.Queries(b) {
		b.Run(bq.Name, func(b *testing.B) {
			took := make([]time.Duration, 0, b.N)
			empty := 0
			for i := 0; i < b.N; i++ {
				q := bq.Make(i)
				q.Limit = 20
				start := time.Now()
				p, err := search.Find(ctx, be, st, &q, nil)
				took = append(took, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				if len(p.Hits) == 0 {
					empty++
				}
			}
			if empty > 0 {
				b.Fatalf("%d of %d queries found nothing", empty, b.N)
			}
			sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
			b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
			b.ReportMetric(ms(took[min(len(took)-1, len(took)*99/100)]), "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

var _ = slices.Sort[[]int]
