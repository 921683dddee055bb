package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sessiond/sessiond/search"
)

// SearchFile is the name of the search index's database file inside the data directory.
const SearchFile = "search.db"

// searchVersion is the version of the search index's schema: an index of another version is
// dropped and rebuilt (it is derived from the logs).
const searchVersion = 3

// searchReaders is how many connections serve searches at once.
const searchReaders = 4

// SearchIndex is the SQLite search backend (search.Backend): FTS5 tables in a database file of
// their own beside the store (search.db), so that the indexer's transactions never take the
// store's write lock (one writer per SQLite file) and the append path does not change. Its
// connections attach the store's file read-only, to compare logs with cursors and to filter by
// the sessions' and runs' current state. Get it with Store.Search; the Store closes it.
//
// Tables: docs (one row per event: key, session key, sequence, run, kind, tool, error code,
// the hash of its fields), fts (FTS5, contentless, one column per field, unicode61 tokens),
// sub (FTS5 trigram, contentless: paths and tool inputs, for substrings) and cursors (per
// session: the last sequence indexed and how far a compaction was followed). A document's key
// is its occurredAt in milliseconds << 20 plus a tie-breaker: the rowid of docs, and negated,
// the rowid of fts and sub, so that newest first is FTS5's ascending rowid order, which it
// walks without loading a term's whole document list (descending order loads it first).
type SearchIndex struct {
	w     *sql.Conn      // the one writing connection
	wmu   sync.Mutex     // guards w
	r     chan *sql.Conn // the reading connections
	db    *sql.DB
	path  string
	store string
}

var _ search.Backend = (*SearchIndex)(nil)

// Search returns the store's search index, opening (creating) search.db on first use.
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
	ix, err := openSearch(ctx, s.dir)
	if err != nil {
		return nil, err
	}
	s.search = ix
	return ix, nil
}

func openSearch(ctx context.Context, dir string) (*SearchIndex, error) {
	path := filepath.Join(dir, SearchFile)
	dsn := fileURI(path) + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=cache_size(-16384)&_pragma=temp_store(MEMORY)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open search index %s: %w", path, err)
	}
	db.SetMaxOpenConns(searchReaders + 1)
	db.SetMaxIdleConns(searchReaders + 1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	ix := &SearchIndex{db: db, path: path, store: filepath.Join(dir, DBFile), r: make(chan *sql.Conn, searchReaders)}
	fail := func(err error) (*SearchIndex, error) {
		ix.Close()
		return nil, fmt.Errorf("open search index %s: %w", path, err)
	}
	if ix.w, err = ix.conn(ctx); err != nil {
		return fail(err)
	}
	if err := migrateSearch(ctx, ix.w); err != nil {
		return fail(err)
	}
	for range searchReaders {
		c, err := ix.conn(ctx)
		if err != nil {
			return fail(err)
		}
		if _, err := c.ExecContext(ctx, `PRAGMA query_only = 1`); err != nil {
			return fail(err)
		}
		ix.r <- c
	}
	return ix, nil
}

// conn opens a connection with the store attached (as "store", read-only).
func (ix *SearchIndex) conn(ctx context.Context) (*sql.Conn, error) {
	c, err := ix.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := c.ExecContext(ctx, `ATTACH DATABASE ? AS store`, fileURI(ix.store)+"?mode=ro"); err != nil {
		c.Close()
		return nil, fmt.Errorf("attach the store: %w", err)
	}
	return c, nil
}

// Close closes the index's connections.
func (ix *SearchIndex) Close() error {
	if ix.w != nil {
		ix.w.Close()
	}
	for {
		select {
		case c := <-ix.r:
			c.Close()
			continue
		default:
		}
		break
	}
	return ix.db.Close()
}

// Path returns the index's file.
func (ix *SearchIndex) Path() string { return ix.path }

