package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
	"github.com/sessiond/sessiond/store/storetest"
)

// TestClassify checks the driver's classification of its errors into the store's
// availability classes.
func TestClassify(t *testing.T) {
	pg := func(code string) error { return fmt.Errorf("op: %w", &pgconn.PgError{Code: code}) }
	for _, c := range []struct {
		name string
		err  error
		want store.Unavailability // 0: not classified
	}{
		{"disk full", pg(codeDiskFull), store.Full},
		{"admin shutdown", pg(codeAdminShutdown), store.Unreachable},
		{"cannot connect now", pg(codeCannotConnectNow), store.Unreachable},
		{"too many connections", pg(codeTooManyConnections), store.Unreachable},
		{"read-only transaction", pg(codeReadOnlyTransaction), store.Unreachable},
		{"connection failure", pg("08006"), store.Unreachable},
		{"connection refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), store.Unreachable},
		{"lost during commit", fmt.Errorf("write and commit: %w", inDoubt(io.ErrUnexpectedEOF)), store.CommitUnknown},
		{"server refused the commit", inDoubt(pg(codeSerializationFailure)), 0},
		{"write past its deadline", fmt.Errorf("commit a group of appends: %w", inDoubt(fmt.Errorf("timeout: %w", context.DeadlineExceeded))), store.CommitUnknown},
		{"lock timeout", pg(codeLockNotAvailable), store.Unreachable},
		{"statement timeout", pg(codeQueryCanceled), store.Unreachable},
		{"unique violation", pg(codeUniqueViolation), 0},
		{"syntax error: a bug", pg("42601"), 0},
		{"context canceled", context.Canceled, 0},
		{"other", errors.New("something"), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			why, ok := store.UnavailabilityOf(classify(c.err))
			if !ok {
				why = 0
			}
			if why != c.want {
				t.Errorf("classify(%v) = %v, want %v", c.err, why, c.want)
			}
		})
	}
}

// TestDoubtIsTriedAgain: a write whose answer was lost, or did not come before the write's own
// deadline, is tried again (Append's retry), unlike a caller's deadline.
func TestDoubtIsTriedAgain(t *testing.T) {
	if !transient(inDoubt(fmt.Errorf("timeout: %w", context.DeadlineExceeded))) {
		t.Error("a write past its own deadline is not tried again")
	}
	if !transient(inDoubt(io.ErrUnexpectedEOF)) {
		t.Error("a write whose connection was lost is not tried again")
	}
	if transient(context.DeadlineExceeded) {
		t.Error("the caller's deadline is tried again")
	}
}

// TestReadOnlyDatabase is what a failover looks like from an instance whose URL asks for a
// read-write server (target_session_attrs=read-write) while only a read-only one answers:
// appends, reads, creates and Ready fail with store.Unreachable (pgx: "read only connection"),
// never an unclassified error, and succeed again once the database takes writes.
func TestReadOnlyDatabase(t *testing.T) {
	admin := pgtest.Admin(t)
	ctx := context.Background()
	db := fmt.Sprintf("avail_%d", time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP DATABASE "+db+" WITH (FORCE)") })
	u, err := url.Parse(pgtest.BaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + db
	q := u.Query()
	q.Set("target_session_attrs", "read-write")
	u.RawQuery = q.Encode()
	st, err := Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	createSession(t, st, "s1")
	readOnly := func(on bool) {
		t.Helper()
		if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s SET default_transaction_read_only = %v", db, on)); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, db); err != nil {
			t.Fatal(err)
		}
	}
	readOnly(true)
	ev := storetest.Batch(t, "s1", "k", 1)
	for name, op := range map[string]func() error{
		"append": func() error { _, err := st.Append(ctx, "s1", ev, store.AppendOptions{}); return err },
		"read":   func() error { _, err := st.ReadEvents(ctx, "s1", -1, 10); return err },
		"create": func() error { return st.CreateSession(ctx, storetest.NewSession("s2", storetest.SessionSpec{})) },
		"ready":  func() error { return st.Ready(ctx) },
	} {
		err := op()
		if why, ok := store.UnavailabilityOf(err); !ok || why != store.Unreachable {
			t.Errorf("%s against a read-only database: %v, want a store.Unreachable error", name, err)
		}
	}
	readOnly(false)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := st.Append(ctx, "s1", ev, store.AppendOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("append 30 s after the database takes writes again: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
