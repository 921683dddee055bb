package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sessiond/sessiond/search"
)

// SearchIndex is the PostgreSQL search backend (search.Backend), in the store's schema:
// search_docs holds one row per event (key, session key, sequence, run, kind, tool, error code,
// the hash of its fields, a weighted tsvector of its fields with a GIN index, and its paths and
// tool inputs as text with a pg_trgm GIN index for substrings) and search_cursors the durable
// cursor of each session. The tsvector is made with the 'simple' configuration from the
// fields as search.Normalize splits them, so that words are split as on SQLite. A document's
// key is its occurredAt in milliseconds << 20 plus a tie-breaker: recency order is the order of
// the primary key. Any number of instances may index and search one schema: Apply takes the
// session's cursor row lock, and leaves out a batch whose cursor another instance moved.
// Get it with Store.Search.
type SearchIndex struct {
	pool *pgxpool.Pool
	// Trigram is the schema of the pg_trgm extension, "" when it could not be created (the
	// substring search then scans the documents the other conditions leave).
	trigram string
}

var _ search.Backend = (*SearchIndex)(nil)

// searchSchema creates the search tables when they do not exist (idempotent; the index is
// derived from the logs, so it is not part of the store's numbered migrations).
const searchSchema = `
CREATE TABLE IF NOT EXISTS search_docs (
    key    bigint  PRIMARY KEY,
    sk     bigint  NOT NULL,
    seq    bigint  NOT NULL,
    run_id text    NOT NULL,
    kind   text    NOT NULL,
    tool   text    NOT NULL,
    code   text    NOT NULL,
    hash   bigint  NOT NULL,
    tsv    tsvector NOT NULL,
    sub    text    NOT NULL,
    UNIQUE (sk, seq)
);
CREATE INDEX IF NOT EXISTS search_docs_tsv ON search_docs USING gin (tsv) WITH (fastupdate = off);
ALTER INDEX search_docs_tsv SET (fastupdate = off);
CREATE INDEX IF NOT EXISTS search_docs_kind ON search_docs (kind, key);
CREATE INDEX IF NOT EXISTS search_docs_tool ON search_docs (tool, key) WHERE tool <> '';
CREATE INDEX IF NOT EXISTS search_docs_code ON search_docs (code, key) WHERE code <> '';
CREATE TABLE IF NOT EXISTS search_cursors (
    sk      bigint PRIMARY KEY,
    seq     bigint NOT NULL,
    dropped bigint NOT NULL DEFAULT -1
);
`

// Search returns the store's search index, creating its tables (and the pg_trgm extension,
// when the role may) on first use.
func (s *Store) Search(ctx context.Context) (*SearchIndex, error) {
	s.searchMu.Lock()
	defer s.searchMu.Unlock()
	if s.search != nil {
		return s.search, nil
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.inflight.Done()
	ix := &SearchIndex{pool: s.pool}
	if err := ix.migrate(ctx); err != nil {
		return nil, fmt.Errorf("open search index: %w", err)
	}
	s.search = ix
	return ix, nil
}

func (ix *SearchIndex) migrate(ctx context.Context) error {
	// The extension is the database's, not the schema's: look for it first, create it in
	// public when missing (a trusted extension since PostgreSQL 13: a database owner may).
	find := func() string {
		var schema string
		_ = ix.pool.QueryRow(ctx, `SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'`).Scan(&schema)
		return schema
	}
	ix.trigram = find()
	if ix.trigram == "" {
		_, _ = ix.pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public`)
		ix.trigram = find()
	}
	tx, err := ix.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':sessiond-search'))`); err != nil {
		return err
	}
	for _, stmt := range strings.Split(searchSchema, ";\n") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("create search schema: %w", err)
		}
	}
	if ix.trigram != "" {
		if _, err := tx.Exec(ctx, `CREATE INDEX IF NOT EXISTS search_docs_sub ON search_docs USING gin (sub `+pgx.Identifier{ix.trigram, "gin_trgm_ops"}.Sanitize()+`) WITH (fastupdate = off) WHERE sub <> ''`); err != nil {
			return fmt.Errorf("create the trigram index: %w", err)
		}
	}
	return tx.Commit(ctx)
}

// Trigram reports whether substring searches have their trigram index (pg_trgm).
func (ix *SearchIndex) Trigram() bool { return ix.trigram != "" }