const searchSchema = `
CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE docs (
    key    INTEGER PRIMARY KEY,
    sk     INTEGER NOT NULL,
    seq    INTEGER NOT NULL,
    run_id TEXT    NOT NULL,
    kind   TEXT    NOT NULL,
    tool   TEXT    NOT NULL,
    code   TEXT    NOT NULL,
    hash   INTEGER NOT NULL,
    flags  INTEGER NOT NULL, -- 1: the document has text in fts; 2: also in sub
    UNIQUE (sk, seq)
);
CREATE INDEX docs_tool ON docs (tool, key) WHERE tool <> '';
CREATE INDEX docs_code ON docs (code, key) WHERE code <> '';
CREATE VIRTUAL TABLE fts USING fts5(text, title, tool, input, output, path, terminal, test, error,
    content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 0');
CREATE VIRTUAL TABLE sub USING fts5(s, content='', contentless_delete=1, tokenize='trigram');
CREATE TABLE cursors (
    sk      INTEGER PRIMARY KEY,
    seq     INTEGER NOT NULL,
    dropped INTEGER NOT NULL DEFAULT -1
);
`

// migrateSearch creates the schema, or drops and creates it when it is of another version.
func migrateSearch(ctx context.Context, c *sql.Conn) error {
	var v int64
	err := c.QueryRowContext(ctx, `SELECT value FROM main.meta WHERE name = 'version'`).Scan(&v)
	if err == nil && v == searchVersion {
		return nil
	}
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, t := range []string{"meta", "docs", "fts", "sub", "cursors"} {
		if _, err := tx.ExecContext(ctx, `DROP TABLE IF EXISTS main.`+t); err != nil {
			return err
		}
	}
	for _, stmt := range strings.Split(searchSchema, ";\n") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("create search schema: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO main.meta (name, value) VALUES ('version', ?)`, searchVersion); err != nil {
		return err
	}
	return tx.Commit()
}

