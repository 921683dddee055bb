package archive

import (
	"errors"
	"fmt"
)

// The two kinds of refusal of this package. Every refusal is an [*Error] that wraps one of
// them, so callers tell them apart with errors.Is; the session domain answers them with the
// error codes ARCHIVE_INVALID and ARCHIVE_NOT_FOUND.
var (
	// ErrInvalid: the file fails verification (truncated, checksum mismatch, another format,
	// a newer version, a header that disagrees with the content), or another file is stored
	// under its name.
	ErrInvalid = errors.New("invalid archive")
	// ErrNotFound: no archive by that name, or the name is not an archive name.
	ErrNotFound = errors.New("archive not found")
)

// Error is a refusal: its Kind (ErrInvalid or ErrNotFound) and a message that says what is
// wrong and what to do next. Error() is the message alone.
type Error struct {
	Kind    error
	Message string
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the kind, for errors.Is.
func (e *Error) Unwrap() error { return e.Kind }

func invalid(format string, args ...any) *Error {
	return &Error{Kind: ErrInvalid, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *Error {
	return &Error{Kind: ErrNotFound, Message: fmt.Sprintf(format, args...)}
}
