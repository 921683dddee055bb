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
//
// The message is in the domain's terms: it names no HTTP route and no sessiond command. What
// the client can do about it is Remedy, which each edge words in its own terms (the HTTP API:
// server/remedies.go).
type RejectError struct {
	Code      contract.ErrorCode
	Message   string
	Retryable bool
	Remedy    Remedy
}

// Remedy is what a client can do about a refusal, in the domain's terms; the zero Remedy is
// none beyond the message.
type Remedy struct {
	Kind RemedyKind
	// Capability is the capability to turn on in the session's snapshot (EnableCapability).
	Capability string
	// Status is the session's status (NotLive).
	Status string
	// From and To are the status change the server makes, through the mechanism By (one of
	// contract's By* names) (ServerTransition).
	From, To, By string
	// Archive is the name of the archive to restore (RestoreArchive).
	Archive string
	// Then is what to do once the remedy is applied ("then archive it again"), or "".
	Then string
}

// RemedyKind is what kind of thing a client does about a refusal.
type RemedyKind int

const (
	// NoRemedy: nothing beyond what the message says.
	NoRemedy RemedyKind = iota
	// EnableCapability: if the runtime supports it, turn Capability on in the session's
	// snapshot, then send the command again.
	EnableCapability
	// NotLive: the session is closed (it stays closed: create a new session) or archived
	// (restore it first: it comes back paused); Status says which.
	NotLive
	// ServerTransition: the status change From → To is the server's to make, set off by By.
	ServerTransition
	// RestoreArchive: restore the archive named Archive first.
	RestoreArchive
)

// notLive is the remedy for a session whose status is not live (closed or archived); the
// zero Remedy for a live status.
func notLive(status string) Remedy {
	if live(status) {
		return Remedy{}
	}
	return Remedy{Kind: NotLive, Status: status}
}

// CommandRemedy is the remedy of the refusal of a command of commandType (the error of its
// result): turning on
// the capability the command needs, for CAPABILITY_UNAVAILABLE.
func CommandRemedy(commandType string, e *contract.CommandError) Remedy {
	if e == nil || e.Code != contract.CodeCapabilityUnavailable {
		return Remedy{}
	}
	p, _ := contract.PolicyOf(commandType)
	return Remedy{Kind: EnableCapability, Capability: p.Capability}
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

// ErrorCode is the refusal's code (contract.CodedError).
func (e *RejectError) ErrorCode() contract.ErrorCode { return e.Code }