func (ix *SearchIndex) reader(ctx context.Context) (*sql.Conn, func(), error) {
	select {
	case c := <-ix.r:
		return c, func() { ix.r <- c }, nil
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

// Pending implements search.Backend.
func (ix *SearchIndex) Pending(ctx context.Context) ([]search.Pending, error) {
	c, put, err := ix.reader(ctx)
	if err != nil {
		return nil, err
	}
	defer put()
	// Driven by the narrow tables, never by a scan of the sessions' wide rows: the heads (the
	// last sequence of every session appended to) against the cursors, the few sessions with
	// lifecycle state (compaction, restore) and the cursors that followed a compaction, and
	// the sessions created since the newest one with a cursor (a new session, an import).
	rows, err := c.QueryContext(ctx, `
WITH cand(sk) AS (
    SELECT h.sk FROM store.session_heads AS h LEFT JOIN main.cursors AS c ON c.sk = h.sk WHERE h.last_seq > coalesce(c.seq, -1)
    UNION SELECT l.sk FROM store.session_lifecycle AS l WHERE json_extract(l.data, '$.compactedThrough') IS NOT NULL
    UNION SELECT c.sk FROM main.cursors AS c WHERE c.dropped >= 0
    UNION SELECT s.sk FROM store.sessions AS s WHERE s.sk > (SELECT coalesce(max(sk), -1) FROM main.cursors))
SELECT id, indexed, last, compacted, dropped FROM (
    SELECT s.id AS id, coalesce(c.seq, -1) AS indexed, max(s.last_seq, coalesce(h.last_seq, -1)) AS last,
        coalesce(json_extract(l.data, '$.compactedThrough'), -1) AS compacted, coalesce(c.dropped, -1) AS dropped
    FROM cand JOIN store.sessions AS s ON s.sk = cand.sk
    LEFT JOIN store.session_heads AS h ON h.sk = s.sk
    LEFT JOIN store.session_lifecycle AS l ON l.sk = s.sk
    LEFT JOIN main.cursors AS c ON c.sk = s.sk)
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

// Apply implements search.Backend.
func (ix *SearchIndex) Apply(ctx context.Context, bs []*search.Batch) ([]int, error) {
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	tx, err := ix.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	ins, err := prepareInserts(ctx, tx)
	if err != nil {
		return nil, err
	}
	defer ins.close()
	var moved []int
	for i, b := range bs {
		var sk int64
		if err := tx.QueryRowContext(ctx, `SELECT sk FROM store.sessions WHERE id = ?`, b.SessionID).Scan(&sk); err != nil {
			return nil, fmt.Errorf("search index: session %q: %w", b.SessionID, err)
		}
		cur, dropped := int64(-1), int64(-1)
		switch err := tx.QueryRowContext(ctx, `SELECT seq, dropped FROM main.cursors WHERE sk = ?`, sk).Scan(&cur, &dropped); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return nil, err
		}
		if cur != b.From {
			moved = append(moved, i)
			continue
		}
		if b.Reset {
			if err := deleteDocs(ctx, tx, sk, -1, true); err != nil {
				return nil, err
			}
			dropped = -1
		}
		if b.DropThrough >= 0 {
			if err := deleteDocs(ctx, tx, sk, b.DropThrough, false); err != nil {
				return nil, err
			}
			dropped = b.DropThrough
		}
		if err := ins.docs(ctx, sk, b.Docs); err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO main.cursors (sk, seq, dropped) VALUES (?, ?, ?)
        ON CONFLICT (sk) DO UPDATE SET seq = excluded.seq, dropped = excluded.dropped`, sk, b.Through, dropped); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("search index: commit %d sessions: %w", len(bs), err)
	}
	return moved, nil
}

// insertRows is how many documents one INSERT statement adds: a statement's fixed cost (the
// driver's call, binding, stepping) is most of the cost of a small row, so rows go in groups.
const insertRows = 32

// inserts adds documents in a transaction: multi-row statements prepared once per
// transaction, and the next free key of each millisecond met.
type inserts struct {
	tx   *sql.Tx
	next map[int64]int64 // a millisecond's base key → the next free key
	// The statements for insertRows rows, and for fewer (the last group), by row count.
	doc, fts, sub map[int]*sql.Stmt
}

func prepareInserts(_ context.Context, tx *sql.Tx) (*inserts, error) {
	return &inserts{tx: tx, next: map[int64]int64{}, doc: map[int]*sql.Stmt{}, fts: map[int]*sql.Stmt{}, sub: map[int]*sql.Stmt{}}, nil
}

func (ins *inserts) close() {
	for _, m := range []map[int]*sql.Stmt{ins.doc, ins.fts, ins.sub} {
		for _, st := range m {
			st.Close()
		}
	}
}

// stmt returns the statement inserting n rows of cols columns into table, prepared on first use.
func (ins *inserts) stmt(ctx context.Context, cache map[int]*sql.Stmt, n int, head string, cols int) (*sql.Stmt, error) {
	if st, ok := cache[n]; ok {
		return st, nil
	}
	row := "(?" + strings.Repeat(", ?", cols-1) + ")"
	st, err := ins.tx.PrepareContext(ctx, head+" VALUES "+row+strings.Repeat(", "+row, n-1))
	if err != nil {
		return nil, err
	}
	cache[n] = st
	return st, nil
}

// key returns the next free key of the document's millisecond.
func (ins *inserts) key(ctx context.Context, at int64) (int64, error) {
	next, ok := ins.next[at]
	if !ok {
		if err := ins.tx.QueryRowContext(ctx, `SELECT coalesce(max(key) + 1, ?1) FROM main.docs WHERE key >= ?1 AND key < ?2`,
			at, at+1<<search.KeyShift).Scan(&next); err != nil {
			return 0, err
		}
	}
	if next >= at+1<<search.KeyShift {
		return 0, fmt.Errorf("search index: more than %d documents in the millisecond %d", 1<<search.KeyShift, at>>search.KeyShift)
	}
	ins.next[at] = next + 1
	return next, nil
}

// docs inserts the documents of session sk.
func (ins *inserts) docs(ctx context.Context, sk int64, docs []search.Doc) error {
	var docArgs, ftsArgs, subArgs []any
	var nDoc, nFTS, nSub int
	flush := func(force bool) error {
		for _, g := range []struct {
			n     *int
			args  *[]any
			cache map[int]*sql.Stmt
			head  string
			cols  int
		}{
			{&nFTS, &ftsArgs, ins.fts, `INSERT INTO main.fts (rowid, text, title, tool, input, output, path, terminal, test, error)`, 10},
			{&nSub, &subArgs, ins.sub, `INSERT INTO main.sub (rowid, s)`, 2},
			{&nDoc, &docArgs, ins.doc, `INSERT INTO main.docs (key, sk, seq, run_id, kind, tool, code, hash, flags)`, 9},
		} {
			if *g.n == 0 || (!force && *g.n < insertRows) {
				continue
			}
			st, err := ins.stmt(ctx, g.cache, *g.n, g.head, g.cols)
			if err != nil {
				return err
			}
			if _, err := st.ExecContext(ctx, *g.args...); err != nil {
				return fmt.Errorf("search index: insert documents: %w", err)
			}
			*g.n, *g.args = 0, (*g.args)[:0]
		}
		return nil
	}
	for i := range docs {
		d := &docs[i]
		key, err := ins.key(ctx, search.KeyOf(d.At))
		if err != nil {
			return err
		}
		flag := 0
		if !d.Empty() {
			flag = 1
			f := d.Fields
			ftsArgs = append(ftsArgs, -key, f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8])
			nFTS++
			if s := d.Substring(); s != "" {
				flag = 2
				subArgs = append(subArgs, -key, s)
				nSub++
			}
		}
		docArgs = append(docArgs, key, sk, d.Sequence, d.RunID, d.Kind, d.Tool, d.Code, search.FieldsHash(d), flag)
		nDoc++
		if err := flush(false); err != nil {
			return err
		}
	}
	return flush(true)
}

