package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/sessiond/sessiond/store"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations returns the embedded migrations in version order.
func migrations() ([]store.Migration, error) { return store.Migrations(migrationFS, "migrations") }

// migrate brings the schema to the newest embedded version, one transaction per migration, and
// records the version in schema_version. It refuses a database newer than this binary.
func migrate(ctx context.Context, db *sql.DB) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var cur int
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&cur); err != nil {
		return fmt.Errorf("migrate: read schema version: %w", err)
	}
	if cur > len(ms) {
		return fmt.Errorf("migrate: the database has schema version %d but this sessiond knows only up to %d; run a newer sessiond", cur, len(ms))
	}
	for _, m := range ms[cur:] {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migrate %s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate %s: %w", m.Name, err)
		}
		if step := goSteps[m.Version]; step != nil {
			if err := step(ctx, tx); err != nil {
				tx.Rollback()
				return fmt.Errorf("migrate %s: %w", m.Name, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM schema_version`); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate %s: record version: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (?)`, m.Version); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate %s: record version: %w", m.Name, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migrate %s: commit: %w", m.Name, err)
		}
	}
	return nil
}

// goSteps are the parts of migrations that SQL cannot do, by version: each runs in its
// migration's transaction, after its SQL.
var goSteps = map[int]func(context.Context, *sql.Tx) error{
	14: backfillChains,
}

// backfillChainPage is how many events backfillChains reads at a time.
const backfillChainPage = 4096

// backfillChains computes the hash chain (store/chain.go) of every event stored before
// migration 0014, session by session in sequence order, stores it with the marked events
// (store.ChainMarked) and records each session's head hash.
// A session whose first kept event is not sequence 0 (compacted before the chain existed) has
// no record of its deleted events' hashes: its chain starts from store.ChainGenesis at the
// first kept event, and its base stays NULL.
func backfillChains(ctx context.Context, tx *sql.Tx) error {
	sks, err := tx.QueryContext(ctx, `SELECT sk FROM sessions ORDER BY sk`)
	if err != nil {
		return fmt.Errorf("chain the stored events: %w", err)
	}
	var keys []int64
	for sks.Next() {
		var sk int64
		if err := sks.Scan(&sk); err != nil {
			sks.Close()
			return fmt.Errorf("chain the stored events: %w", err)
		}
		keys = append(keys, sk)
	}
	if err := closeRows(sks); err != nil {
		return fmt.Errorf("chain the stored events: %w", err)
	}
	read, err := tx.PrepareContext(ctx, inBothTables(`SELECT rid, data FROM %[1]s WHERE rid > ?1 AND rid < ((?2 + 1) << 32)`)+` ORDER BY rid LIMIT ?3`)
	if err != nil {
		return fmt.Errorf("chain the stored events: %w", err)
	}
	defer read.Close()
	type row struct {
		rid  int64
		hash store.ChainHash
	}
	page := make([]row, 0, backfillChainPage)
	for _, sk := range keys {
		prev, after, found := store.ChainGenesis, sk<<32-1, false
		for {
			page = page[:0]
			rows, err := read.QueryContext(ctx, after, sk, backfillChainPage)
			if err != nil {
				return fmt.Errorf("chain the events of session key %d: %w", sk, err)
			}
			for rows.Next() {
				var r row
				var data []byte
				if err := rows.Scan(&r.rid, &data); err != nil {
					rows.Close()
					return fmt.Errorf("chain the events of session key %d: %w", sk, err)
				}
				prev = store.ChainNext(prev, data)
				r.hash = prev
				page = append(page, r)
			}
			if err := closeRows(rows); err != nil {
				return fmt.Errorf("chain the events of session key %d: %w", sk, err)
			}
			for _, r := range page {
				if !store.ChainMarked(r.rid & (1<<32 - 1)) {
					continue // only every store.ChainEvery-th event stores its hash
				}
				for _, table := range []string{"events", "event_tail"} {
					if _, err := tx.ExecContext(ctx, `UPDATE `+table+` SET hash = ? WHERE rid = ?`, r.hash[:], r.rid); err != nil {
						return fmt.Errorf("chain the events of session key %d: %w", sk, err)
					}
				}
			}
			if len(page) == 0 {
				break
			}
			found, after = true, page[len(page)-1].rid
		}
		if found {
			// A session imported after migration 0013 and never appended to since has no head
			// row: it gets one, at its last sequence.
			if _, err := tx.ExecContext(ctx, `INSERT INTO session_heads (sk, last_seq, head_hash) SELECT sk, `+lastSeqExpr+`, ?1 FROM sessions WHERE sk = ?2
				ON CONFLICT (sk) DO UPDATE SET head_hash = ?1`, prev[:], sk); err != nil {
				return fmt.Errorf("chain the events of session key %d: record the head: %w", sk, err)
			}
		}
	}
	return nil
}
