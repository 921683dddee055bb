package session

import (
	"errors"
	"fmt"

	"github.com/sessiond/sessiond/archive"
	"github.com/sessiond/sessiond/contract"
)

// RejectError is a request the domain refuses: a stable error code (one of the constants of
// [contract.ErrorCode]), a message that says what to do next, and whether sending the same
// request again may succeed. A command answers it inside its rejected result; the other
// operations return it as their error, and the HTTP API answers it with the code's status.
type RejectError struct {
	Code      contract.ErrorCode
	Message   string
	Retryable bool
}

func (e *RejectError) Error() string { return string(e.Code) + ": " + e.Message }

// reject returns a refusal with a formatted message.
func reject(code contract.ErrorCode, format string, args ...any) *RejectError {
	return &RejectError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// archiveRefusal turns a refusal of package archive into the domain's refusal: ARCHIVE_NOT_FOUND
// for [archive.ErrNotFound], ARCHIVE_INVALID for [archive.ErrInvalid]. Other errors (and nil)
// pass unchanged.
func archiveRefusal(err error) error {
	var e *archive.Error
	if !errors.As(err, &e) {
		return err
	}
	code := contract.CodeArchiveInvalid
	if errors.Is(e.Kind, archive.ErrNotFound) {
		code = contract.CodeArchiveNotFound
	}
	return &RejectError{Code: code, Message: e.Message}
}