// deleteDocs deletes the session's documents with seq <= through (all when all).
func deleteDocs(ctx context.Context, tx *sql.Tx, sk, through int64, all bool) error {
	if all {
		through = 1 << 40
	}
	for _, q := range []string{
		`DELETE FROM main.fts WHERE rowid IN (SELECT -key FROM main.docs WHERE sk = ? AND seq <= ? AND flags > 0)`,
		`DELETE FROM main.sub WHERE rowid IN (SELECT -key FROM main.docs WHERE sk = ? AND seq <= ? AND flags > 1)`,
		`DELETE FROM main.docs WHERE sk = ? AND seq <= ?`,
	} {
		if _, err := tx.ExecContext(ctx, q, sk, through); err != nil {
			return fmt.Errorf("search index: delete documents: %w", err)
		}
	}
	return nil
}

// Reset implements search.Backend.
func (ix *SearchIndex) Reset(ctx context.Context) error {
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	tx, err := ix.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, q := range []string{`DELETE FROM main.docs`, `DELETE FROM main.cursors`,
		`INSERT INTO main.fts (fts) VALUES ('delete-all')`, `INSERT INTO main.sub (sub) VALUES ('delete-all')`} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("search index: reset: %w", err)
		}
	}
	return tx.Commit()
}

// Docs implements search.Backend.
func (ix *SearchIndex) Docs(ctx context.Context, sessionID string) (int64, []search.Digest, error) {
	c, put, err := ix.reader(ctx)
	if err != nil {
		return 0, nil, err
	}
	defer put()
	var sk int64
	if err := c.QueryRowContext(ctx, `SELECT sk FROM store.sessions WHERE id = ?`, sessionID).Scan(&sk); err != nil {
		return 0, nil, fmt.Errorf("search index: session %q: %w", sessionID, err)
	}
	cur := int64(-1)
	if err := c.QueryRowContext(ctx, `SELECT seq FROM main.cursors WHERE sk = ?`, sk).Scan(&cur); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, nil, err
	}
	rows, err := c.QueryContext(ctx, `SELECT seq, key, kind, run_id, tool, code, hash FROM main.docs WHERE sk = ? ORDER BY seq`, sk)
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
	c, put, err := ix.reader(ctx)
	if err != nil {
		return nil, err
	}
	defer put()
	rows, err := c.QueryContext(ctx, `SELECT s.id FROM main.cursors AS c JOIN store.sessions AS s ON s.sk = c.sk ORDER BY s.id`)
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

// bm25Weights weigh the fields for relevance: titles, tool names and errors count most.
const bm25Weights = `1.0, 2.0, 2.0, 0.5, 0.5, 1.0, 0.5, 1.0, 2.0`

