package search

import (
	"context"
	"fmt"

	"github.com/sessiond/sessiond/store"
)

// CheckReport is what Check found.
type CheckReport struct {
	// Sessions and Documents are how many sessions and documents were compared.
	Sessions, Documents int64
	// Behind is how many events past the index's cursors (not yet indexed: not an error).
	Behind int64
	// Problems describe each difference between the index and a rebuild, one per line.
	Problems []string
}

// maxProblems bounds the problems one Check reports.
const maxProblems = 100

// Check compares the index with a rebuild from the logs, document by document: for every
// session, the documents the index holds up to its cursor must be exactly the documents
// Extract makes of the events the log holds up to there (same sequences, kinds, runs, tools,
// error codes and FieldsHash of the text), none for a compacted event, and no session the
// store does not have. It reads every log once.
func Check(ctx context.Context, st store.Store, b Backend) (*CheckReport, error) {
	rep := &CheckReport{}
	problem := func(format string, a ...any) {
		if len(rep.Problems) < maxProblems {
			rep.Problems = append(rep.Problems, fmt.Sprintf(format, a...))
		}
	}
	known := map[string]bool{}
	after := ""
	for {
		list, next, err := st.ListSessions(ctx, store.ListFilter{After: after, Limit: 1000})
		if err != nil {
			return nil, fmt.Errorf("search check: list sessions: %w", err)
		}
		for _, s := range list {
			id := s.Record.SessionID
			known[id] = true
			rep.Sessions++
			if err := checkSession(ctx, st, b, id, s.LastSequence, rep, problem); err != nil {
				return nil, err
			}
		}
		if next == "" {
			break
		}
		after = next
	}
	ids, err := b.Sessions(ctx)
	if err != nil {
		return nil, fmt.Errorf("search check: the index's sessions: %w", err)
	}
	for _, id := range ids {
		if !known[id] {
			problem("session %q: the index holds a cursor, the store has no such session", id)
		}
	}
	return rep, nil
}

func checkSession(ctx context.Context, st store.Store, b Backend, id string, last int64, rep *CheckReport, problem func(string, ...any)) error {
	cursor, docs, err := b.Docs(ctx, id)
	if err != nil {
		return fmt.Errorf("search check: session %q: %w", id, err)
	}
	if cursor > last {
		problem("session %q: the index's cursor is %d, past the log's last sequence %d", id, cursor, last)
	}
	rep.Behind += max(last-cursor, 0)
	var want []Digest
	for after := int64(-1); after < cursor; {
		evs, err := st.ReadEvents(ctx, id, after, 1000)
		if err != nil {
			return fmt.Errorf("search check: read session %q: %w", id, err)
		}
		for _, ev := range evs {
			if ev.Sequence > cursor {
				break
			}
			d, err := Extract(ev)
			if err != nil {
				return fmt.Errorf("search check: session %q: %w", id, err)
			}
			want = append(want, DigestOf(&d))
		}
		if len(evs) < 1000 {
			break
		}
		after = evs[len(evs)-1].Sequence
	}
	rep.Documents += int64(len(docs))
	i, j := 0, 0
	for i < len(want) || j < len(docs) {
		switch {
		case j >= len(docs) || (i < len(want) && want[i].Sequence < docs[j].Sequence):
			problem("session %q: the event at %d is not in the index (its cursor is %d)", id, want[i].Sequence, cursor)
			i++
		case i >= len(want) || docs[j].Sequence < want[i].Sequence:
			problem("session %q: the index holds a document at %d that the log does not have", id, docs[j].Sequence)
			j++
		default:
			got, w := docs[j], want[i]
			got.Key = 0
			if got != w {
				problem("session %q: the document at %d differs from a rebuild: index %+v, rebuild %+v", id, w.Sequence, got, w)
			}
			i++
			j++
		}
	}
	return nil
}
