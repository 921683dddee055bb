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
