package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one embedded schema step; version is the number its file name starts with.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order; versions must be 1, 2, 3, ...
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, n := range names {
		base := strings.TrimPrefix(n, "migrations/")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and '_'", base)
		}
		b, err := migrationFS.ReadFile(n)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: versions must be 1, 2, 3, ... without gaps", m.name)
		}
	}
	return ms, nil
}

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
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("migrate %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
			return fmt.Errorf("migrate %s: record the version: %w", m.name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}