// Pending implements search.Backend.
func (ix *SearchIndex) Pending(ctx context.Context) ([]search.Pending, error) {
	// Driven by the narrow tables (every session has a head), not the sessions' wide rows.
	rows, err := ix.pool.Query(ctx, `
WITH cand AS (
    SELECT h.sk FROM session_heads AS h LEFT JOIN search_cursors AS c ON c.sk = h.sk WHERE h.last_seq > coalesce(c.seq, -1)
    UNION SELECT l.sk FROM session_lifecycle AS l WHERE l.data->>'compactedThrough' IS NOT NULL
    UNION SELECT c.sk FROM search_cursors AS c WHERE c.dropped >= 0)
SELECT id, indexed, last, compacted, dropped FROM (
    SELECT s.id AS id, coalesce(c.seq, -1) AS indexed, coalesce(h.last_seq, -1) AS last,
        coalesce((l.data->>'compactedThrough')::bigint, -1) AS compacted, coalesce(c.dropped, -1) AS dropped
    FROM cand JOIN sessions AS s ON s.sk = cand.sk
    LEFT JOIN session_heads AS h ON h.sk = s.sk
    LEFT JOIN session_lifecycle AS l ON l.sk = s.sk
    LEFT JOIN search_cursors AS c ON c.sk = s.sk) AS p
WHERE last > indexed OR compacted <> dropped`)
	if err != nil {
		return nil, fmt.Errorf("search index: pending sessions: %w", err)
	}
	defer rows.Close()
	var out []search.Pending
	for rows.Next() {
		var p search.Pending
		if err := rows.Scan(&p.SessionID, &p.Indexed, &p.Last, &p.Compacted, &p.Dropped); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// weights groups the fields by tsvector weight: A titles, tool names, errors; B text, tests;
// C paths, terminal output; D tool inputs and outputs.
var weights = [4][]int{
	{search.FieldTitle, search.FieldTool, search.FieldError},
	{search.FieldText, search.FieldTest},
	{search.FieldPath, search.FieldTerminal},
	{search.FieldInput, search.FieldOutput},
}

// Apply implements search.Backend.
func (ix *SearchIndex) Apply(ctx context.Context, bs []*search.Batch) ([]int, error) {
	tx, err := ix.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	var moved []int
	for i, b := range bs {
		var sk int64
		if err := tx.QueryRow(ctx, `SELECT sk FROM sessions WHERE id = $1`, b.SessionID).Scan(&sk); err != nil {
			return nil, fmt.Errorf("search index: session %q: %w", b.SessionID, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO search_cursors (sk, seq) VALUES ($1, -1) ON CONFLICT DO NOTHING`, sk); err != nil {
			return nil, err
		}
		var cur, dropped int64
		if err := tx.QueryRow(ctx, `SELECT seq, dropped FROM search_cursors WHERE sk = $1 FOR UPDATE`, sk).Scan(&cur, &dropped); err != nil {
			return nil, err
		}
		if cur != b.From {
			moved = append(moved, i)
			continue
		}
		if b.Reset {
			if _, err := tx.Exec(ctx, `DELETE FROM search_docs WHERE sk = $1`, sk); err != nil {
				return nil, err
			}
			dropped = -1
		}
		if b.DropThrough >= 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM search_docs WHERE sk = $1 AND seq <= $2`, sk, b.DropThrough); err != nil {
				return nil, err
			}
			dropped = b.DropThrough
		}
		if len(b.Docs) > 0 {
			if err := insertSearchDocs(ctx, tx, sk, b.Docs); err != nil {
				return nil, err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE search_cursors SET seq = $2, dropped = $3 WHERE sk = $1`, sk, b.Through, dropped); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("search index: commit %d sessions: %w", len(bs), err)
	}
	return moved, nil
}

func insertSearchDocs(ctx context.Context, tx pgx.Tx, sk int64, docs []search.Doc) error {
	// The keys: each document's millisecond, after the documents already there.
	bases := make([]int64, 0, len(docs))
	seen := map[int64]bool{}
	for i := range docs {
		if b := search.KeyOf(docs[i].At); !seen[b] {
			seen[b] = true
			bases = append(bases, b)
		}
	}
	next := make(map[int64]int64, len(bases))
	rows, err := tx.Query(ctx, `SELECT b, coalesce((SELECT max(key) + 1 FROM search_docs WHERE key >= b AND key < b + $2), b)
        FROM unnest($1::bigint[]) AS b`, bases, int64(1)<<search.KeyShift)
	if err != nil {
		return err
	}
	for rows.Next() {
		var b, n int64
		if err := rows.Scan(&b, &n); err != nil {
			rows.Close()
			return err
		}
		next[b] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	n := len(docs)
	var (
		keys, seqs, hashes        = make([]int64, n), make([]int64, n), make([]int64, n)
		runs, kinds, tools, codes = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		wa, wb, wc, wd, subs      = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		groups                    = [4][]string{wa, wb, wc, wd}
	)
	for i := range docs {
		d := &docs[i]
		b := search.KeyOf(d.At)
		keys[i] = next[b]
		next[b]++
		if keys[i] >= b+1<<search.KeyShift {
			return fmt.Errorf("search index: more than %d documents at %s", 1<<search.KeyShift, d.At)
		}
		seqs[i], hashes[i] = d.Sequence, search.FieldsHash(d)
		runs[i], kinds[i], tools[i], codes[i] = d.RunID, d.Kind, d.Tool, d.Code
		for w, fields := range weights {
			var parts []string
			for _, f := range fields {
				if t := search.Normalize(d.Fields[f]); t != "" {
					parts = append(parts, t)
				}
			}
			groups[w][i] = strings.Join(parts, " ")
		}
		subs[i] = d.Substring()
	}
	_, err = tx.Exec(ctx, `INSERT INTO search_docs (key, sk, seq, run_id, kind, tool, code, hash, tsv, sub)
        SELECT k, $1, s, r, kd, t, c, h,
            setweight(to_tsvector('simple', a), 'A') || setweight(to_tsvector('simple', b), 'B') ||
            setweight(to_tsvector('simple', cc), 'C') || setweight(to_tsvector('simple', d), 'D'), sub
        FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[],
            $9::text[], $10::text[], $11::text[], $12::text[], $13::text[]) AS u(k, s, r, kd, t, c, h, a, b, cc, d, sub)`,
		sk, keys, seqs, runs, kinds, tools, codes, hashes, wa, wb, wc, wd, subs)
	if err != nil {
		return fmt.Errorf("search index: insert documents: %w", err)
	}
	return nil
}

// Reset implements search.Backend.
func (ix *SearchIndex) Reset(ctx context.Context) error {
	_, err := ix.pool.Exec(ctx, `TRUNCATE search_docs, search_cursors`)
	if err != nil {
		return fmt.Errorf("search index: reset: %w", err)
	}
	return nil
}

// Docs implements search.Backend.
func (ix *SearchIndex) Docs(ctx context.Context, sessionID string) (int64, []search.Digest, error) {
	var sk int64
	if err := ix.pool.QueryRow(ctx, `SELECT sk FROM sessions WHERE id = $1`, sessionID).Scan(&sk); err != nil {
		return 0, nil, fmt.Errorf("search index: session %q: %w", sessionID, err)
	}
	cur := int64(-1)
	if err := ix.pool.QueryRow(ctx, `SELECT seq FROM search_cursors WHERE sk = $1`, sk).Scan(&cur); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, nil, err
	}
	rows, err := ix.pool.Query(ctx, `SELECT seq, key, kind, run_id, tool, code, hash FROM search_docs WHERE sk = $1 ORDER BY seq`, sk)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	var out []search.Digest
	for rows.Next() {
		var d search.Digest
		if err := rows.Scan(&d.Sequence, &d.Key, &d.Kind, &d.RunID, &d.Tool, &d.Code, &d.Hash); err != nil {
			return 0, nil, err
		}
		out = append(out, d)
	}
	return cur, out, rows.Err()
}

// Sessions implements search.Backend.
func (ix *SearchIndex) Sessions(ctx context.Context) ([]string, error) {
	rows, err := ix.pool.Query(ctx, `SELECT s.id FROM search_cursors AS c JOIN sessions AS s ON s.sk = c.sk ORDER BY s.id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// Search implements search.Backend.
func (ix *SearchIndex) Search(ctx context.Context, q *search.Query) ([]search.Result, error) {
	var (
		where    []string
		args     []any
		score    = "0.0::float8"
		exact    = -1 // the index in where of the exact text condition
		exactArg string
	)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if len(q.Terms) > 0 {
		// The words in any order (which the GIN index answers alone), then the query itself
		// (phrases and positions, checked on the documents): the first look counts with the
		// former only.
		loose := "to_tsquery('simple', " + arg(search.TSQueryLoose(q.Terms)) + ")"
		where = append(where, "d.tsv @@ "+loose)
		exactArg = arg(search.TSQuery(q.Terms))
		tq := "to_tsquery('simple', " + exactArg + ")"
		exact = len(where)
		where = append(where, "d.tsv @@ "+tq)
		score = "ts_rank_cd('{0.1, 0.2, 0.4, 1.0}', d.tsv, " + tq + ")::float8"
	}
	if q.Contains != "" {
		where = append(where, "d.sub ILIKE "+arg(search.LikePattern(q.Contains)))
		if ix.trigram != "" {
			where = append(where, "d.sub <> ''")
		}
	}
	eq := func(col, v string) {
		if v != "" {
			where = append(where, col+" = "+arg(v))
		}
	}

	eq("d.kind", q.Kind)
	eq("d.tool", q.Tool)
	eq("d.code", q.Code)
	if q.RunStatus != "" {
		where = append(where, "d.run_id <> '' AND EXISTS (SELECT 1 FROM runs AS r WHERE r.sk = d.sk AND r.run_id = d.run_id AND r.data->>'status' = "+arg(q.RunStatus)+")")
	}
	if !q.From.IsZero() {
		where = append(where, "d.key >= "+arg(search.KeyOf(q.From)))
	}
	if !q.To.IsZero() {
		where = append(where, "d.key < "+arg(search.KeyOf(q.To)))
	}
	from := ` FROM search_docs AS d JOIN sessions AS s ON s.sk = d.sk`
	cols := `d.key AS k, s.id AS sid, d.seq AS seq, d.run_id AS run_id, d.kind AS kind, ` + score + ` AS score`
	var offset int
	if q.Order == search.OrderRelevance {
		if q.After != nil && q.After.Anchor != 0 {
			where = append(where, "d.key <= "+arg(q.After.Anchor))
		}
		if q.After != nil {
			offset = q.After.Offset
		}
	} else if q.After != nil {
		where = append(where, "d.key < "+arg(q.After.Key))
	}
	// The session's conditions apart, their arguments last: the first look below reads
	// search_docs alone, with the arguments before them.
	nDocArgs := len(args)
	var swhere []string
	seq := func(col, v string) {
		if v != "" {
			swhere = append(swhere, col+" = "+arg(v))
		}
	}
	seq("s.project", q.Project)
	seq("s.agent_id", q.Agent)
	seq("s.status", q.Status)
	seq("s.record->>'role'", q.Role)
	// The page comes from the newest `want` matches: the page itself in recency order, the
	// candidate set in relevance order.
	want := q.Limit + 1
	if q.Order == search.OrderRelevance {
		want = search.Candidates
	}
	tx, err := ix.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	// Which plan is right depends on how many documents match, which the planner cannot
	// know for a word it has no statistics of: walking the key index from the newest end
	// finds a page of a common word at once and never ends for a rare one; the GIN (or
	// trigram) bitmap finds a rare word's few documents at once and sorts every match of a
	// common one. So: first the bitmap, at most probeRows matches, unordered; fewer means
	// these are all the matches (sorted here); otherwise the word is common, and the key
	// index is walked.
	var matches string
	if len(q.Terms) > 0 || q.Contains != "" {
		if _, err := tx.Exec(ctx, `SET LOCAL enable_indexscan = off; SET LOCAL enable_seqscan = off`); err != nil {
			return nil, err
		}
		var n int
		pw := where
		if exact >= 0 {
			pw = slices.Clone(where)
			pw[exact] = exactArg + "::text IS NOT NULL" // its argument still named
		}
		probe := `SELECT count(*) FROM (SELECT 1 FROM search_docs AS d` + whereClause(pw) + fmt.Sprintf(` LIMIT %d) AS p`, probeRows)
		if err := tx.QueryRow(ctx, probe, args[:nDocArgs]...).Scan(&n); err != nil {
			return nil, fmt.Errorf("search index: probe: %w", err)
		}
		if _, err := tx.Exec(ctx, `RESET enable_indexscan; RESET enable_seqscan`); err != nil {
			return nil, err
		}
		if n < probeRows {
			// The few documents through the bitmap, and their sessions looked up one by one.
			if _, err := tx.Exec(ctx, `SET LOCAL enable_indexscan = off; SET LOCAL enable_seqscan = off; SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off`); err != nil {
				return nil, err
			}
		} else {
			set := `SET LOCAL enable_bitmapscan = off; SET LOCAL enable_seqscan = off`
			if q.Order != search.OrderRelevance {
				set += `; SET LOCAL enable_sort = off` // the page in key order, no sort of the matches
			}
			if _, err := tx.Exec(ctx, set); err != nil {
				return nil, err
			}
		}
	}
	matches = `SELECT ` + cols + from + whereClause(append(where, swhere...)) + ` ORDER BY d.key DESC LIMIT ` + arg(want)
	var stmt string
	if q.Order == search.OrderRelevance {
		stmt = `SELECT k, sid, seq, run_id, kind, score, max(k) OVER () FROM (` + matches + `) AS c ORDER BY score DESC, k DESC LIMIT ` +
			arg(q.Limit+1) + ` OFFSET ` + arg(offset)
	} else {
		stmt = `SELECT k, sid, seq, run_id, kind, score, 0::bigint FROM (` + matches + `) AS c ORDER BY k DESC`
	}
	rows, err := tx.Query(ctx, stmt, args...)
	if err != nil {
		return nil, fmt.Errorf("search index: query: %w", err)
	}
	defer rows.Close()
	var out []search.Result
	for rows.Next() {
		var r search.Result
		if err := rows.Scan(&r.Key, &r.SessionID, &r.Sequence, &r.RunID, &r.Kind, &r.Score, &r.Anchor); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// probeRows is how many matches Search's first, unordered look takes at most: fewer are sorted
// as they are; as many or more mean a common word, found newest first by the key index.
const probeRows = 5000

func whereClause(where []string) string {
	if len(where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(where, " AND ")
}

var _ = sync.Mutex{}