// Search implements search.Backend.
func (ix *SearchIndex) Search(ctx context.Context, q *search.Query) ([]search.Result, error) {
	var (
		from  string
		rowid string // the driving table's rowid: -key for fts and sub, key for docs
		sign  = int64(-1)
		where []string
		args  []any
		score = "0.0"
	)
	switch {
	case len(q.Terms) > 0:
		from, rowid = `main.fts JOIN main.docs AS d ON d.key = -fts.rowid`, "fts.rowid"
		where, args = append(where, "fts MATCH ?"), append(args, search.FTS5(q.Terms))
		score = `-bm25(fts, ` + bm25Weights + `)`
		if q.Contains != "" {
			where, args = append(where, "fts.rowid IN (SELECT rowid FROM main.sub WHERE sub MATCH ?)"), append(args, search.FTS5Substring(q.Contains))
		}
	case q.Contains != "":
		from, rowid = `main.sub JOIN main.docs AS d ON d.key = -sub.rowid`, "sub.rowid"
		where, args = append(where, "sub MATCH ?"), append(args, search.FTS5Substring(q.Contains))
	default:
		from, rowid, sign = `main.docs AS d`, "d.key", 1
	}
	// Newest first is ascending rowid order for fts and sub (keys negated), descending for docs.
	order := " ASC"
	if sign > 0 {
		order = " DESC"
	}
	// keyBound adds "key op k" as a bound on the driving table's rowid.
	keyBound := func(op string, k int64) {
		if sign < 0 {
			op = map[string]string{">=": "<=", "<": ">", "<=": ">=", ">": "<"}[op]
		}
		where, args = append(where, rowid+" "+op+" ?"), append(args, sign*k)
	}
	from += ` JOIN store.sessions AS s ON s.sk = d.sk`
	eq := func(col, v string) {
		if v != "" {
			where, args = append(where, col+" = ?"), append(args, v)
		}
	}
	eq("s.project", q.Project)
	eq("s.agent_id", q.Agent)
	eq("s.status", q.Status)
	eq("json_extract(s.record, '$.role')", q.Role)
	eq("d.kind", q.Kind)
	eq("d.tool", q.Tool)
	eq("d.code", q.Code)
	if q.RunStatus != "" {
		where, args = append(where, "d.run_id <> '' AND EXISTS (SELECT 1 FROM store.runs AS r WHERE r.sk = d.sk AND r.run_id = d.run_id AND r.status = ?)"), append(args, q.RunStatus)
	}
	if !q.From.IsZero() {
		keyBound(">=", search.KeyOf(q.From))
	}
	if !q.To.IsZero() {
		keyBound("<", search.KeyOf(q.To))
	}
	cols := `d.key AS k, s.id AS sid, d.seq AS seq, d.run_id AS run_id, d.kind AS kind, ` + score + ` AS score`
	var stmt string
	if q.Order == search.OrderRelevance {
		if q.After != nil && q.After.Anchor != 0 {
			keyBound("<=", q.After.Anchor)
		}
		offset := 0
		if q.After != nil {
			offset = q.After.Offset
		}
		stmt = `SELECT k, sid, seq, run_id, kind, score, max(k) OVER () FROM (SELECT ` + cols + ` FROM ` + from + whereSQL(where) +
			` ORDER BY ` + rowid + order + ` LIMIT ` + fmt.Sprint(search.Candidates) + `) ORDER BY score DESC, k DESC LIMIT ? OFFSET ?`
		args = append(args, q.Limit+1, offset)
	} else {
		if q.After != nil {
			keyBound("<", q.After.Key)
		}
		stmt = `SELECT ` + cols + `, 0 FROM ` + from + whereSQL(where) + ` ORDER BY ` + rowid + order + ` LIMIT ?`
		args = append(args, q.Limit+1)
	}
	c, put, err := ix.reader(ctx)
	if err != nil {
		return nil, err
	}
	defer put()
	rows, err := c.QueryContext(ctx, stmt, args...)
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

func whereSQL(where []string) string {
	if len(where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(where, " AND ")
}
