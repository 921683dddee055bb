package store

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
)

// Unavailability says why the store cannot serve a request now although the request may be
// sound: the answer is not the request's fault, and the same request (with the same
// idempotency keys) may succeed later. The server answers each with its own code, never
// INTERNAL.
type Unavailability int

const (
	// Full: the disk or the quota the store writes to is full. Writes fail until an operator
	// frees space; reads go on.
	Full Unavailability = iota + 1
	// Unreachable: the database cannot be reached now — the connection is refused or lost, the
	// server is shutting down or starting, or it is a read-only standby (a failover is under
	// way).
	Unreachable
	// CommitUnknown: a write was being committed when the connection was lost (or its commit
	// could not be made durable): it may or may not have committed. Retrying it with the same
	// idempotency keys is safe and tells which (its events come back as duplicates when it had).
	CommitUnknown
	// Unwritable: the store refuses every write until sessiond restarts (the SQLite store after
	// a failed sync of its log).
	Unwritable
)

// String names u for messages and logs.
func (u Unavailability) String() string {
	switch u {
	case Full:
		return "store full"
	case Unreachable:
		return "store unreachable"
	case CommitUnknown:
		return "commit outcome unknown"
	case Unwritable:
		return "store unwritable"
	}
	return fmt.Sprintf("Unavailability(%d)", int(u))
}

// UnavailableError is a driver error classified by why the store cannot serve the request
// ([Unavailability]). Drivers return it (wrapped with context) for every failure of the
// database or its disk that is not a bug; compare with errors.As.
type UnavailableError struct {
	Why Unavailability
	Err error // the driver's error
}

func (e *UnavailableError) Error() string { return e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// Unavailable returns err classified as why. A nil err stays nil; an err already classified
// keeps its class, except that CommitUnknown overrides any other class: a write that may have
// committed must say so whatever kept it from knowing.
func Unavailable(why Unavailability, err error) error {
	if err == nil {
		return nil
	}
	var ue *UnavailableError
	if errors.As(err, &ue) && (ue.Why == why || why != CommitUnknown) {
		return err
	}
	return &UnavailableError{Why: why, Err: err}
}

// UnavailabilityOf returns the class of err, and false when err is not an *UnavailableError.
func UnavailabilityOf(err error) (Unavailability, bool) {
	var ue *UnavailableError
	if errors.As(err, &ue) {
		return ue.Why, true
	}
	return 0, false
}

// ClassifyOS returns err classified by the operating system's errors it wraps, the part of a
// driver's classification that is the same for every driver (each driver first classifies
// the errors only it knows: SQLite's result codes, PostgreSQL's SQLSTATEs): a full disk
// (ENOSPC) or quota (EDQUOT) is [Full]; a refused, reset or unreachable connection, a
// dial failure, or a connection closed under the request ([io.ErrUnexpectedEOF],
// [net.ErrClosed]) is [Unreachable]. Any other err is returned unchanged.
func ClassifyOS(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return Unavailable(Full, err)
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return Unavailable(Unreachable, err)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return Unavailable(Unreachable, err)
	}
	return err
}
