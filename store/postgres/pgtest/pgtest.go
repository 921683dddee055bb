// Package pgtest gives tests a PostgreSQL database of their own: a freshly created schema with
// a random name in the database that SESSIOND_TEST_POSTGRES names, dropped when the test ends.
//
// Run the PostgreSQL tests with, for example:
//
//	SESSIOND_TEST_POSTGRES='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' go test ./...
//
// Without the variable the tests that need a database are skipped, except under CI=true, where
// a missing database fails them.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvVar is the environment variable that holds the URL of the test database.
const EnvVar = "SESSIOND_TEST_POSTGRES"

// Hint says how to run the PostgreSQL tests.
const Hint = "set " + EnvVar + "=postgres://postgres@127.0.0.1:5432/test?sslmode=disable (any database the tests may create schemas in) to run them"

// BaseURL returns the URL in SESSIOND_TEST_POSTGRES. When it is empty it skips the test, or
// fails it when CI=true.
func BaseURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvVar)
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s is empty: the PostgreSQL tests must run in CI; %s", EnvVar, Hint)
		}
		t.Skipf("no PostgreSQL database for this test: %s", Hint)
	}
	return u
}

// Schema creates a schema with a random name in the test database, registers its removal
// (DROP SCHEMA ... CASCADE) with t.Cleanup, and returns the database URL with search_path set
// to it, ready for postgres.Open.
func Schema(t testing.TB) string {
	t.Helper()
	u, _ := NewSchema(t)
	return u
}

// NewSchema is Schema that also returns the schema's name.
func NewSchema(t testing.TB) (url, schema string) {
	t.Helper()
	base := BaseURL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "sessiond_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", EnvVar, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create schema %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("pgtest: connect to drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", name, err)
		}
	})
	return WithSearchPath(t, base, name), name
}

// WithSearchPath returns the database URL (or keyword/value string) u with search_path set to
// schema.
func WithSearchPath(t testing.TB, u, schema string) string {
	t.Helper()
	if !strings.Contains(u, "://") {
		return u + " search_path=" + schema
	}
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatalf("pgtest: %s is not a URL: %v", EnvVar, err)
	}
	q := pu.Query()
	q.Set("search_path", schema)
	pu.RawQuery = q.Encode()
	return pu.String()
}

// Admin connects to the test database itself (for tests that terminate backends or inspect
// pg_stat_activity) and closes the connection when the test ends.
func Admin(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, BaseURL(t))
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", EnvVar, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
