package postgres

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sessiond/sessiond/store"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations returns the embedded migrations in version order.
func migrations() ([]store.Migration, error) { return store.Migrations(migrationFS, "migrations") }

// migrate brings the current schema (the first schema of the connection's search_path) to the
// newest embedded version. Everything happens in one transaction that first takes a
// transaction-scoped advisory lock keyed by the schema's name, so that several sessiond
// instances starting at once apply each migration exactly once: the others wait for the lock,
// then find the versions recorded in schema_migrations and have nothing left to do. DDL is
// transactional in PostgreSQL, so a failed migration leaves no trace. It refuses a schema
// migrated by a newer sessiond.
func migrate(ctx context.Context, conn *pgx.Conn) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("migrate: begin: %w", err)
	}
	defer tx.Rollback(context.Background()) // no-op after Commit
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('sessiond/migrate/' || current_schema(), 0))`); err != nil {
		return fmt.Errorf("migrate: take the migration lock: %w", err)
	}
	// Only create schema_migrations when it is missing: CREATE ... IF NOT EXISTS would need
	// the CREATE privilege on every start, not only when there is something to migrate.
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return fmt.Errorf("migrate: look for schema_migrations: %w", err)
	}
	if !exists {
		if _, err := tx.Exec(ctx, `CREATE TABLE schema_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("migrate: create schema_migrations: %w", err)
		}
	}
	var cur int
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&cur); err != nil {
		return fmt.Errorf("migrate: read the schema version: %w", err)
	}
	if cur > len(ms) {
		return fmt.Errorf("migrate: the database has schema version %d but this sessiond knows only up to %d; run a newer sessiond", cur, len(ms))
	}
	for _, m := range ms[cur:] {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("migrate %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			return fmt.Errorf("migrate %s: record the version: %w", m.Name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}
