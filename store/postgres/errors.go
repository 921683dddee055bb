package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sessiond/sessiond/store"
)

// SQLSTATE codes the driver acts on.
const (
	codeUniqueViolation      = "23505"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeAdminShutdown        = "57P01"
	codeCrashShutdown        = "57P02"
	codeCannotConnectNow     = "57P03"
	codeTooManyConnections   = "53300"
	codeDiskFull             = "53100"
	codeReadOnlyTransaction  = "25006" // a standby, or a primary demoted under the connection
	codeLockNotAvailable     = "55P03" // lock_timeout
	codeQueryCanceled        = "57014" // statement_timeout, or cancelled by an administrator
)

// transient reports whether err is a failure that the same operation may overcome when tried
// again on another connection: a lost or refused connection, a server shutting down or
// restarting, a serialization failure or deadlock, or a unique violation raced by another
// transaction. Context errors and the store's typed errors are never transient.
func transient(err error) bool {
	var de *doubtError
	if errors.As(err, &de) {
		return true // a write whose answer was lost (or did not come in time): try it again
	}
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var re *retryableError
	if errors.As(err, &re) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeUniqueViolation, codeSerializationFailure, codeDeadlockDetected,
			codeAdminShutdown, codeCrashShutdown, codeCannotConnectNow, codeTooManyConnections:
			return true
		}
		return len(pgErr.Code) == 5 && pgErr.Code[:2] == "08" // connection exception
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && !ne.Timeout() {
		return true
	}
	// pgx reports use of a connection it closed after a fatal error this way.
	return containsAny(err.Error(), "conn closed", "connection reset", "broken pipe", "unexpected EOF")
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// classify returns err as a [store.UnavailableError] when it says the database cannot serve the
// request now, and unchanged otherwise: SQLSTATE disk_full is store.Full; a connection that
// cannot be made (refused, or to a read-only standby: pgx's "read only connection"), is lost,
// or whose server is shutting down, starting, out of connections or read-only is
// store.Unreachable; a write sent when its connection was lost (inDoubt) is store.CommitUnknown.
// The errors of the operating system are classified by store.ClassifyOS, as for every driver.
func classify(err error) error {
	var de *doubtError
	if errors.As(err, &de) { // before the context errors: a write past its own deadline is in doubt
		return store.Unavailable(store.CommitUnknown, err)
	}
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeDiskFull:
			return store.Unavailable(store.Full, err)
		case codeAdminShutdown, codeCrashShutdown, codeCannotConnectNow, codeTooManyConnections, codeReadOnlyTransaction,
			codeLockNotAvailable, codeQueryCanceled:
			// The server cannot serve it now: down, starting, full of connections, read-only
			// (a failover), or the statement ran past lock_timeout or statement_timeout and was
			// rolled back.
			return store.Unavailable(store.Unreachable, err)
		}
		if strings.HasPrefix(pgErr.Code, "08") { // connection exception
			return store.Unavailable(store.Unreachable, err)
		}
		return err
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return store.Unavailable(store.Unreachable, err)
	}
	if c := store.ClassifyOS(err); c != err {
		return c
	}
	if transient(err) {
		return store.Unavailable(store.Unreachable, err) // a lost connection, tried again and lost again
	}
	return err
}

// doubtError is the failure of a write whose statements, COMMIT included, were sent but whose
// answer never came (the connection was lost): it may have committed.
type doubtError struct{ err error }

func (e *doubtError) Error() string { return e.err.Error() }
func (e *doubtError) Unwrap() error { return e.err }

// inDoubt returns err, the failure of a write sent with its COMMIT (or in one autocommitted
// statement), marked as in doubt when it is a lost connection (transient) or a deadline passed
// (the write phase's own: its callers never pass the caller's context) after pgx may have
// sent the write: not when the server answered with an error (then nothing was committed),
// nor when pgx says nothing was sent (pgconn.SafeToRetry), nor for any other failure.
func inDoubt(err error) error {
	var pgErr *pgconn.PgError
	if err == nil || errors.As(err, &pgErr) || pgconn.SafeToRetry(err) {
		return err
	}
	if !transient(err) && !errors.Is(err, context.DeadlineExceeded) && !pgconn.Timeout(err) {
		return err
	}
	return &doubtError{err}
}

// retry runs op until it succeeds, fails with an error that is not transient, or has been
// tried attempts times, waiting a little longer before each new try. It stops early when ctx
// ends, answering ctx's error. Its error is classified (classify).
func retry(ctx context.Context, attempts int, op func() error) error {
	var err error
	for i := 0; i < attempts; i++ {
		if i > 0 {
			t := time.NewTimer(time.Duration(i*i) * 20 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		if err = op(); !transient(err) {
			return classify(err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return classify(err)
}
